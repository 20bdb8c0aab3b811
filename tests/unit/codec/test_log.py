"""``blobstate.codec.log.SealedCheckpointLog`` around a real file log (``file://`` under ``tmp_path``): a record goes
in sealed and comes out as it was; the inner log holds nothing but the clear fields it fences and orders by; a record
moved to another generation, store or repository, one left in the clear, or one sealed under another record's name
is a ``CorruptIndexError`` naming it; the retention calls hand back opened records."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
import zstandard

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.codec.log import SealedCheckpointLog, record_name
from blobstate.errors import CorruptIndexError
from blobstate.model import layout
from blobstate.model.records import (
    DELTA,
    GROUP,
    MAX_PARTITIONS,
    MAX_RECORD_BYTES,
    Checkpoint,
    PartitionEntry,
    SealedRecord,
    StoreKey,
)
from blobstate.plugins.file_log import FileCheckpointLog
from blobstate.plugins.fsspec_store import FsspecBlobStore

KEY = StoreKey("job", "0", "store")
OTHER = StoreKey("job", "0", "other")


def snapshot(key: StoreKey = KEY, n: int = 1, **fields) -> Checkpoint:
    return Checkpoint(key, f"cp-{n}", 0, layout.index_id(key, f"{n:032x}"), 0xABCDEF, 1234 + n, 1_700_000_000_000 + n,
                      batch_id=n, writer_id="host:1:ab", **fields)


def written(record: Checkpoint, generation: int) -> Checkpoint:
    """``record`` as a log gives it back at ``generation`` (its JSON form read again)."""
    return Checkpoint.from_bytes(record.with_generation(generation).to_bytes())


@pytest.fixture
def cipher():
    return ObjectCipher(new_key(), "repo-1")


@pytest.fixture
def inner(tmp_path):
    log = FileCheckpointLog(FsspecBlobStore(f"file://{tmp_path}/log"))
    yield log
    log.close()


@pytest.fixture
def sealed(inner, cipher):
    return SealedCheckpointLog(inner, cipher)


def test_the_name_a_record_is_bound_to():
    assert record_name(KEY, 7, "cp-7") == "job/0/store@7/cp-7"


def test_a_record_comes_back_as_it_went_in_and_the_inner_log_holds_only_its_clear_fields(sealed, inner):
    first = sealed.append(snapshot(n=1), 0)
    second = sealed.append(snapshot(n=2, query_id="q-1"), 1)
    assert (first.generation, second.generation) == (1, 2)
    assert first == written(snapshot(n=1), 1) and second == written(snapshot(n=2, query_id="q-1"), 2)
    assert sealed.latest(KEY) == second
    assert sealed.history(KEY) == [first, second]
    assert sealed.histories() == {KEY: [first, second]}
    assert sealed.keys() == [KEY]
    stored = inner.history(KEY)
    assert all(isinstance(cp, SealedRecord) for cp in stored)
    assert [(cp.generation, cp.checkpoint_id, cp.created_time_ms) for cp in stored] == [
        (1, "cp-1", first.created_time_ms), (2, "cp-2", second.created_time_ms)]
    for cp in stored:  # nothing the record seals is in the clear: not the index, its size, the writer, the query
        text = cp.to_bytes()
        assert b"indexes" not in text and b"host:1:ab" not in text and b"q-1" not in text and b"1235" not in text


def test_an_empty_log_has_no_latest_and_no_history(sealed):
    assert sealed.latest(KEY) is None and sealed.history(KEY) == [] and sealed.keys() == []


def test_a_delta_and_a_group_record_round_trip(sealed):
    delta = Checkpoint(KEY, "d-1", 0, "", 0, 0, 5, batch_id=3, kind=DELTA,
                       changelog_blob_id=layout.blob_id(KEY, "1" * 32), changelog_crc32c=9, changelog_size=77)
    assert sealed.append(delta, 0) == written(delta, 1)
    inline = replace(delta, checkpoint_id="d-2", changelog_blob_id="", changelog_inline="é".encode() * 10,
                     changelog_size=20)
    assert sealed.append(inline, 1).changelog_inline == "é".encode() * 10


def test_the_largest_group_record_still_fits_a_record_once_sealed(sealed, inner):
    entries = tuple(PartitionEntry(p, "snapshot", f"p{p}-batch-123456", 123456,
                                   layout.index_id(KEY, f"{p:032x}"), 0xFFFFFFFF, 1 << 30, 7, 99)
                    for p in range(MAX_PARTITIONS))
    group = Checkpoint(KEY, "g-1", 0, "", 0, 0, 1, batch_id=123456, kind=GROUP, num_partitions=MAX_PARTITIONS,
                       partitions=entries, query_id="q" * 200, lineage_id="l" * 200)
    assert len(group.with_generation(1).to_bytes()) < MAX_RECORD_BYTES
    back = sealed.append(group, 0)
    assert back.partitions == entries
    assert len(inner.latest(KEY).to_bytes()) <= MAX_RECORD_BYTES


def test_a_record_left_in_the_clear_is_refused(sealed, inner):
    inner.append(snapshot().with_generation(1), 0)
    with pytest.raises(CorruptIndexError, match=r"job/0/store@1 \(cp-1\).*not sealed.*encrypted") as info:
        sealed.latest(KEY)
    assert info.value.exit_code == 3


def test_a_record_under_another_repositorys_key_does_not_open(inner, cipher):
    SealedCheckpointLog(inner, ObjectCipher(new_key(), "repo-1")).append(snapshot(), 0)
    with pytest.raises(CorruptIndexError, match=r"corrupt checkpoint record job/0/store@1 \(cp-1\).*authenticate"):
        SealedCheckpointLog(inner, cipher).history(KEY)


@pytest.mark.parametrize("move", [
    lambda sr: replace(sr, generation=2),
    lambda sr: replace(sr, store_key=OTHER),
    lambda sr: replace(sr, checkpoint_id="cp-9"),
], ids=["another generation", "another store", "another checkpoint id"])
def test_a_sealed_record_moved_elsewhere_does_not_open(sealed, move):
    stored = sealed.seal(snapshot(), 1)
    assert sealed.open(stored) == snapshot().with_generation(1)
    with pytest.raises(CorruptIndexError, match="does not authenticate"):
        sealed.open(move(stored))


def test_another_repository_id_does_not_open_the_same_key(inner):
    key = new_key()
    stored = SealedCheckpointLog(inner, ObjectCipher(key, "repo-1")).seal(snapshot(), 1)
    with pytest.raises(CorruptIndexError, match="does not authenticate"):
        SealedCheckpointLog(inner, ObjectCipher(key, "repo-2")).open(stored)


def test_a_record_sealed_under_another_records_name_is_refused(sealed, cipher):
    log = sealed
    other = snapshot(n=2).with_generation(1)  # a genuine record of this repository, sealed under cp-1's name
    body = zstandard.ZstdCompressor(level=frame.LEVEL).compress(other.to_bytes())
    forged = SealedRecord.of(KEY, "cp-1", 1, 5, cipher.seal("record", record_name(KEY, 1, "cp-1"), body))
    with pytest.raises(CorruptIndexError, match=r"job/0/store@1 \(cp-1\): it holds another record"):
        log.open(forged)


def test_a_sealed_body_that_is_not_a_frame_is_a_corrupt_record(sealed, cipher):
    log = sealed
    bad = SealedRecord.of(KEY, "cp-1", 1, 5, cipher.seal("record", record_name(KEY, 1, "cp-1"), b"not zstd"))
    with pytest.raises(CorruptIndexError, match=r"corrupt checkpoint record job/0/store@1 \(cp-1\)"):
        log.open(bad)


def test_a_sealed_body_larger_than_a_record_is_refused(sealed, cipher):
    huge = zstandard.ZstdCompressor(level=frame.LEVEL).compress(b" " * (MAX_RECORD_BYTES + 1))
    bad = SealedRecord.of(KEY, "cp-1", 1, 5, cipher.seal("record", record_name(KEY, 1, "cp-1"), huge))
    with pytest.raises(CorruptIndexError, match="cp-1"):
        sealed.open(bad)


def test_a_re_append_that_finds_its_record_landed_returns_it_opened(sealed):
    record = sealed.append(snapshot(), 0)
    assert sealed.append(snapshot(), 0) == record


def test_prune_forget_and_drop_return_the_records_opened(sealed):
    records = [sealed.append(snapshot(n=n), n - 1) for n in range(1, 6)]
    assert sealed.prune(KEY, 4) == records[:1]
    assert sealed.can_forget
    assert sealed.forget(KEY, [records[1]]) == [records[1]]
    assert sealed.drop(KEY, [records[2]], first_kept=4) == [records[2]]
    assert sealed.history(KEY) == records[3:]


def test_a_removed_record_that_does_not_open_is_returned_as_stored(sealed, inner, cipher, caplog):
    inner.append(snapshot().with_generation(1), 0)  # written in the clear: it does not open
    sealed.append(snapshot(n=2), 1)
    with caplog.at_level(logging.WARNING, logger="blobstate.codec.log"):
        [removed] = sealed.prune(KEY, 1)
    assert removed == snapshot().with_generation(1)
    assert "removed a record that does not open" in caplog.text


def test_history_after_append_is_the_inner_logs_view_opened(sealed):
    record = sealed.append(snapshot(), 0)
    assert sealed.history_after_append(KEY, 60.0) == [record]
    assert sealed.history_after_append(KEY, 60.0) is None  # the view is used once


def test_history_after_append_is_none_without_the_capability(cipher, tmp_path):
    class PlainLog(FileCheckpointLog):
        history_after_append = None  # a log that does not offer the capability

    log = SealedCheckpointLog(PlainLog(FsspecBlobStore(f"file://{tmp_path}/plain")), cipher)
    log.append(snapshot(), 0)
    assert log.history_after_append(KEY, 60.0) is None


def test_the_wrapper_passes_other_attributes_to_the_inner_log(sealed, inner):
    assert sealed.url == inner.url and sealed.store is inner.store
