"""Requests per commit on S3, counted at a real moto server (``bench/requests.py`` behind ``bench/s3server.py``'s
counting middleware): an upper bound per commit kind and TTL mode, and the requests a commit must not make.

``U`` is the number of objects a snapshot uploads (its new blobs and its index). Native TTL mode records a data
blob's expiry in its metadata (no mark to remove) and tags the index, whose tag is removed in one request (S3 has
no bulk tagging call); lease mode writes a lease per object and removes them all in one bulk delete."""

from __future__ import annotations

import os
import tempfile

import pytest

from bench.requests import MODES, Measured, run
from bench.s3server import S3Server

KEYS, SIZE = 2_000, 2 << 20  # a small RocksDB: a 1% change is one new SST, the MANIFEST, CURRENT, OPTIONS


@pytest.fixture(scope="module")
def measured() -> dict[tuple[str, str], Measured]:
    work = tempfile.mkdtemp(prefix="requests-per-commit-")
    server = S3Server(os.path.join(work, "moto.log"))
    try:
        return {(m.kind, m.mode): m for m in run(server, keys=KEYS, size=SIZE)}
    finally:
        server.stop()


def _labels(m: Measured) -> list[str]:
    return m.to_json()["sequence"]


@pytest.mark.parametrize("mode", MODES)
def test_a_small_delta_commit_is_one_append(measured, mode):
    """A delta of 100 keys (5 KiB, under ``MAX_INLINE_CHANGELOG_BYTES``) of an open committer: its changelog goes
    inline in the record, so the commit is the exclusive create of the record and the listing after it (rule 1: a
    zombie that recreated a pruned generation sees newer records only there), in either TTL mode: no blob, no
    lease, no TTL removal (4 requests in native mode and 5 with leases before)."""
    m = measured[("delta", mode)]
    assert [label.split(" ")[0] for label in _labels(m)] == ["PUT", "LIST"], _labels(m)
    assert m.uploaded == 0 and m.depth == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_large_delta_commit_is_its_upload_and_one_append(measured, mode):
    """A delta above the inline bound: the changelog blob (and its lease) and the append (create, listing): 3
    requests in native mode (the blob's expiry is recorded in its metadata, never removed: no
    ``DeleteObjectTagging``), 4 with leases (the lease's removal waits for a later removal of the committer:
    ``blobstate.commit.deferred``). 6 and 6 before issue 31, then 4 and 5."""
    m = measured[("delta-blob", mode)]
    assert m.uploaded == 1
    assert len(m.requests) <= (3 if mode == "native" else 4), _labels(m)
    assert not [r for r in m.requests if r.method in ("DELETE", "POST")], _labels(m)
    assert not [r for r in m.requests if "tagging" in r.query and r.method == "GET"], "a tag set read before removal"


@pytest.mark.parametrize("mode", MODES)
def test_a_group_commit_is_one_append_and_its_parts_ttl_removals(measured, mode):
    """The driver's commit of a group of 4 changelog parts: the append (create, listing) and, in native mode, the
    parts' TTL removals, one request each (none here: this driver staged them itself, untagged); with leases their
    removal waits for a later removal of the committer (``blobstate.commit.deferred``). 11 and 4 before issue 31,
    then 2 + 4 and 3."""
    m = measured[("group", mode)]
    assert len(m.requests) <= (2 + 4 if mode == "native" else 2), _labels(m)
    assert mode == "native" or not [r for r in m.requests if r.method in ("DELETE", "POST")], _labels(m)


@pytest.mark.parametrize("mode", MODES)
def test_a_snapshot_of_an_open_committer_reads_nothing_it_knows(measured, mode):
    """The fourth 1% snapshot of an open committer, retention dropping one: its uploads (and leases), the append
    (create, listing: retention acts on that listing, taken after the append, its records known by their MD5), the
    TTL removals and retention's two bulk deletes (blobs, then records). No log read before the append (the
    committer's view is its own), no walk of the store's prefix (the snapshot it reuses from is one it saw through:
    ``HealWalks``), no index read (retention's indexes are ones it wrote). U + 5 requests in native mode (its data
    blobs' expiry recorded in their metadata: only the index's tag is removed), 2U + 5 with leases (on f14c140: 32
    and 29 for U = 5; then 2U + 5 native and 2U + 6 with leases, retention listing the log again)."""
    m = measured[("snapshot-open", mode)]
    assert m.uploaded >= 2
    assert len(m.requests) <= (m.uploaded + 5 if mode == "native" else 2 * m.uploaded + 5), _labels(m)
    assert not _walks(m), "a walk of the store's prefix"
    assert not [r for r in m.requests if r.kind == "GET"], "a read of a record, an index or a tag set"


def _walks(m: Measured) -> list[str]:
    """The walks of a store's own prefix (``<job>/<task>/<store>``: its blobs and indexes, rule 7) ``m`` made."""
    return [label for label in _labels(m) if label.startswith("LIST ") and label.split(" ", 1)[1].count("/") == 2]


def _reads(m: Measured) -> list[str]:
    """The records and indexes ``m`` read from the store."""
    return [label for label in _labels(m) if label.startswith("GET ") and ("/indexes/" in label
                                                                          or label.startswith("GET checkpoints/"))]


@pytest.mark.parametrize("kind", ["snapshot-cold", "snapshot"])
@pytest.mark.parametrize("mode", MODES)
def test_a_backup_verb_reads_the_log_once_and_walks_beside_the_index_read(measured, mode, kind):
    """``blobstate.backup`` of a 1% change in a fresh process (the fifth and sixth snapshots, retention dropping one
    each): the marker, the log's listing, the walk of the store's prefix (a fresh committer walks, rule 7; it shows the
    indexes too, issue 39 case 12), the uploads, the
    append (create, listing), the TTL removals beside retention's log read, two bulk deletes: nothing read after the
    commit point. The first of the two (``snapshot-cold``) found nothing in this host's object cache: it reads the
    records and the indexes (the previous one and the ones retention needs) beside the walk, U + 14 in native mode
    (one tag removed: the index's), 2U + 14 with leases (on f14c140: 43 requests for U = 6 and 37 for U = 5). The
    second (``snapshot``) finds what the first read and wrote in the object cache, checked against the listing's
    MD5s and the records' CRC32Cs: it reads no record and no index, U + 8 and 2U + 8 (U + 14 and 2U + 14 before
    writers used the object cache)."""
    m = measured[(kind, mode)]
    extra = 14 if kind == "snapshot-cold" else 8
    assert len(m.requests) <= (m.uploaded + extra if mode == "native" else 2 * m.uploaded + extra), _labels(m)
    if kind == "snapshot":
        assert not _reads(m), "the second process on this host reads records and indexes from its object cache"
    else:
        assert len(_reads(m)) >= 3, "nothing in the object cache: the records and indexes are read from the store"
    assert len(_walks(m)) == 1, "a fresh committer walks its store's prefix once (rule 7; its indexes: case 12)"
    record_lists = [r for r in m.requests if r.kind == "LIST" and "checkpoints" in r.query]
    assert len(record_lists) == 2, "the log listed at open and after the create (retention acts on that listing)"
    ordered = sorted(m.requests, key=lambda r: r.start)
    create = next(i for i, r in enumerate(ordered) if r.method == "PUT" and "checkpoints" in r.path)
    assert not [r for r in ordered[create:] if r.kind == "GET"], \
        "retention's records and indexes are read at open, beside the previous index, not after the commit point"


def test_the_file_log_reads_a_record_again_once_its_bytes_changed_and_drops_exactly_what_expires(s3_target):
    """The file log's record cache (by the MD5 S3 lists as the ETag) on a real moto server: a record replaced in
    place (damage, a hand edit) is read again, never served from memory; ``drop`` removes exactly the expiring
    records it is given, never one appended after them."""
    import boto3

    from blobstate.model import layout
    from blobstate.plugins.file_log import FileCheckpointLog
    from blobstate.repository.backends import open_blob_store
    from blobstate.testing.checkpoint_logs import make_checkpoint, new_key

    log = FileCheckpointLog(open_blob_store(s3_target.url, storage_options=s3_target.storage_options))
    key = new_key()
    written = [log.append(make_checkpoint(key), g) for g in range(4)]
    assert [cp.checkpoint_id for cp in log.history(key)] == [cp.checkpoint_id for cp in written]
    other = make_checkpoint(key).with_generation(2)  # the same generation, another record
    client = boto3.client("s3", endpoint_url=s3_target.storage_options["endpoint_url"], region_name="us-east-1",
                          aws_access_key_id="testing", aws_secret_access_key="testing")
    client.put_object(Bucket=s3_target.bucket, Key=f"repo/{layout.record_id(key, 2)}", Body=other.to_bytes())
    assert log.history(key)[1].checkpoint_id == other.checkpoint_id
    newer = log.append(make_checkpoint(key), 4)
    dropped = log.drop(key, [written[0], written[2]], first_kept=2)
    assert sorted(cp.generation for cp in dropped) == [1, 3]
    assert [cp.generation for cp in log.history(key)] == [2, 4, 5] and log.latest(key) == newer
    log.close()
