"""Issue 31: a restore into a directory holding the previous version fetches the files it certainly lacks while it
reads the files it keeps (``blobstate.restoring.download.Prefetch``), so the read is off the critical path; a
fetched-ahead file is verified like any download, and a failure leaves the destination as it was."""

from __future__ import annotations

import os
import threading

import pytest
from restore_helpers import tree_state

import blobstate
from blobstate.errors import ChecksumMismatch
from blobstate.repository.repo import Repository
from blobstate.restoring import plan as plan_module

WAIT_S = 20.0  # how long the planner's read of a kept file waits for a download to begin (a bound, not a pause)


def _two_versions(tmp_path, repo):
    """A dir store backed up twice (v2 adds ``new.bin`` and changes ``changed.bin``); its v1 restored into
    ``dest``. Returns (src, dest, v2's checkpoint record)."""
    src = tmp_path / "src" / "s"
    src.mkdir(parents=True)
    (src / "kept.bin").write_bytes(os.urandom(300_000))
    (src / "changed.bin").write_bytes(os.urandom(200_000))
    v1 = blobstate.backup(str(src), repo=str(repo), store_type="dir", work_base=str(tmp_path / "w"))
    (src / "new.bin").write_bytes(os.urandom(400_000))
    (src / "changed.bin").write_bytes(os.urandom(250_000))
    v2 = blobstate.backup(str(src), repo=str(repo), store_type="dir", work_base=str(tmp_path / "w"))
    dest = tmp_path / "dest" / "s"
    blobstate.restore(str(dest), repo=str(repo), checkpoint=v1.checkpoint.checkpoint_id, work_dir=str(tmp_path / "h"))
    return src, dest, v2.checkpoint


def test_the_files_a_restore_lacks_download_while_it_reads_the_kept_ones(tmp_path, repo, monkeypatch):
    """The planner's read of the kept file waits until a download has begun: without the fetch ahead the downloads
    start only after the plan, the wait runs out and the restore finishes with the read never overlapped."""
    src, dest, _ = _two_versions(tmp_path, repo)
    began, overlapped = threading.Event(), []
    real_read, real_digest = Repository.read_blob, plan_module.digest_file

    def read_blob(self, *args, **kwargs):
        began.set()
        return real_read(self, *args, **kwargs)

    def digest_file(path, **kwargs):
        if os.path.basename(path) == "kept.bin":
            overlapped.append(began.wait(WAIT_S))
        return real_digest(path, **kwargs)

    monkeypatch.setattr(Repository, "read_blob", read_blob)
    monkeypatch.setattr(plan_module, "digest_file", digest_file)
    result = blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert overlapped == [True], "the kept file was read before any download began"
    assert (result.files_kept, result.files_downloaded) == (1, 2)
    for name in ("kept.bin", "changed.bin", "new.bin"):
        assert (dest / name).read_bytes() == (src / name).read_bytes()
    assert not [n for n in os.listdir(dest) if n.startswith(".blobstate-restore-")]


def test_a_damaged_blob_fetched_ahead_fails_the_restore_and_leaves_the_destination_as_it_was(tmp_path, repo):
    src, dest, latest = _two_versions(tmp_path, repo)
    index = Repository.open(str(repo)).read_index(latest)
    blob = next(iter(index.files()["new.bin"].chunk_ranges()))[0].blob_id
    path = repo / blob
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    before = tree_state(dest, mtimes=True)
    with pytest.raises(ChecksumMismatch):
        blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert tree_state(dest, mtimes=True) == before
    assert not [n for n in os.listdir(dest) if n.startswith(".blobstate-restore-")]


def test_a_plan_that_fails_stops_the_fetch_ahead_and_removes_its_staging(tmp_path, repo, monkeypatch):
    from blobstate.restoring import snapshot

    src, dest, _ = _two_versions(tmp_path, repo)
    before = tree_state(dest, mtimes=True)

    def failing_plan(*args, **kwargs):
        raise OSError(5, "Input/output error (injected)")

    monkeypatch.setattr(snapshot, "plan_restore", failing_plan)
    with pytest.raises(OSError, match="injected"):
        blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert tree_state(dest, mtimes=True) == before
    assert not [n for n in os.listdir(dest) if n.startswith(".blobstate-restore-")]
