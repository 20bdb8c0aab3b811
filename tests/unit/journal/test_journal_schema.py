"""Journal events as msgspec schemas (issue 28, "schemas, not hand parsers"): every event type round-trips through
the journal file, integers beyond 64 bits are a ``CorruptJournalError``, and declaring an event registers it."""

from __future__ import annotations

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import blobstate.journal.events as ev
from blobstate.errors import CorruptJournalError
from blobstate.journal.file import MAGIC, decode, encode


def _values(t: mi.Type) -> st.SearchStrategy:
    """Values of one field's declared type (read from the schema itself, so a new event is covered too)."""
    if isinstance(t, mi.StrType):
        return st.text(max_size=20)
    if isinstance(t, mi.IntType):
        return st.integers(t.ge, t.le)
    if isinstance(t, mi.NoneType):
        return st.none()
    if isinstance(t, mi.UnionType):
        return st.one_of(*map(_values, t.types))
    if isinstance(t, mi.VarTupleType):
        return st.lists(_values(t.item_type), max_size=3).map(tuple)
    raise AssertionError(f"no strategy for {t}")


def _events(cls: type[ev.Event]) -> st.SearchStrategy:
    info = mi.type_info(cls)
    return st.fixed_dictionaries({f.name: _values(f.type) for f in info.fields}).map(lambda kw: cls(**kw))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(ev.EVENT_TYPES)).flatmap(lambda name: _events(ev.EVENT_TYPES[name])))
def test_every_event_round_trips_through_the_journal_file(event):
    doc = ev.event_to_dict(event)
    assert list(doc)[:2] == ["type", "v"] and doc["type"] == event.type_name == type(event).__name__
    assert ev.event_from_dict(doc) == event
    read = decode(MAGIC + encode(event))
    assert read.events == (event,) and read.torn is None


def test_a_path_that_is_not_utf8_survives_the_journal():
    event = ev.LocalCheckpointCreated("c", 1, b"/data/caf\xe9".decode("utf-8", "surrogateescape"))
    assert decode(MAGIC + encode(event)).events == (event,)


@pytest.mark.parametrize("doc", [
    {"type": "CheckpointWritten", "v": 1, "commit_id": "c", "time_ms": 1, "generation": 1 << 63},
    {"type": "CheckpointWritten", "v": 1, "commit_id": "c", "time_ms": -(1 << 63) - 1, "generation": 1},
    {"type": "BlobUploaded", "v": 1, "commit_id": "c", "time_ms": 1, "blob_id": "b", "size": 1 << 64},
    {"type": "CommitStarted", "v": 1, "commit_id": "c", "time_ms": 1, "store_key": "j/t/s",
     "expected_generation": 0, "batch_id": 1 << 70},
    {"type": "BlobUploaded", "v": 1, "commit_id": "c", "time_ms": 1, "blob_id": "b", "size": 1.5},
    {"type": "TtlRemoved", "v": 1, "commit_id": "c", "time_ms": 1, "blob_ids": ["a", 1]},
    {"type": "CheckpointWritten", "v": 1, "commit_id": "c", "time_ms": 1},
    {"type": "CheckpointWritten", "v": "one", "commit_id": "c", "time_ms": 1, "generation": 1},
    ["CheckpointWritten"],
])
def test_an_event_beyond_its_schema_is_a_corrupt_journal_error(doc):
    with pytest.raises(CorruptJournalError, match="unreadable journal event"):
        ev.event_from_dict(doc)


def test_declaring_an_event_registers_it_under_its_class_name(monkeypatch):
    monkeypatch.setattr(ev, "EVENT_TYPES", dict(ev.EVENT_TYPES))

    class BudgetChecked(ev.Event):
        remaining_ms: ev.Int64 = 0

    assert ev.EVENT_TYPES["BudgetChecked"] is BudgetChecked and BudgetChecked.type_name == "BudgetChecked"
    event = BudgetChecked("c", 1, 5)
    assert ev.event_to_dict(event) == {"type": "BudgetChecked", "v": 1, "commit_id": "c", "time_ms": 1,
                                       "remaining_ms": 5}
    assert decode(MAGIC + encode(event)).events == (event,)
    with pytest.raises(msgspec.ValidationError):  # the tag is the class name, checked by msgspec
        msgspec.convert({"type": "Other", "commit_id": "c", "time_ms": 1}, BudgetChecked)
    with pytest.raises(TypeError, match="must be its class name"):
        class Misnamed(ev.Event):
            type_name = "SomethingElse"
