"""What blobstate wrote before records, leases and the marker became schemas (issue 28) stays readable, and is
written again byte for byte: ``written_before/`` holds objects captured from blobstate at 4594519 (a real backup's
record, records of every kind and schema version, markers with and without a log identity, leases of a blob and of
an index), and what issue 33's branch wrote before the merge made its formats schemas too (an encrypted repository's
marker, a sealed record)."""

from __future__ import annotations

from pathlib import Path

import pytest

from blobstate.model import layout
from blobstate.model.records import DELTA, GROUP, SNAPSHOT, Checkpoint, StoreKey
from blobstate.plugins.file_log import FileCheckpointLog
from blobstate.plugins.fsspec_store import FsspecBlobStore
from blobstate.repository.marker import parse_marker, read_marker

WRITTEN = Path(__file__).resolve().parent / "written_before"
KEY = StoreKey("job", "0", "store")


def old(name: str) -> bytes:
    return (WRITTEN / name).read_bytes()


@pytest.mark.parametrize("name, kind, version", [
    ("record-backup.json", SNAPSHOT, 1), ("record-snapshot-v1.json", SNAPSHOT, 1),
    ("record-snapshot-v2.json", SNAPSHOT, 2), ("record-delta-v2.json", DELTA, 2), ("record-group-v3.json", GROUP, 3),
])
def test_records_read_and_are_written_again_byte_for_byte(name, kind, version):
    record = Checkpoint.from_bytes(old(name), source=name)
    assert (record.kind, record.schema_version, record.store_key) == (kind, version, KEY)
    assert record.to_bytes() == old(name)


def test_every_field_of_the_old_records_is_read():
    group = Checkpoint.from_bytes(old("record-group-v3.json"))
    assert (group.query_id, group.lineage_id, group.num_partitions, group.batch_id) == ("q-1", "lin-1", 2, 14)
    assert group.key_columns == (("origin", "StringType()"), ("dest", "StringType()"))
    assert [(e.partition, e.kind, e.checkpoint_id, e.size, e.attempt, e.base) for e in group.partitions] == [
        (0, DELTA, "p0-14", 22, 1, 5), (1, DELTA, "p1-14", 23, 0, 0), (1, SNAPSHOT, "p1-13", 24, 0, 4)]
    delta = Checkpoint.from_bytes(old("record-delta-v2.json"))
    assert (delta.changelog_blob_id, delta.changelog_crc32c, delta.changelog_size) == (
        layout.blob_id(KEY, f"{3:032x}"), 5, 77)
    snapshot = Checkpoint.from_bytes(old("record-snapshot-v1.json"))
    assert (snapshot.index_crc32c, snapshot.index_size, snapshot.batch_id, snapshot.writer_id) == (
        0xFFFFFFFF, 1234, None, "host-a:101:9f8e")


def test_a_file_log_holding_an_old_record_reads_it(tmp_path):
    store = FsspecBlobStore(f"file://{tmp_path}")
    store.put_exclusive(layout.record_id(KEY, 1), old("record-backup.json"))
    log = FileCheckpointLog(store)
    [record] = log.history(KEY)
    assert log.keys() == [KEY] and record.generation == 1 and record.to_bytes() == old("record-backup.json")


@pytest.mark.parametrize("name, log", [("marker-v1.json", None),
                                       ("marker-v1-log.json", "sqlite:///var/lib/log.db?table=t")])
def test_markers_read_and_are_written_again_byte_for_byte(tmp_path, name, log):
    info = parse_marker(old(name))
    assert (info.format_version, info.checkpoint_log, info.created_by, len(info.repository_id)) == (
        1, log, "blobstate 0.1.0", 32)
    assert info.to_bytes() == old(name)
    (tmp_path / layout.MARKER).write_bytes(old(name))
    assert read_marker(FsspecBlobStore(f"file://{tmp_path}")) == info


@pytest.mark.parametrize("name, leased", [("lease-blob", layout.blob_id(KEY, f"{7:032x}")),
                                          ("lease-index", layout.index_id(KEY, f"{8:032x}"))])
def test_leases_read_and_are_written_again_byte_for_byte(tmp_path, name, leased):
    lease = layout.Lease.from_bytes(old(name))
    assert lease.blob_id == leased and lease.to_bytes() == old(name)
    path = tmp_path / layout.lease_id(leased)
    path.parent.mkdir(parents=True)
    path.write_bytes(old(name))
    store = FsspecBlobStore(f"file://{tmp_path}")
    assert store.expired(KEY.prefix, lease.expires_at_ms - 1) == []
    assert store.expired(KEY.prefix, lease.expires_at_ms) == [leased]


# -- what issue 33's branch (h33a) wrote before its formats became schemas in the merge ---------------------------
#: The file key ``marker-v2-encrypted.json``'s data key is wrapped with (32 bytes 0..31: a test key, nothing else).
H33A_KEY = bytes(range(32))


def test_an_encrypted_marker_reads_and_is_written_again_byte_for_byte(tmp_path):
    info = parse_marker(old("marker-v2-encrypted.json"))
    assert (info.format_version, info.checkpoint_log, sorted(info.encryption)) == (
        2, "repository", ["algorithm", "keyId", "keyProvider", "wrappedKey"])
    assert info.to_bytes() == old("marker-v2-encrypted.json")


def test_a_sealed_record_reads_is_written_again_byte_for_byte_and_opens_with_its_key(tmp_path):
    from blobstate.codec.keys import KeyConfig, open_cipher
    from blobstate.codec.log import SealedCheckpointLog
    from blobstate.model.records import SealedRecord

    sealed = Checkpoint.from_bytes(old("record-sealed-v3.json"))
    assert isinstance(sealed, SealedRecord) and (sealed.store_key, sealed.generation) == (KEY, 1)
    assert sealed.to_bytes() == old("record-sealed-v3.json")
    key = tmp_path / "k.key"
    key.write_bytes(H33A_KEY)
    key.chmod(0o600)
    info = parse_marker(old("marker-v2-encrypted.json"))
    cipher = open_cipher(info.encryption, info.repository_id, KeyConfig(key_file=str(key)), url="file:///r",
                         writing=False)
    store = FsspecBlobStore(f"file://{tmp_path}/log")
    record = SealedCheckpointLog(FileCheckpointLog(store), cipher).open(sealed)
    assert (record.index_size, record.index_crc32c, record.batch_id, record.writer_id) == (456, 123, 7, "host:1:ab")


@pytest.mark.parametrize("change, why", [
    (lambda d: {**d, "sealed": "not base64!"}, "base64"),
    (lambda d: {**d, "sealed": "A" * (64 << 10)}, "larger than any checkpoint record"),
    (lambda d: {**d, "generation": 0}, ">= 1"),
    (lambda d: {**d, "generation": True}, "int"),
    (lambda d: {k: v for k, v in d.items() if k != "storeName"}, "storeName"),
    (lambda d: {**d, "jobName": "a/b"}, "store key"),
    (lambda d: {**d, "schemaVersion": 4}, "<= 3"),
])
def test_a_damaged_sealed_record_is_a_corrupt_record(change, why):
    import json

    from blobstate.errors import CorruptIndexError

    doc = json.loads(old("record-sealed-v3.json"))
    with pytest.raises(CorruptIndexError, match="corrupt checkpoint record") as info:
        Checkpoint.from_bytes(json.dumps(change(doc)).encode())
    assert why in str(info.value)


@pytest.mark.parametrize("change, why", [
    (lambda e: "not an object", "object"),
    (lambda e: {k: v for k, v in e.items() if k != "wrappedKey"}, "wrappedKey"),
    (lambda e: {**e, "keyId": 7}, "str"),
    (lambda e: {**e, "keyId": "k" * 5000}, "length"),
])
def test_a_damaged_encryption_object_is_a_damaged_marker(change, why):
    import json

    from blobstate.errors import CorruptIndexError

    doc = json.loads(old("marker-v2-encrypted.json"))
    doc["encryption"] = change(doc["encryption"])
    with pytest.raises(CorruptIndexError, match="marker") as info:
        parse_marker(json.dumps(doc).encode())
    assert why in str(info.value)
