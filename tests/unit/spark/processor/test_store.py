"""The store view: reads through the batch's writes, range scans merging RocksDB with them, read-only over a DB."""

from __future__ import annotations

import pytest

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.store import Store, after


def test_a_scan_merges_rocksdb_with_the_batch_writes_in_key_order(db):
    group = b"\x11\x00\x01g"
    for k in (b"a", b"c", b"e", b"g"):
        db[group + k] = b"db-" + k
    db[b"\x11\x00\x02x"] = b"another space"
    db["text key"] = "the old update API's keys"
    store = Store(StagedWrites(db))
    store.put(group + b"b", b"new-b", group)
    store.put(group + b"c", b"new-c", group)
    store.delete(group + b"e", group)
    store.put(group + b"z", b"new-z", group)
    assert list(store.scan(group)) == [(group + b"a", b"db-a"), (group + b"b", b"new-b"), (group + b"c", b"new-c"),
                                       (group + b"g", b"db-g"), (group + b"z", b"new-z")]
    assert [k for k, _ in store.scan(group, group + b"b", group + b"g")] == [group + b"b", group + b"c"]
    assert store.get(group + b"e") is None and store.get(group + b"a") == b"db-a"


def test_writes_made_while_scanning_are_not_seen_by_that_scan(db):
    group = b"\x30P"
    store = Store(StagedWrites(db))
    store.put(group + b"1", b"", group)
    seen = []
    for key, _ in store.scan(group):
        seen.append(key)
        store.put(group + b"2", b"", group)
    assert seen == [group + b"1"] and len(list(store.scan(group))) == 2


def test_over_an_open_database_it_reads_and_refuses_writes(db):
    view = StagedWrites(db)
    Store(view).put(b"\x10k", b"v")
    apply_ops(db, view.ops())
    ro = Store(db)
    assert ro.get(b"\x10k") == b"v" and not ro.writable
    with pytest.raises(StateVariableError, match="read only"):
        ro.put(b"\x10k", b"w")


def test_after_is_the_first_key_past_a_prefix():
    assert after(b"\x11\x00\x01") == b"\x11\x00\x02"
    assert after(b"a\xff\xff") == b"b"
    assert all(after(p) > p + b"\xff" * 8 for p in (b"\x10", b"\x11\x00\xff"))
