"""This host's cache of a repository's immutable objects (``blobstate.local.object_cache``), as ``list`` and ``gc``
use it: an entry is trusted only when its bytes match what the repository says in the same run (an index: its
record's size and CRC32C; a record: the MD5 its listing gives it), and gc takes an index from it only while the
store still lists that index. Real subprocesses against file:// (indexes: their check is the same on every store)
and the moto S3 server (records: a file:// listing carries no MD5, so there records are not cached)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import msgspec
import pytest
from fixtures_core import write_keys

from blobstate.local import workdir
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import record_id
from blobstate.model.records import StoreKey

KEY = StoreKey("j", "0", "s")
DAY_MS = 86_400_000


@pytest.fixture
def target(tmp_path):
    from fault_harness import Target

    return Target(f"file://{tmp_path}/repo")  # an index's check is the store's plain bytes against its record


def _entry(work_base: Path, repo_url: str, name: str) -> Path:
    """The cache file of object ``name`` (``ObjectCache._path``'s layout, spelled out)."""
    digest = hashlib.sha256(name.encode()).hexdigest()
    return work_base / "cache" / workdir.repository_hash(repo_url) / digest[:2] / digest


def _two_snapshots(cli, target, tmp_path) -> list[dict]:
    """Two retained snapshots of KEY whose second one has blobs the first lacks; then ``list`` (warms the cache)."""
    store = tmp_path / "s"
    for seed in (1, 2):
        write_keys(store, n=300, value_size=200, seed=seed, start=10_000 * seed)
        done = cli("backup", store, *target.args(KEY), "--retain", "2", "-q", env=target.env)
        assert done.returncode == 0, done.stderr
    listed = cli("list", "--repo", target.url, "--json", env=target.env)
    assert listed.returncode == 0, listed.stderr
    return listed.json()


def _gc_dry_run(cli, target) -> dict:
    later = int(time.time() * 1000) + 2 * DAY_MS  # every unreferenced blob is old enough to go
    gc = cli("gc", "--repo", target.url, "--dry-run", "--now", str(later), "--json", "-v", env=target.env)
    assert gc.returncode == 0, gc.stderr
    [report] = gc.json()
    return report


def test_gc_never_trusts_a_cached_index_whose_bytes_are_not_the_ones_its_record_names(target, cli, tmp_path,
                                                                                       work_base):
    _, second = _two_snapshots(cli, target, tmp_path)
    entry = _entry(work_base, target.url, second["indexBlobId"])
    assert entry.is_file(), "list keeps the indexes it read"
    kept = entry.read_bytes()
    # the latest index's entry now names no file (same checkpoint): trusted, the blobs only that snapshot holds
    # would be orphans, referenced blobs gc proposes to delete
    index = SnapshotIndex.from_bytes(kept)
    root = msgspec.structs.replace(index.dir_index, files_present=())
    entry.write_bytes(msgspec.structs.replace(index, dir_index=root).to_bytes())
    report = _gc_dry_run(cli, target)
    assert report["skipped"] is None, report
    assert report["orphansDeleted"] == [] and report["expiredDeleted"] == [], report
    assert entry.read_bytes() == kept, "the entry is read again from the store and kept"


def test_gc_reads_a_retained_index_the_store_no_longer_lists_even_when_it_is_cached(target, cli, tmp_path,
                                                                                     work_base):
    _, second = _two_snapshots(cli, target, tmp_path)
    assert _entry(work_base, target.url, second["indexBlobId"]).is_file()
    store = target.store()
    try:
        store.delete(second["indexBlobId"])  # the store lost the latest index; this host still has a copy
    finally:
        store.close()
    report = _gc_dry_run(cli, target)
    assert report["skipped"] and "unreadable" in report["skipped"], report  # nothing decided without it


@pytest.mark.slow
def test_a_cached_record_is_used_only_while_the_listing_names_its_bytes(s3_target, cli, tmp_path, work_base):
    from fault_harness import Target

    target = Target(f"{s3_target.url}-records", s3_target.storage_options, s3_target.env)
    first, second = _two_snapshots(cli, target, tmp_path)
    older, newer = (_entry(work_base, target.url, record_id(KEY, generation)) for generation in (1, 2))
    assert older.is_file() and newer.is_file(), "list keeps the records it read (S3: the listing gives their MD5)"
    newer.write_bytes(older.read_bytes())  # generation 2's entry holds generation 1's record
    again = cli("list", "--repo", target.url, "--json", "-v", env=target.env)
    assert again.returncode == 0, again.stderr
    assert [r["checkpointId"] for r in again.json()] == [first["checkpointId"], second["checkpointId"]]
    assert "cache 3 hits, 1 misses" in again.stderr  # two indexes and one record from the cache, one record read
