"""Issue 2's acceptance: incremental backup of a 1M-key RocksDB store, restore, integrity failures, fencing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fixtures_core import read_all, repo_files, tree_digest, write_keys
from restore_helpers import plain_index

from blobstate.model.index import SnapshotIndex


def _newest_checkpoint_dir(work_base: Path) -> Path:
    dirs = sorted(work_base.glob("*/*/*/*/checkpoints/*"))
    assert dirs, "no local checkpoint directory"
    return dirs[-1]


def _checkpoint_files(work_base: Path) -> dict[str, int]:
    """name -> size of the newest local checkpoint directory (what the last backup saw)."""
    newest = _newest_checkpoint_dir(work_base)
    return {p.name: p.stat().st_size for p in newest.iterdir() if p.is_file() and p.name != ".blobstate-checkpoint"}


def _blob_sizes(repo: Path) -> dict[str, int]:
    return {rel: (repo / rel).stat().st_size for rel in repo_files(repo, "blobs")}


def test_incremental_backup_of_a_million_keys_uploads_only_new_ssts_and_restores_every_key(tmp_path, repo, cli,
                                                                                           work_base, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_COMPRESSION", "off")  # stored bytes are compared with the files' own sizes
    store = tmp_path / "counts"
    expected = write_keys(store, n=1_000_000, value_size=48, seed=1)
    first = cli("backup", store, "--repo", repo, "--json")
    assert first.returncode == 0, first.stderr
    files_before = _checkpoint_files(work_base)
    contents_before = {n: (_newest_checkpoint_dir(work_base) / n).read_bytes() for n in files_before
                       if not n.endswith(".sst")}
    blobs_before = _blob_sizes(repo)
    assert sum(blobs_before.values()) == sum(files_before.values())

    changed = {f"key{i:08d}".encode(): b"updated-%d" % i for i in range(0, 1_000_000, 100)}  # 1% of the keys
    write_keys(store, changed)
    expected.update(changed)
    second = cli("backup", store, "--repo", repo, "--json")
    assert second.returncode == 0, second.stderr
    files_after = _checkpoint_files(work_base)
    new_blobs = {k: v for k, v in _blob_sizes(repo).items() if k not in blobs_before}
    new_ssts = {n: s for n, s in files_after.items() if n.endswith(".sst") and n not in files_before}
    newest = _newest_checkpoint_dir(work_base)
    changed_mutable = {n: s for n, s in files_after.items()
                       if not n.endswith(".sst") and contents_before.get(n) != (newest / n).read_bytes()}
    assert new_ssts, "the update produced no new SST"
    assert any(n.startswith("MANIFEST") for n in changed_mutable)
    uploaded = sum(new_blobs.values())
    # exactly the new SSTs and the mutable files whose content changed (MANIFEST, WAL...), nothing else
    assert uploaded == sum(new_ssts.values()) + sum(changed_mutable.values())
    assert len(new_blobs) == len(new_ssts) + sum(1 for size in changed_mutable.values() if size)  # empty: no blob
    assert second.json()["bytesUploaded"] == uploaded
    assert uploaded < 0.2 * sum(files_after.values())

    dest = tmp_path / "restored" / "counts"
    restored = cli("restore", dest, "--repo", repo, "--json", work=tmp_path / "new-host")
    assert restored.returncode == 0, restored.stderr
    assert restored.json()["checkpointId"] == second.json()["checkpointId"]
    assert restored.json()["bytesDownloaded"] == sum(files_after.values())
    assert read_all(dest) == expected


def test_restore_over_the_previous_version_downloads_only_the_difference(tmp_path, repo, cli):
    store = tmp_path / "s"
    write_keys(store, n=20_000, seed=2)
    cp1 = cli("backup", store, "--repo", repo).stdout.strip()
    write_keys(store, n=2_000, seed=3, start=50_000)
    cp2 = cli("backup", store, "--repo", repo).stdout.strip()
    host = tmp_path / "other-host"
    dest = tmp_path / "dest" / "s"
    r1 = cli("restore", dest, "--repo", repo, "--checkpoint", cp1, "--json", work=host)
    assert r1.returncode == 0, r1.stderr
    old = tree_digest(dest)
    r2 = cli("restore", dest, "--repo", repo, "--json", work=host)
    assert r2.returncode == 0, r2.stderr
    assert r2.json()["checkpointId"] == cp2
    new = tree_digest(dest)
    differing = {name for name in new if old.get(name) != new[name]}
    assert differing, "the second checkpoint changed nothing?"
    assert r2.json()["filesDownloaded"] == len(differing)
    assert r2.json()["bytesDownloaded"] == sum((dest / n).stat().st_size for n in differing)
    assert r2.json()["filesKept"] == len(new) - len(differing)
    fresh = cli("restore", tmp_path / "x" / "s", "--repo", repo, work=tmp_path / "h3")
    assert fresh.returncode == 0
    assert tree_digest(tmp_path / "x" / "s") == new


def test_restore_reuses_the_local_checkpoint_of_the_same_host_without_downloading(tmp_path, repo, cli):
    store = tmp_path / "s"
    write_keys(store, n=5_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    shutil.rmtree(store)
    r = cli("restore", store, "--repo", repo, "--json")
    assert r.returncode == 0, r.stderr
    assert r.json()["filesDownloaded"] == 0 and r.json()["filesReused"] == r.json()["filesTotal"]
    assert len(read_all(store)) == 5_000


def _setup_two_checkpoints(tmp_path, repo, cli):
    store = tmp_path / "s"
    write_keys(store, n=10_000, seed=5)
    assert cli("backup", store, "--repo", repo).returncode == 0
    write_keys(store, n=1_000, seed=6, start=20_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    return store


def _latest_index(repo: Path) -> SnapshotIndex:
    records = sorted((repo / "checkpoints").rglob("*.json"))
    record = json.loads(records[-1].read_text())
    return SnapshotIndex.from_bytes(plain_index((repo / record["indexBlobId"]).read_bytes()))


@pytest.mark.parametrize("damage", ["flip", "missing"])
def test_damaged_or_missing_blob_fails_restore_and_verify_with_exit_3_and_leaves_destination_as_it_was(
        tmp_path, repo, cli, damage):
    _setup_two_checkpoints(tmp_path, repo, cli)
    index = _latest_index(repo)
    name, victim = max(index.files().items(), key=lambda kv: kv[1].size_in_bytes)
    blob = repo / victim.blobs[0].blob_id
    dest = tmp_path / "dest" / "s"
    dest.mkdir(parents=True)
    (dest / "keep-me").write_text("previous content")
    before = tree_digest(dest)
    if damage == "flip":
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 0x01
        blob.write_bytes(bytes(data))
    else:
        blob.unlink()
    restored = cli("restore", dest, "--repo", repo, "--force", work=tmp_path / "new-host")
    assert restored.returncode == 3, restored.stderr
    assert name in restored.stderr
    if damage == "missing":
        assert victim.blobs[0].blob_id in restored.stderr
    assert tree_digest(dest) == before
    assert not list(dest.parent.glob(".s.restore-*")) and not list(dest.glob(".blobstate-restore-*")), (
        "staging directory left behind")
    verified = cli("verify", "--repo", repo, "--store", "s")
    assert verified.returncode == 3
    assert name in verified.stdout + verified.stderr


def test_swapped_or_corrupt_index_is_an_integrity_error(tmp_path, repo, cli):
    _setup_two_checkpoints(tmp_path, repo, cli)
    records = sorted((repo / "checkpoints").rglob("*.json"))
    latest = json.loads(records[-1].read_text())
    older = json.loads(records[-2].read_text())
    (repo / latest["indexBlobId"]).write_bytes((repo / older["indexBlobId"]).read_bytes())  # swapped
    r = cli("restore", tmp_path / "d" / "s", "--repo", repo, work=tmp_path / "h")
    assert r.returncode == 3 and "does not match its checkpoint record" in r.stderr
    (repo / latest["indexBlobId"]).write_bytes(b"{}")
    assert cli("verify", "--repo", repo, "--store", "s").returncode == 3


def test_index_with_an_escaping_name_is_refused_before_anything_is_written(tmp_path, repo, cli):
    store = tmp_path / "s"
    store.mkdir()
    (store / "a.txt").write_text("hello")
    assert cli("backup", store, "--repo", repo, "--store-type", "dir").returncode == 0
    record_path = sorted((repo / "checkpoints").rglob("*.json"))[-1]
    record = json.loads(record_path.read_text())
    doc = json.loads(plain_index((repo / record["indexBlobId"]).read_bytes()))
    doc["dirIndex"]["filesPresent"][0]["fileName"] = "../escaped.txt"
    data = json.dumps(doc).encode()
    (repo / record["indexBlobId"]).write_bytes(data)
    import google_crc32c

    record.update(indexCrc32c=google_crc32c.value(data), indexSizeInBytes=len(data))
    record_path.write_text(json.dumps(record))
    dest = tmp_path / "out" / "s"
    r = cli("restore", dest, "--repo", repo, work=tmp_path / "h")
    assert r.returncode == 3, r.stderr
    assert "unsafe" in r.stderr
    assert not (tmp_path / "out" / "escaped.txt").exists()


def test_second_writer_with_a_stale_generation_is_fenced_and_the_first_writers_snapshot_restores(tmp_path, repo,
                                                                                                  cli):
    a = tmp_path / "a" / "s"
    b = tmp_path / "b" / "s"
    data_a = write_keys(a, n=3_000, seed=10)
    write_keys(b, n=3_000, seed=11)
    first = cli("backup", a, "--repo", repo, work=tmp_path / "host-a")
    assert first.returncode == 0
    zombie = cli("backup", b, "--repo", repo, "--expected-generation", "0", work=tmp_path / "host-b")
    assert zombie.returncode == 4, zombie.stderr
    assert "fenced" in zombie.stderr
    generations = sorted(p.name for p in (repo / "checkpoints").rglob("*.json"))
    assert generations == ["00000000000000000001.json"]
    dest = tmp_path / "r" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "host-c").returncode == 0
    assert read_all(dest) == data_a
    index = _latest_index(repo)
    assert repo_files(repo, "blobs") == {b.blob_id for f in index.files().values() for b in f.blobs}


def test_writers_interleaved_in_process_the_late_one_is_fenced_and_its_blobs_deleted(tmp_path, repo, work_base):
    from blobstate.commit.backup import StoreCommitter
    from blobstate.errors import FencedError
    from blobstate.model.records import StoreKey

    a = tmp_path / "a" / "s"
    b = tmp_path / "b" / "s"
    write_keys(a, n=2_000, seed=1)
    data_b = write_keys(b, n=2_000, seed=2)
    key = StoreKey("default", "0", "s")
    with StoreCommitter(key, str(repo), work_dir=str(tmp_path / "wa")) as writer_a:
        pending = writer_a.checkpoint(str(a))  # writer A read generation 0 and took its local checkpoint
        with StoreCommitter(key, str(repo), work_dir=str(tmp_path / "wb")) as writer_b:
            winner = writer_b.backup(str(b))
        with pytest.raises(FencedError):
            writer_a.upload(pending)
    assert winner.checkpoint.generation == 1
    index = _latest_index(repo)
    assert repo_files(repo, "blobs") == {b.blob_id for f in index.files().values() for b in f.blobs}
    assert not repo_files(repo, "ttl")
    dest = tmp_path / "r" / "s"
    import blobstate

    blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "wc"))
    assert read_all(dest) == data_b


def test_dir_store_with_subdirectories_restores_exactly_and_removes_extra_files(tmp_path, repo, cli):
    src = tmp_path / "state"
    (src / "sub" / "deep").mkdir(parents=True)
    (src / "a.bin").write_bytes(os.urandom(3000))
    (src / "sub" / "b.bin").write_bytes(os.urandom(10))
    (src / "sub" / "deep" / "c.bin").write_bytes(b"")
    (src / "gone").mkdir()
    (src / "gone" / "x").write_text("x")
    assert cli("backup", src, "--repo", repo, "--chunk-size", "1000").returncode == 0
    (src / "a.bin").write_bytes(os.urandom(2500))
    shutil.rmtree(src / "gone")
    second = cli("backup", src, "--repo", repo, "--chunk-size", "1000", "--json")
    assert second.returncode == 0, second.stderr
    assert second.json()["filesUploaded"] == 1
    dest = tmp_path / "out" / "state"
    (dest / "gone").mkdir(parents=True)
    (dest / "gone" / "stale").write_text("stale")
    (dest / "extra.txt").write_text("extra")
    r = cli("restore", dest, "--repo", repo, "--json", "--force", work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert tree_digest(dest) == tree_digest(src)
    assert not (dest / "gone").exists()
    index = _latest_index(repo)
    assert len(index.files()["a.bin"].blobs) == 3  # 2500 bytes in chunks of 1000
    assert {f.file_name for f in index.dir_index.walk_removed()} == {"a.bin", "x"}


def test_checksum_cache_reads_an_unchanged_hard_linked_sst_once(tmp_path, repo, work_base):
    from blobstate.commit.backup import StoreCommitter
    from blobstate.model.records import StoreKey

    store = tmp_path / "s"
    write_keys(store, n=20_000)
    with StoreCommitter(StoreKey("default", "0", "s"), str(repo)) as committer:
        committer.backup(str(store))
        misses = committer.cache.misses
        write_keys(store, n=100, start=90_000)
        committer.backup(str(store))
        new_misses = committer.cache.misses - misses
    files = _checkpoint_files(work_base)
    ssts = [n for n in files if n.endswith(".sst")]
    # Only the new SST and the copied (not hard-linked) mutable files are read again.
    assert new_misses <= 1 + (len(files) - len(ssts))
    assert committer.cache.hits >= len(ssts) - 1


def test_retention_keeps_the_newest_checkpoints_and_deletes_only_unreferenced_blobs(tmp_path, repo, cli):
    store = tmp_path / "s"
    ids = []
    for i in range(5):
        write_keys(store, n=1_000, seed=i, start=i * 1_000)
        r = cli("backup", store, "--repo", repo, "--retain", "2")
        assert r.returncode == 0, r.stderr
        ids.append(r.stdout.strip())
    listed = cli("list", "--repo", repo, "--store", "s", "--json").json()
    assert [row["checkpointId"] for row in listed] == ids[-2:]
    referenced = set()
    for record in (repo / "checkpoints").rglob("*.json"):
        rec = json.loads(record.read_text())
        idx = SnapshotIndex.from_bytes(plain_index((repo / rec["indexBlobId"]).read_bytes()))
        referenced |= {b.blob_id for f in idx.files().values() for b in f.blobs}
    assert repo_files(repo, "blobs") == referenced
    assert len(repo_files(repo, "indexes")) == 2
    older = cli("restore", tmp_path / "old" / "s", "--repo", repo, "--checkpoint", ids[-2], work=tmp_path / "h")
    assert older.returncode == 0
    gone = cli("restore", tmp_path / "old2" / "s", "--repo", repo, "--checkpoint", ids[0], work=tmp_path / "h")
    assert gone.returncode == 5


def test_nothing_to_restore_and_usage_errors_have_their_exit_codes(tmp_path, repo, cli):
    assert cli("restore", tmp_path / "d", "--repo", repo).returncode == 6  # no repository there
    assert cli("init", "--repo", repo).returncode == 0
    assert cli("restore", tmp_path / "d", "--repo", repo).returncode == 5  # a repository without that store
    assert cli("backup", tmp_path / "missing", "--repo", repo).returncode == 2
    assert cli("backup", tmp_path, "--repo", repo, "--store-type", "nope").returncode == 2
    assert cli("restore", tmp_path / "d", "--repo", "unknownscheme://x/y").returncode in (1, 2)


def test_memory_repository_round_trip_in_process(tmp_path, work_base):
    import blobstate

    store = tmp_path / "s"
    data = write_keys(store, n=2_000)
    result = blobstate.backup(str(store), repo="memory://bs-test-repo")
    restored = blobstate.restore(str(tmp_path / "out" / "s"), repo="memory://bs-test-repo",
                                 work_dir=str(tmp_path / "other"))
    assert restored.checkpoint.checkpoint_id == result.checkpoint.checkpoint_id
    assert restored.files_downloaded == result.files_total
    assert read_all(tmp_path / "out" / "s") == data


def test_shared_options_come_from_the_environment(tmp_path, repo, cli):
    store = tmp_path / "s"
    data = write_keys(store, n=500)
    env = {"BLOBSTATE_REPO": str(repo), "BLOBSTATE_JOB": "envjob", "BLOBSTATE_STORE": "envstore"}
    assert cli("backup", store, env=env).returncode == 0
    listed = cli("list", "--json", env=env).json()
    assert [row["store"] for row in listed] == ["envjob/0/envstore"]
    dest = tmp_path / "out" / "whatever"
    assert cli("restore", dest, env=env, work=tmp_path / "h").returncode == 0
    assert read_all(dest) == data
