"""This host's cache of a repository's immutable objects (``blobstate.local.object_cache``), as ``list``, ``gc``
and a writer (``backup``) use it: an entry is trusted only when its bytes match what the repository says in the
same run (an index: its record's size and CRC32C; a record: the MD5 its listing gives it), and gc takes an index
from it only while the store still lists that index. Real subprocesses against file:// (indexes: their check is
the same on every store) and the moto S3 server (records: a file:// listing carries no MD5, so there records are
not cached)."""

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
from blobstate.repository.marker import read_marker

KEY = StoreKey("j", "0", "s")
DAY_MS = 86_400_000


@pytest.fixture
def target(tmp_path):
    from fault_harness import Target

    return Target(f"file://{tmp_path}/repo")  # an index's check is the store's plain bytes against its record


def _entry(work_base: Path, target, name: str) -> Path:  # noqa: ANN001
    """The cache file of object ``name`` (``ObjectCache._path``'s layout, spelled out: under the repository's id)."""
    store = target.store()
    try:
        info = read_marker(store)
    finally:
        store.close()
    digest = hashlib.sha256(name.encode()).hexdigest()
    return work_base / "cache" / workdir.host_key(info.repository_id, target.url) / digest[:2] / digest


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


def _history(target) -> list:
    """KEY's records as the store holds them, read in this process without the object cache."""
    from blobstate.repository.repo import Repository

    with Repository.open(target.url, storage_options=target.options, create=False) as repository:
        return repository.log.history(KEY)


def _gc_dry_run(cli, target) -> dict:
    later = int(time.time() * 1000) + 2 * DAY_MS  # every unreferenced blob is old enough to go
    gc = cli("gc", "--repo", target.url, "--dry-run", "--now", str(later), "--json", "-v", env=target.env)
    assert gc.returncode == 0, gc.stderr
    [report] = gc.json()
    return report


def test_gc_never_trusts_a_cached_index_whose_bytes_are_not_the_ones_its_record_names(target, cli, tmp_path,
                                                                                       work_base):
    _, second = _two_snapshots(cli, target, tmp_path)
    entry = _entry(work_base, target, second["indexBlobId"])
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
    assert _entry(work_base, target, second["indexBlobId"]).is_file()
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
    older, newer = (_entry(work_base, target, record_id(KEY, generation)) for generation in (1, 2))
    assert older.is_file() and newer.is_file(), "list keeps the records it read (S3: the listing gives their MD5)"
    newer.write_bytes(older.read_bytes())  # generation 2's entry holds generation 1's record
    again = cli("list", "--repo", target.url, "--json", "-v", env=target.env)
    assert again.returncode == 0, again.stderr
    assert [r["checkpointId"] for r in again.json()] == [first["checkpointId"], second["checkpointId"]]
    assert "cache 3 hits, 1 misses" in again.stderr  # two indexes and one record from the cache, one record read


def test_a_backup_never_trusts_a_cached_index_whose_bytes_are_not_the_ones_its_record_names(target, cli, tmp_path,
                                                                                            work_base):
    """The next backup diffs against the latest index: its writer's process kept it in this host's cache. An entry
    edited to name no file (same checkpoint) would make the backup upload every file again (or, naming other
    blobs, reuse what the store lacks); it is not the bytes the record's size and CRC32C name, so the backup reads
    the index from the store, keeps those bytes, uploads only what changed and commits a snapshot that verifies."""
    _, second = _two_snapshots(cli, target, tmp_path)
    entry = _entry(work_base, target, second["indexBlobId"])
    kept = entry.read_bytes()
    index = SnapshotIndex.from_bytes(kept)
    entry.write_bytes(msgspec.structs.replace(index, dir_index=msgspec.structs.replace(
        index.dir_index, files_present=())).to_bytes())
    store = tmp_path / "s"
    write_keys(store, n=10, value_size=200, seed=3, start=90_000)
    done = cli("backup", store, *target.args(KEY), "--retain", "2", "--json", env=target.env)
    assert done.returncode == 0, done.stderr
    result = done.json()
    assert 0 < result["filesUploaded"] < result["filesTotal"], result  # the diff was against the stored index
    assert entry.read_bytes() == kept, "the entry is read again from the store and kept"
    latest = _history(target)[-1]
    assert latest.checkpoint_id == result["checkpointId"]
    assert _entry(work_base, target, latest.index_blob_id).is_file(), "the backup keeps the index it wrote"
    verified = cli("verify", *target.args(KEY), "--all", env=target.env)
    assert verified.returncode == 0, verified.stderr


def test_a_backup_puts_back_the_lost_index_it_holds_in_its_object_cache(target, cli, tmp_path, work_base):
    """Issue 39 case 12: the store lost the latest index; this host's next backup diffs against its cached copy
    (the bytes its record names). The cache saves the read, never the knowledge: the walk of the store's prefix the
    backup takes anyway shows the index gone, and the backup puts it back from that verified copy and says so, so
    the retained checkpoint restores again (``verify --all``)."""
    _, second = _two_snapshots(cli, target, tmp_path)
    entry = _entry(work_base, target, second["indexBlobId"])
    assert entry.is_file(), "the writer keeps the index it wrote"
    store = target.store()
    try:
        store.delete(second["indexBlobId"])  # lost outside the protocol; this host still has a verified copy
        write_keys(tmp_path / "s", n=10, value_size=200, seed=3, start=90_000)
        done = cli("backup", tmp_path / "s", *target.args(KEY), "--retain", "2", "--json", env=target.env)
        assert done.returncode == 0, done.stderr
        assert second["indexBlobId"] in done.stderr and "putting it back" in done.stderr, done.stderr
        assert second["indexBlobId"] in {i.blob_id for i in store.list(KEY.prefix)}
    finally:
        store.close()
    result = done.json()
    assert 0 < result["filesUploaded"] < result["filesTotal"], result  # the diff used the copy: no full upload
    verified = cli("verify", *target.args(KEY), "--all", env=target.env)
    assert verified.returncode == 0, verified.stderr  # both retained checkpoints restore


@pytest.mark.parametrize("backend", ["file", "s3"])
def test_retention_leaves_no_cache_entry_of_what_it_deleted(backend, target, s3_target, cli, tmp_path, work_base):
    """A backup keeps the index and (on S3, where the listing gives a record's MD5) the record it wrote in this
    host's cache; retention (``--retain 2``) deletes the oldest snapshot's index and record, and their entries with
    them: what the cache holds of the store is what the store holds."""
    from fault_harness import Target

    if backend == "s3":
        target = Target(f"{s3_target.url}-retention", s3_target.storage_options, s3_target.env)
    store, written = tmp_path / "s", []
    for seed in (1, 2, 3):
        write_keys(store, n=50, value_size=200, seed=seed, start=10_000 * seed)
        done = cli("backup", store, *target.args(KEY), "--retain", "2", "-q", env=target.env)
        assert done.returncode == 0, done.stderr
        written.append(_history(target)[-1])
    assert [cp.generation for cp in _history(target)] == [2, 3]
    indexes = [_entry(work_base, target, cp.index_blob_id) for cp in written]
    records = [_entry(work_base, target, record_id(KEY, g)) for g in (1, 2, 3)]
    assert not indexes[0].exists(), "retention deleted the first index: its entry goes with it"
    assert indexes[1].is_file() and indexes[2].is_file(), "the indexes a backup wrote are kept"
    if backend == "s3":
        assert not records[0].exists(), "retention pruned the first record: its entry goes with it"
        assert records[1].is_file() and records[2].is_file(), "the records a backup appended are kept"
    files = [p for p in (work_base / "cache").rglob("*") if p.is_file()]
    assert len(files) == (4 if backend == "s3" else 2), files


def test_gc_of_the_whole_repository_removes_the_entries_of_objects_the_repository_no_longer_holds(target, cli,
                                                                                                 tmp_path, work_base):
    """What another host deleted (or a process that ran without the cache, or a hand) leaves entries here that no
    delete of this host discards: gc of the whole repository keeps only the entries of the indexes it lists and the
    records its log names, so the cache never holds more than the repository did at the last gc."""
    first, second = _two_snapshots(cli, target, tmp_path)
    live = [_entry(work_base, target, cp["indexBlobId"]) for cp in (first, second)]
    assert all(p.is_file() for p in live)
    gone = [_entry(work_base, target, f"{KEY.prefix}/indexes/{'0' * 32}.json"),
            _entry(work_base, target, record_id(KEY, 99))]
    for path in gone:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"an object another host deleted")
    _gc_dry_run(cli, target)
    assert not [p for p in gone if p.exists()], "entries of objects the repository no longer holds"
    assert all(p.is_file() for p in live), "the entries of what the repository holds stay"


_OWN_WORK_DIR_WRITER = """
import json, sys
from blobstate.commit.backup import StoreCommitter
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
url, wd, src = sys.argv[1:4]
with Repository.open(url, create=True) as repo:
    with StoreCommitter(StoreKey("j", "0", "s"), repo, work_dir=wd, store_type="dir") as committer:
        committer.backup(src)
        print(json.dumps({"hits": repo.object_cache.hits if repo.object_cache else None}), flush=True)
"""


def test_a_writer_given_a_work_directory_of_its_own_writes_nothing_outside_it(tmp_path):
    """A writer whose work directory is a path of its own (the API's and the Spark drivers' ``work_dir``), not a
    store's place under a base: before, its object cache went to the default base (the user's state directory, or
    ``BLOBSTATE_WORK_DIR``), a place it was never told to write, where no gc of another base sweeps it and where it
    outlives the work directory and the repository (a test's temporary repository left entries there for good).
    Now it lies in that work directory, and the writer's next process still reads from it."""
    import json
    import subprocess
    import sys

    from fixtures_core import cli_env

    default_base, wd, src = tmp_path / "default-base", tmp_path / "own" / "wd", tmp_path / "state"
    src.mkdir()
    write_keys(src, n=50, value_size=200, seed=1)
    url = f"file://{tmp_path}/repo"
    runs = []
    for seed in (2, 3):
        write_keys(src, n=20, value_size=200, seed=seed, start=10_000 * seed)
        proc = subprocess.run([sys.executable, "-c", _OWN_WORK_DIR_WRITER, url, str(wd), str(src)],
                              capture_output=True, text=True, timeout=300, env=cli_env(default_base))
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout))
    assert not (default_base / "cache").exists(), sorted(str(p) for p in (default_base / "cache").rglob("*"))[:5]
    assert runs[1]["hits"], "the next process of the same work directory reads the index it wrote from its cache"
