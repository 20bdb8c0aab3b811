"""Storage faults injected by a test plugin wrapping the blob store: transient ones are retried, permanent ones abort
the commit cleanly; gc sweeps expired leases and old orphans, never a referenced blob."""

from __future__ import annotations

import json
import time

import flaky_store
import pytest
from fixtures_core import read_all, repo_files, write_keys

import blobstate
from blobstate.errors import StorageError


@pytest.fixture
def flaky(monkeypatch, work_base):
    monkeypatch.setenv("BLOBSTATE_PLUGINS", "flaky_store")
    monkeypatch.setenv("BLOBSTATE_RETRY_ATTEMPTS", "8")
    flaky_store.CALLS.update(faults=0, calls=0)
    return monkeypatch


def test_transient_faults_on_a_fraction_of_calls_are_retried_and_the_commit_succeeds(tmp_path, repo, flaky):
    flaky.setenv("BLOBSTATE_TEST_FAULT_RATE", "0.3")
    store = tmp_path / "s"
    data = write_keys(store, n=20_000)
    url = f"flaky://{repo}"
    first = blobstate.backup(str(store), repo=url, chunk_size=64 << 10)
    data.update(write_keys(store, n=500, start=50_000))
    second = blobstate.backup(str(store), repo=url, chunk_size=64 << 10)
    assert second.checkpoint.generation == first.checkpoint.generation + 1
    assert flaky_store.CALLS["faults"] >= 3, flaky_store.CALLS
    restored = blobstate.restore(str(tmp_path / "out" / "s"), repo=url, work_dir=str(tmp_path / "h"))
    assert restored.checkpoint == second.checkpoint
    assert read_all(tmp_path / "out" / "s") == data
    assert not repo_files(repo, "ttl")


def test_a_permanent_fault_aborts_the_commit_cleanly(tmp_path, repo, flaky):
    store = tmp_path / "s"
    data = write_keys(store, n=5_000)
    url = f"flaky://{repo}"
    blobstate.backup(str(store), repo=url)
    blobs_before = repo_files(repo, "blobs")
    write_keys(store, n=500, start=50_000)
    flaky.setenv("BLOBSTATE_TEST_PERMANENT_FAULT", "put")
    with pytest.raises(StorageError, match="injected permanent fault"):
        blobstate.backup(str(store), repo=url)
    flaky.delenv("BLOBSTATE_TEST_PERMANENT_FAULT")
    assert repo_files(repo, "blobs") == blobs_before
    assert not repo_files(repo, "ttl") and len(repo_files(repo, "indexes")) == 1
    journal = next((tmp_path / "work").rglob("journal.log")).read_bytes()
    assert len(journal) == 8, "the aborted commit was not compacted away"
    blobstate.restore(str(tmp_path / "out" / "s"), repo=url, work_dir=str(tmp_path / "h"))
    assert read_all(tmp_path / "out" / "s") == data


def test_a_repository_that_is_down_is_a_clear_storage_error(tmp_path, cli, monkeypatch):
    store = tmp_path / "s"
    write_keys(store, n=100)
    r = cli("backup", store, "--repo", "s3://bucket/x", "--storage-option", "endpoint_url=http://127.0.0.1:9",
            "--storage-option", 'config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 1}',
            "--storage-option", "key=AKIASECRETKEYID", "--storage-option", "secret=supersecretvalue",
            env={"BLOBSTATE_RETRY_ATTEMPTS": "2", "AWS_DEFAULT_REGION": "us-east-1"})
    assert r.returncode in (1, 2), r.stderr
    assert "supersecretvalue" not in r.stderr + r.stdout
    assert "error:" in r.stderr and "127.0.0.1:9" in r.stderr


def test_gc_deletes_expired_unreferenced_blobs_and_old_orphans_and_heals_referenced_ones(tmp_path, repo, cli):
    store = tmp_path / "s"
    write_keys(store, n=3_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    referenced = repo_files(repo, "blobs")
    prefix = repo / "default" / "0" / "s"
    # an orphan without lease, an unreferenced blob with an expired lease, a referenced blob with an expired lease
    orphan, leased = "0" * 32, "1" * 32  # shaped like the blob ids blobstate writes
    (prefix / "blobs" / orphan).write_bytes(b"o")
    (prefix / "blobs" / leased).write_bytes(b"l")
    (prefix / "ttl" / leased).write_text(json.dumps({"blobId": f"default/0/s/blobs/{leased}", "expiresAtMs": 1}))
    healed = sorted(referenced)[0]
    name = healed.rsplit("/", 1)[1]
    (prefix / "ttl" / name).write_text(json.dumps({"blobId": healed, "expiresAtMs": 1}))

    dry = cli("gc", "--repo", repo, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert dry.json()[0]["expiredDeleted"] == [f"default/0/s/blobs/{leased}"]
    assert dry.json()[0]["orphansDeleted"] == []  # the orphan is younger than the TTL
    assert (prefix / "blobs" / leased).exists()

    later = int(time.time() * 1000) + 2 * 24 * 3600 * 1000
    done = cli("gc", "--repo", repo, "--now", str(later), "--json")
    assert done.returncode == 0, done.stderr
    report = done.json()[0]
    assert report["orphansDeleted"] == [f"default/0/s/blobs/{orphan}"]
    assert report["expiredHealed"] == [healed]
    assert repo_files(repo, "blobs") == referenced
    assert not repo_files(repo, "ttl")
    assert cli("verify", "--repo", repo, "--store", "s").returncode == 0


def test_the_retry_wrapper_forwards_every_blob_store_call():
    """A call the wrapper does not define itself falls to the BlobStore base class, not to the backend: the bug that
    hid S3's DeleteObjects (issue 11) and gc's temporaries (issue 12)."""
    import inspect

    from blobstate.plugin.interfaces import BlobStore
    from blobstate.repository.retry import RetryingBlobStore

    public = {name for name, fn in inspect.getmembers(BlobStore, inspect.isfunction) if not name.startswith("_")}
    missing = sorted(public - {"map_concurrent"} - set(vars(RetryingBlobStore)))
    assert not missing, f"RetryingBlobStore does not forward: {missing}"
