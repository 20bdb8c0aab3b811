"""State as data, the pure parts: the RocksDB entry encoding (``blobstate.restoring.entries``, checked against what
rocksdict itself writes, on a real RocksDB) and which batches a log can give the state or the changes of
(``blobstate.restoring.state``)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocksdict import AccessType, Options, Rdict

from blobstate.errors import BatchNotRetained, NothingToRestore
from blobstate.model.records import DELTA, Checkpoint, StoreKey
from blobstate.restoring import entries
from blobstate.restoring.entries import Undecoded
from blobstate.restoring.state import chain_at, change_range, plan_changes, state_range

KEY = StoreKey("j", "0", "s")
scalars = st.one_of(st.text(), st.binary(), st.integers(min_value=-(2**200), max_value=2**200),
                    st.floats(allow_nan=False), st.booleans())


def _raw_of(tmp_path, items: dict) -> dict[bytes, bytes]:
    """What rocksdict (default mode, as the bindings write) stores for ``items``: ``{raw key: raw value}``."""
    path = str(tmp_path / "db")
    db = Rdict(path)
    for k, v in items.items():
        db[k] = v
    db.close()
    raw = Rdict(path, options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return {bytes(k): bytes(v) for k, v in raw.items()}
    finally:
        raw.close()


@given(value=scalars)
def test_encode_and_decode_round_trip_every_type_the_bindings_write(value):
    decoded = entries.decode(entries.encode(value))
    assert type(decoded) is type(value) and decoded == value


def test_the_encoding_is_byte_for_byte_rocksdicts(tmp_path):
    values = ["", "é", b"", b"\x00\xff", 0, 1, -1, 127, 128, -128, -129, 255, 2**63, -(2**63) - 1, 10**40, 1.5,
              -0.0, math.inf, True, False]
    raw = _raw_of(tmp_path, {f"k{i}": v for i, v in enumerate(values)})
    for i, v in enumerate(values):
        assert raw[entries.encode(f"k{i}")] == entries.encode(v), v
    assert set(raw) == {entries.encode(f"k{i}") for i in range(len(values))}


def test_a_pickled_value_is_read_as_its_bytes_and_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):  # unpickling it would run code
            return (exec, ("raise SystemExit('unpickled')",))

    path = str(tmp_path / "db")
    db = Rdict(path)
    db["boom"] = Boom()
    db[7] = "seven"
    db.close()
    with entries.open_entries(path) as items:
        read = list(items)
    assert read[0][0] == "boom" and isinstance(read[0][1], Undecoded) and read[0][1].data[:1] == b"\x06"
    assert read[1] == (7, "seven")
    assert entries.type_name(read[0][1]) == "raw" and entries.encode(read[0][1]) == read[0][1].data
    assert isinstance(entries.decode(b"\x09abc"), Undecoded) and isinstance(entries.decode(b"\x02\xff"), Undecoded)


def test_a_store_rocksdict_did_not_write_is_read_as_raw_bytes(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path, options=Options(raw_mode=True))  # the bytewise comparator, as another program's RocksDB
    db[b"a"] = b"1"
    db.close()
    with entries.open_entries(path) as items:
        assert list(items) == [(Undecoded(b"a"), Undecoded(b"1"))]
    (tmp_path / "db" / "rocksdict-config.json").unlink()  # no record of the mode: raw, as rocksdict assumes
    with entries.open_entries(path) as items:
        assert list(items) == [(Undecoded(b"a"), Undecoded(b"1"))]


def test_encode_refuses_other_types():
    with pytest.raises(Exception, match="not list"):
        entries.encode([1])


def snap(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch, query_id="q")


def delta(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA,
                      changelog_blob_id=f"{KEY.prefix}/blobs/{gen:032x}", changelog_crc32c=7, changelog_size=5,
                      query_id="q")


def test_the_readable_batches_after_retention_pruned_the_oldest_deltas():
    # retention kept the snapshot of batch 3 and the deltas after it; deltas 2-3 linger before it
    history = [delta(3, 2), delta(4, 3), snap(5, 3), delta(6, 4), delta(7, 5)]
    assert state_range(history) == (3, 5)  # batch 2 needs deltas 0-1: gone
    assert change_range(history) == (2, 5)
    assert [d.batch_id for d in chain_at(history, 4, "s").deltas] == [4]
    with pytest.raises(BatchNotRetained, match="no longer holds the state of s after batch 2: the oldest readable "
                                               "batch is 3, the newest 5") as info:
        chain_at(history, 2, "s")
    assert (info.value.oldest, info.value.newest, info.value.exit_code) == (3, 5, 5)
    with pytest.raises(BatchNotRetained, match="does not hold yet"):
        chain_at(history, 6, "s")
    assert [d.batch_id for d in plan_changes(history, from_batch=3, to_batch=5, what="s")] == [3, 4, 5]
    assert [d.batch_id for d in plan_changes(history, from_batch=None, to_batch=None, what="s")] == [2, 3, 4, 5]
    with pytest.raises(BatchNotRetained, match="the oldest readable batch is 2"):
        plan_changes(history, from_batch=1, to_batch=4, what="s")


def test_a_log_without_deltas_gives_a_state_at_its_snapshots_batches_only():
    history = [snap(1, 3), snap(2, 7)]
    assert state_range(history) == (3, 7) and change_range(history) == (None, None)
    assert chain_at(history, 3, "s").snapshot.checkpoint_id == "s1"
    with pytest.raises(BatchNotRetained):
        chain_at(history, 5, "s")  # batches 4-5 changed the state; no record holds it
    with pytest.raises(NothingToRestore, match="changes of s in batches None..None: none"):
        plan_changes(history, from_batch=None, to_batch=None, what="s")
