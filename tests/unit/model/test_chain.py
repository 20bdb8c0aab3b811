"""Pure logic of delta stores: which records make up a state (``blobstate.model.chain``), what retention keeps, the
delta record's validation, and the changelog encoding and staged writes (``blobstate.model.changelog``, on a real
RocksDB)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocksdict import Rdict

from blobstate.errors import BrokenChainError, ConfigurationError, CorruptIndexError
from blobstate.model import changelog
from blobstate.model.chain import plan_chain, retention, valid_snapshots
from blobstate.model.records import DELTA, Checkpoint, StoreKey

KEY = StoreKey("j", "0", "s")


def snap(gen: int, batch: int | None) -> Checkpoint:
    cid = f"{gen:032x}"
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{cid}.json", 1, 10, 0, batch, query_id="q")


def delta(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA, changelog_blob_id=f"{KEY.prefix}/blobs/"
                      f"{gen:032x}", changelog_crc32c=7, changelog_size=5, query_id="q")


def test_a_snapshot_lands_after_later_deltas_and_the_chain_orders_by_batch():
    # deltas 0-3; the background snapshot of batch 1 lands after the delta of batch 3
    history = [delta(1, 0), delta(2, 1), delta(3, 2), delta(4, 3), snap(5, 1), delta(6, 4)]
    chain = plan_chain(history, 4)
    assert chain.snapshot.checkpoint_id == "s5" and [d.batch_id for d in chain.deltas] == [2, 3, 4]
    assert [d.batch_id for d in plan_chain(history, 2).deltas] == [2]
    assert plan_chain(history, 0).snapshot is None  # no snapshot at or below batch 0: the empty state + delta 0
    assert plan_chain(history).upto == 4


def test_a_rerun_batch_uses_its_newest_delta_and_invalidates_a_snapshot_of_the_first_run():
    history = [delta(1, 0), delta(2, 1), snap(3, 1), delta(4, 1), delta(5, 2)]  # batch 1 re-ran after the snapshot
    assert valid_snapshots(history) == []
    chain = plan_chain(history, 2)
    assert chain.snapshot is None and [d.checkpoint_id for d in chain.deltas] == ["d1", "d4", "d5"]


def test_a_missing_delta_breaks_the_chain():
    with pytest.raises(BrokenChainError, match="batch 2"):
        plan_chain([snap(1, 0), delta(2, 1), delta(3, 3)], 3)


def test_a_log_without_deltas_keeps_its_old_meaning():
    history = [snap(1, None), snap(2, None), snap(3, 7)]
    assert plan_chain(history).snapshot.generation == 3
    with pytest.raises(Exception, match="batch id <= 5"):
        plan_chain(history, 5)
    assert retention(history, 2) == (history[:1], history[1:])


def test_retention_keeps_each_retained_snapshots_following_deltas():
    history = [delta(1, 0), snap(2, 0), delta(3, 1), delta(4, 2), delta(5, 3), snap(6, 2), delta(7, 4),
               snap(8, 4), delta(9, 5)]
    expiring, retained = retention(history, 2)
    assert [cp.generation for cp in expiring] == [1, 2, 3, 4]  # snapshot 0 and the deltas up to batch 2
    assert [cp.generation for cp in retained] == [5, 6, 7, 8, 9]
    assert plan_chain(retained, 5).snapshot.generation == 8
    assert [d.batch_id for d in plan_chain(retained, 3).deltas] == [3]  # snapshot of batch 2, then delta 3
    assert plan_chain([cp for cp in retained if cp.generation != 8], 5).snapshot.generation == 6
    assert retention(history[:5], 2) == ([], history[:5])  # fewer snapshots than retained: keep everything


def test_delta_records_round_trip_and_are_validated():
    record = delta(3, 9)
    assert Checkpoint.from_bytes(record.to_bytes()).to_json() == record.to_json()
    assert record.to_json()["schemaVersion"] == 2 and snap(1, 2).to_json()["kind"] == "snapshot"
    plain = Checkpoint(KEY, "p", 1, f"{KEY.prefix}/indexes/{1:032x}.json", 1, 10, 0)
    assert "kind" not in plain.to_json() and plain.to_json()["schemaVersion"] == 1  # unchanged for old readers
    doc = record.to_json()
    import json

    for bad in ({"changelogBlobId": "other/0/s/blobs/" + "0" * 32}, {"indexBlobId": snap(1, 1).index_blob_id},
                {"batchId": None}, {"kind": "patch"}, {"changelogSizeInBytes": 1 << 40}):
        with pytest.raises(CorruptIndexError):
            Checkpoint.from_bytes(json.dumps({**doc, **bad}).encode())


scalars = st.one_of(st.text(max_size=20), st.binary(max_size=20), st.integers(), st.booleans(),
                    st.floats(allow_nan=False))


@given(st.lists(st.tuples(st.sampled_from([changelog.PUT, changelog.DELETE]), scalars, scalars), max_size=30))
def test_changelogs_round_trip(ops):
    ops = [(op, key, value if op == changelog.PUT else None) for op, key, value in ops]
    assert changelog.decode(changelog.encode(ops)) == ops


@given(st.binary(max_size=200))
def test_a_damaged_changelog_is_an_integrity_error_never_a_partial_list(data):
    try:
        changelog.decode(data)
    except CorruptIndexError:
        pass


def test_staged_writes_read_their_own_writes_and_apply_atomically(tmp_path):
    db = Rdict(str(tmp_path / "db"))
    try:
        db["a"], db["b"] = 1, "x"
        view = changelog.StagedWrites(db)
        view["a"] = view["a"] + 1
        del view["b"]
        view["c"] = b"\x00"
        assert (view.get("a"), "b" in view, view["c"], len(view)) == (2, False, b"\x00", 3)
        assert dict(view.items()) == {"a": 2, "c": b"\x00"}
        assert (db["a"], db["b"]) == (1, "x") and "c" not in db  # nothing reached the store yet
        with pytest.raises(ConfigurationError, match="encode it first"):
            view["d"] = {"not": "a scalar"}
        changelog.replay(db, changelog.encode(view.ops()))
        assert dict(db.items()) == {"a": 2, "c": b"\x00"}
    finally:
        db.close()
