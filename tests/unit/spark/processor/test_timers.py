"""Timers: both indexes, idempotent register/delete, what is due at a threshold."""

from __future__ import annotations

from blobstate.model.changelog import StagedWrites
from blobstate.spark.processor.store import Store
from blobstate.spark.processor.timers import Timers


def test_register_list_due_delete(db):
    store = Store(StagedWrites(db))
    timers = Timers(store, "ProcessingTime")
    assert timers.register(b"a", 200) and timers.register(b"a", 100) and timers.register(b"b", 100)
    assert not timers.register(b"a", 100)  # registered already: nothing changes
    assert timers.of_key(b"a") == [100, 200] and timers.of_key(b"b") == [100] and timers.of_key(b"c") == []
    assert timers.due(99) == [] and timers.due(100) == [(100, b"a"), (100, b"b")]
    assert timers.due(10**9) == [(100, b"a"), (100, b"b"), (200, b"a")]
    assert timers.delete(b"a", 100) and not timers.delete(b"a", 100)
    assert list(timers.all()) == [(100, b"b"), (200, b"a")]
    assert Timers(store, "EventTime").due(10**9) == []  # the other mode's index is separate
    assert timers.earliest() == 100 and Timers(store, "EventTime").earliest() is None
