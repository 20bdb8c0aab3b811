"""A store's own files only: on file://, every put is durable before it returns and no symlink inside the
repository is ever followed; a lease naming another store's blob is ignored (file:// and moto S3 in lease mode)."""

from __future__ import annotations

import io
import json
import os
import shutil
import time

import pytest
from fixtures_core import read_all, write_keys

from blobstate.config.settings import Settings
from blobstate.errors import UnsafePathError
from blobstate.plugin.interfaces import FileRange, PutRequest
from blobstate.repository.backends import open_blob_store

TTL_MS = 3_600_000
A, B = "job/0/a", "job/0/b"


class FsyncSpy:
    """Records the real path of every fd passed to ``os.fsync`` (the real fsync still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real = os.fsync

        def spy(fd: int) -> None:
            self.paths.append(os.path.realpath(f"/proc/self/fd/{fd}"))
            real(fd)

        monkeypatch.setattr(os, "fsync", spy)


def test_put_is_durable_before_it_returns(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    store = open_blob_store(str(repo), ttl_mode="lease")
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(3 << 20))
    spy = FsyncSpy(monkeypatch)
    store.put(PutRequest(f"{A}/blobs/chunk", FileRange(str(src), 1 << 20, 1 << 20), ttl_ms=TTL_MS))
    store.put(PutRequest(f"{A}/indexes/i.json", b"{}", ttl_ms=TTL_MS))
    root = os.path.realpath(repo)
    synced = set(spy.paths)
    written = [f"{A}/blobs/chunk", f"{A}/ttl/chunk", f"{A}/indexes/i.json", f"{A}/ttl/i.json"]
    for rel in written:  # every file and its directory entry
        assert os.path.join(root, rel) in synced, rel
        assert os.path.dirname(os.path.join(root, rel)) in synced, os.path.dirname(rel)
    for rel in ("job", "job/0", A):  # every directory created, in its parent
        assert os.path.dirname(os.path.join(root, rel)) in synced, rel
    assert (repo / A / "blobs" / "chunk").read_bytes() == src.read_bytes()[1 << 20:2 << 20]


def test_fsync_switch_is_only_for_measuring(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_FILE_FSYNC", "0")
    store = open_blob_store(str(tmp_path / "repo"), settings=Settings.from_environ())
    spy = FsyncSpy(monkeypatch)
    store.put(PutRequest(f"{A}/blobs/x", b"x"))
    assert spy.paths == []


@pytest.fixture
def outside(tmp_path):
    """A directory outside the repository holding a private file."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret").write_bytes(b"private key")
    os.chmod(d / "secret", 0o600)
    return d


def test_symlinked_directory_is_never_followed(tmp_path, outside):
    repo = tmp_path / "repo"
    store = open_blob_store(str(repo), ttl_mode="lease")
    store.put(PutRequest(f"{A}/blobs/mine", b"mine"))
    (repo / "job" / "0" / "b").symlink_to(outside, target_is_directory=True)  # store b's prefix is a link
    before = sorted(os.listdir(outside))
    with pytest.raises(UnsafePathError):
        store.put(PutRequest(f"{B}/blobs/new", b"x"))
    with pytest.raises(UnsafePathError):
        store.get(f"{B}/secret", io.BytesIO())
    with pytest.raises(UnsafePathError):
        store.delete(f"{B}/secret")
    with pytest.raises(UnsafePathError):
        store.delete_many([f"{B}/secret"])
    with pytest.raises(UnsafePathError):
        list(store.list("job"))
    with pytest.raises(UnsafePathError):
        store.expired("job", int(time.time() * 1000) + 10 * TTL_MS)
    assert sorted(os.listdir(outside)) == before and (outside / "secret").read_bytes() == b"private key"
    assert store.get_bytes(f"{A}/blobs/mine") == b"mine"  # the store's own files still work


def test_symlinked_file_is_never_read(tmp_path, outside):
    repo = tmp_path / "repo"
    store = open_blob_store(str(repo))
    store.put(PutRequest(f"{A}/blobs/real", b"real"))
    (repo / A / "blobs" / "stolen").symlink_to(outside / "secret")
    with pytest.raises(UnsafePathError):
        store.get_bytes(f"{A}/blobs/stolen")
    with pytest.raises(UnsafePathError):
        store.delete(f"{A}/blobs/stolen")
    with pytest.raises(UnsafePathError):
        list(store.list(A))
    with pytest.raises(UnsafePathError):
        store.put(PutRequest(f"{A}/blobs/stolen", b"overwrite"))
    assert (outside / "secret").read_bytes() == b"private key"


def test_restore_refuses_a_symlinked_blob_and_gc_deletes_nothing_outside(tmp_path, outside, cli):
    db, dest, repo = tmp_path / "db", tmp_path / "restored", tmp_path / "repo"
    write_keys(db, n=200)
    assert cli("backup", str(db), "--repo", str(repo), "--store", "db", "-q").returncode == 0
    blobs = sorted((repo / "default" / "0" / "db" / "blobs").iterdir())
    victim = blobs[0]
    victim.unlink()
    victim.symlink_to(outside / "secret")  # the index now leads restore to a file outside the repository
    restored = cli("restore", str(dest), "--repo", str(repo), "--store", "db", "-q", work=tmp_path / "new-host")
    assert restored.returncode == 3, restored.stderr
    assert "symlink" in restored.stderr
    assert not dest.exists() or not any(dest.iterdir())
    # a lease under the store's ttl/ through a symlinked directory: gc refuses and deletes nothing outside
    victim.unlink()
    shutil.rmtree(repo / "default" / "0" / "db" / "ttl", ignore_errors=True)
    (repo / "default" / "0" / "db" / "ttl").symlink_to(outside, target_is_directory=True)
    (outside / "x").write_text(json.dumps({"blobId": "default/0/db/blobs/x", "expiresAtMs": 1}))
    later = int(time.time() * 1000) + 10 * 86_400_000
    gc = cli("gc", "--repo", str(repo), "--now", str(later), work=tmp_path / "new-host")
    assert gc.returncode == 3, gc.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["secret", "x"]


# -- leases naming another store's blob (file:// and S3 in lease mode) ------------------------------------------
@pytest.fixture(params=["file", "s3"])
def lease_target(request, tmp_path):
    if request.param == "file":
        return str(tmp_path / "repo"), {}, None
    target = request.getfixturevalue("s3_target")
    return target.url, target.storage_options, target


def test_foreign_lease_is_ignored_never_used_to_delete(lease_target, tmp_path, cli):
    url, options, target = lease_target
    env = target.env if target else None
    dbs = {}
    for name in ("a", "b"):
        dbs[name] = write_keys(tmp_path / name, n=300, seed=ord(name))
        out = cli("backup", str(tmp_path / name), "--repo", url, "--store", name, "--ttl-mode", "lease", "-q",
                  env=env)
        assert out.returncode == 0, out.stderr
    store = open_blob_store(url, storage_options=options, ttl_mode="lease")
    victims = [b.blob_id for b in store.list("default/0/b")]
    records = [b.blob_id for b in store.list("checkpoints/default/0/b")]
    assert victims and records
    # store a's ttl/ gets one expired lease per object of store b (blob, index, checkpoint record)
    for i, victim in enumerate([*victims, *records]):
        lease = json.dumps({"blobId": victim, "expiresAtMs": 1}).encode()
        store.put(PutRequest(f"default/0/a/ttl/forged{i}", lease))
    later = int(time.time() * 1000) + 10 * 86_400_000
    assert not set(store.expired("default/0/a", later)) & {*victims, *records}
    assert len(store.inner.foreign_leases) == len(victims) + len(records)
    gc = cli("gc", "--repo", url, "--ttl-mode", "lease", "--now", str(later), env=env)
    assert gc.returncode == 0, gc.stderr
    left = {b.blob_id for b in store.list("")}
    assert set(victims) <= left and set(records) <= left
    restored = cli("restore", str(tmp_path / "b-restored"), "--repo", url, "--store", "b", "-q", env=env)
    assert restored.returncode == 0, restored.stderr
    assert read_all(tmp_path / "b-restored") == dbs["b"]
