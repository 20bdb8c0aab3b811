"""The checkpoint log of an encrypted repository (``blobstate.codec.log.SealedCheckpointLog``) keeps the whole
``CheckpointLog`` contract around a real log plugin (the file log on local disk: fencing, idempotent re-appends,
pruning, malformed records), and what sealing adds: a record moved to another generation, a record in the clear
and a record sealed under another key are refused, and a group record of ``MAX_PARTITIONS`` partitions fits."""

from __future__ import annotations

import json

import pytest

from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.codec.log import SealedCheckpointLog
from blobstate.errors import CorruptIndexError
from blobstate.model.records import (
    DELTA,
    GROUP,
    MAX_INLINE_CHANGELOG_BYTES,
    MAX_PARTITIONS,
    MAX_RECORD_BYTES,
    Checkpoint,
    PartitionEntry,
)
from blobstate.plugins.file_log import open_file_log, record_id
from blobstate.testing.checkpoint_logs import CheckpointLogContract, make_checkpoint
from blobstate.testing.checkpoint_logs import new_key as new_store_key

DATA_KEY = new_key()


class TestSealedFileLog(CheckpointLogContract):
    def create_log(self):
        return SealedCheckpointLog(open_file_log(f"file://{self.tmp_path}/repo"), ObjectCipher(DATA_KEY, "repo-1"))

    def write_raw_record(self, log, key, generation, payload):
        log.store.put_exclusive(record_id(key, generation), payload)

    def create_unreachable_log(self):
        (self.tmp_path / "a-file").write_bytes(b"not a directory")
        return SealedCheckpointLog(open_file_log(f"file://{self.tmp_path}/a-file/repo"),
                                   ObjectCipher(DATA_KEY, "repo-1"))


@pytest.fixture
def sealed(tmp_path) -> SealedCheckpointLog:
    return SealedCheckpointLog(open_file_log(f"file://{tmp_path}/repo"), ObjectCipher(DATA_KEY, "repo-1"))


def test_a_record_is_stored_sealed_and_opens_only_where_it_was_written(sealed, tmp_path):
    key = new_store_key()
    first = sealed.append(make_checkpoint(key), 0)
    second = sealed.append(make_checkpoint(key), 1)
    raw = (tmp_path / "repo" / record_id(key, 1)).read_bytes()
    doc = json.loads(raw)
    assert doc["kind"] == "sealed" and first.index_blob_id.encode() not in raw  # what it names: sealed
    assert (doc["jobName"], doc["generation"], doc["checkpointId"]) == (key.job, 1, first.checkpoint_id)
    assert sealed.history(key) == [first, second]
    # the sealed body of generation 1 copied over generation 2 (its clear fields rewritten to match) does not open
    moved = dict(doc, generation=2, checkpointId=second.checkpoint_id)
    (tmp_path / "repo" / record_id(key, 2)).write_bytes(json.dumps(moved).encode())
    with pytest.raises(CorruptIndexError, match="does not authenticate"):
        sealed.latest(key)
    # a record in the clear (written without the key) is refused
    (tmp_path / "repo" / record_id(key, 2)).write_bytes(second.to_bytes())
    with pytest.raises(CorruptIndexError, match="not sealed"):
        sealed.history(key)
    # and so is a record sealed under another data key, or for another repository
    for cipher in (ObjectCipher(new_key(), "repo-1"), ObjectCipher(DATA_KEY, "repo-2")):
        with pytest.raises(CorruptIndexError, match="does not authenticate"):
            SealedCheckpointLog(sealed.inner, cipher).history(key)


def test_a_group_record_of_the_most_partitions_fits_sealed(sealed):
    key = new_store_key()
    parts = tuple(PartitionEntry(p, DELTA, f"1700000000000-{p:08x}", 10**9, f"{key.prefix}/blobs/{p:032x}",
                                 4_000_000_000, 10**9, attempt=3, base=10**6) for p in range(MAX_PARTITIONS))
    group = Checkpoint(key, "1700000000000-abcdef12", 0, "", 0, 0, 1_700_000_000_000, 10**9, "writer-" + "w" * 60,
                       kind=GROUP, query_id="q" * 36, num_partitions=MAX_PARTITIONS, partitions=parts)
    assert len(group.to_bytes()) > MAX_RECORD_BYTES * 0.6
    stored = sealed.seal(group, 1)
    assert len(stored.to_bytes()) < MAX_RECORD_BYTES
    assert sealed.append(group, 0).to_json() == group.with_generation(1).to_json()


def test_a_delta_carrying_the_largest_inline_changelog_fits_sealed(sealed):
    """Random bytes (neither zstd nor base64 gains anything on them) of ``MAX_INLINE_CHANGELOG_BYTES``, inline in a
    delta record with every text field at its longest: the sealed record stays under ``MAX_RECORD_BYTES`` and the
    payload comes back byte for byte."""
    import os

    key = new_store_key()
    payload = os.urandom(MAX_INLINE_CHANGELOG_BYTES)
    delta = Checkpoint(key, "1700000000000-abcdef12", 0, "", 0, 0, 1_700_000_000_000, 10**9, "w" * 200, kind=DELTA,
                       changelog_crc32c=4_000_000_000, changelog_size=len(payload), query_id="q" * 200,
                       lineage_id="l" * 200, changelog_inline=payload)
    assert len(sealed.seal(delta, 1).to_bytes()) < MAX_RECORD_BYTES
    assert sealed.append(delta, 0).changelog_inline == payload
    assert sealed.history(key)[0].changelog_inline == payload


def test_retention_drops_through_the_sealed_log_exactly_the_expiring_records_without_reading_the_log(sealed,
                                                                                                   monkeypatch, caplog):
    """``SealedCheckpointLog.drop`` is the inner log's ``drop`` (the file log's one bulk delete of exactly the
    records the caller read: no listing, no record read), and hands back the opened records it was given."""
    key = new_store_key()
    written = [sealed.append(make_checkpoint(key), g) for g in range(5)]
    expiring = [cp for cp in sealed.history(key) if cp.generation in (1, 2, 4)]

    def refused(*_args, **_kwargs):
        raise AssertionError("drop read the log again")

    monkeypatch.setattr(sealed.inner.store, "list", refused)
    monkeypatch.setattr(sealed.inner.store, "get_bounded", refused)
    dropped = sealed.drop(key, expiring, first_kept=3)
    monkeypatch.undo()
    assert dropped == [written[0], written[1], written[3]] and "does not open" not in caplog.text
    assert sealed.history(key) == [written[2], written[4]]
