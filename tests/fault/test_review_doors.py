"""Adversarial review of the doors (helper r39-review): attacks through the ways into a store that are not the
ordinary commit. Each failing reproduction is marked ``xfail(strict=True)`` so the branch stays green; each test
asserts what must hold (no loss, no wrong state, no leak, no wedge)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from fixtures_core import cli_env, run_cli, tree_digest

from blobstate import api
from blobstate.model.layout import MARKER


def _write(d, tag: bytes) -> None:
    d.mkdir(exist_ok=True)
    (d / "state").write_bytes(tag * 100)


def test_a_copy_onto_a_target_that_moved_on_never_buries_the_targets_own_newest_state(tmp_path):
    """Fail-over and fail-back: the target (a DR repository kept by ``blobstate copy``) took writes of its own
    (the job failed over to it); the source then took one more from a job still running there. Copying again must
    not put the source's record on top of the target's own newest one and prune that one (the copy applies the
    source's retention at the target)."""
    src, dst, data = f"file://{tmp_path}/src", f"file://{tmp_path}/dst", tmp_path / "counts"
    _write(data, b"v1")
    api.backup(str(data), repo=src, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "a"))
    api.copy(source=src, target=dst, work_base=str(tmp_path / "c"))
    _write(data, b"target-own-v2")  # the job failed over: it writes to the target
    own = tree_digest(data)
    mine = api.backup(str(data), repo=dst, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "b"))
    _write(data, b"stale-source-v3")  # a job left running at the source writes there once more
    api.backup(str(data), repo=src, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "a"))
    try:
        api.copy(source=src, target=dst, work_base=str(tmp_path / "c"))
    except Exception:  # noqa: BLE001 - a refusal (the target diverged) is an acceptable answer
        pass
    refused = run_cli("copy", "--from", src, "--to", dst, work_base=tmp_path / "c")
    assert refused.returncode == 4 and mine.checkpoint.checkpoint_id in refused.stderr, refused.stderr
    api.restore(str(tmp_path / "latest"), repo=dst, store="counts", store_type="dir", cleanup=False,
                work_base=str(tmp_path / "d"))
    assert tree_digest(tmp_path / "latest") == own  # the target's own newest state is still what it restores
    api.restore(str(tmp_path / "byid"), repo=dst, store="counts", store_type="dir", cleanup=False,
                checkpoint=mine.checkpoint.checkpoint_id, work_base=str(tmp_path / "e"))
    assert tree_digest(tmp_path / "byid") == own


def _marker_faults(*args: object, work, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`blobstate ARGS` as a real process through ``tests/support/marker_faults.py`` (kill points armed by env)."""
    return subprocess.run([sys.executable, "-m", "marker_faults", *map(str, args)], capture_output=True, text=True,
                          env=cli_env(work, **(env or {})), timeout=300)


def test_a_log_change_of_an_encrypted_repository_killed_mid_write_on_an_in_place_store_keeps_a_key(tmp_path):
    """Rule 24 keeps a copy of the marker (the only copy of the wrapped data key) before a key rotation rewrites it,
    because a store with the interface's default ``rewrite`` writes in place. ``init --change-log`` (and
    ``bind_log``) rewrite the same marker through the same door, on the same store, without a copy: SIGKILLed
    after each change it makes to a file of the repository, the key must still open the repository."""
    key = tmp_path / "k.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    env = {"BLOBSTATE_PLUGINS": "inplace_rewrite"}
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("state worth keeping")
    assert _marker_faults("init", "--repo", pristine, "--encrypt", "--key-file", key, work=work,
                          env=env).returncode == 0
    assert _marker_faults("backup", notes, "--repo", pristine, "--key-file", key, work=work, env=env).returncode == 0
    db = f"sqlite:///{tmp_path / 'log.db'}"
    lost = []
    for n in range(1, 40):
        repo = tmp_path / f"repo-{n}"
        shutil.copytree(pristine, repo, symlinks=True)
        kill = {**env, "BLOBSTATE_TEST_KILL_WRITE": str(n), "BLOBSTATE_TEST_KILL_ROOT": str(repo)}
        done = _marker_faults("init", "--repo", repo, "--log", db, "--change-log", "--key-file", key,
                              work=tmp_path / f"work-{n}", env=kill)
        if done.returncode != -9:
            assert done.returncode == 0, done.stderr
            break
        codes = {log: _marker_faults("list", "--repo", repo, "--key-file", key, *log, work=tmp_path / f"check-{n}",
                                     env=env).returncode for log in ((), ("--log", db))}
        if 0 not in codes.values():
            lost.append((n, codes, len((repo / MARKER).read_bytes())))
    assert not lost, f"killed at these changes, the key opened the repository with neither log: {lost}"


def test_a_restore_on_another_host_never_prunes_what_the_writers_newer_retention_keeps(tmp_path, monkeypatch):
    """A restore on a second host runs Samza's init cleanup: it reads the latest record (its index records
    ``--retain 1``), then applies that retention to the log as it reads it again. The writer on the first host
    commits in between with ``--retain 3`` (the operator raised it): the snapshot before it must stay."""
    from blobstate.commit import cleanup

    repo, data = f"file://{tmp_path}/repo", tmp_path / "counts"
    _write(data, b"v1")
    api.backup(str(data), repo=repo, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "a"))
    _write(data, b"v2")
    kept = api.backup(str(data), repo=repo, store_type="dir", retain=1, store="counts",
                      work_base=str(tmp_path / "a"))
    kept_digest = tree_digest(data)
    real = cleanup.apply_retention

    def writer_commits_first(*args, **kwargs):  # the restore has read the latest record and its recorded retention
        _write(data, b"v3")
        done = run_cli("backup", data, "--repo", repo, "--store-type", "dir", "--store", "counts", "--retain", "3",
                       work_base=tmp_path / "a")  # the writer, a real process on its own host
        assert done.returncode == 0, done.stderr
        monkeypatch.setattr(cleanup, "apply_retention", real)
        return real(*args, **kwargs)

    monkeypatch.setattr(cleanup, "apply_retention", writer_commits_first)
    api.restore(str(tmp_path / "restored"), repo=repo, store="counts", store_type="dir",
                work_base=str(tmp_path / "b"))
    monkeypatch.setattr(cleanup, "apply_retention", real)
    api.restore(str(tmp_path / "older"), repo=repo, store="counts", store_type="dir", cleanup=False,
                checkpoint=kept.checkpoint.checkpoint_id, work_base=str(tmp_path / "c"))
    assert tree_digest(tmp_path / "older") == kept_digest


def test_a_reader_with_the_default_log_never_claims_a_repository_whose_records_are_in_another_log(tmp_path):
    """Rule 18 for a marker from before the ``checkpointLog`` field: the first command that opens it records the log
    it was opened with, a read-only one too. A `blobstate list` run without ``--log`` (it says "no checkpoints")
    must not bind the repository to the file log while its records are in a SQLite log: the writer with the log
    that holds them must still commit. (On main it is refused, exit 2; following its advice, a backup with the file
    log, then `blobstate gc`, deletes the SQLite log's snapshot as orphans.)"""
    repo, data, work = tmp_path / "repo", tmp_path / "counts", tmp_path / "writer"
    _write(data, b"v1")
    db = f"sqlite:///{tmp_path / 'log.db'}"
    assert run_cli("init", "--repo", repo, "--log", db, work_base=work).returncode == 0
    first = run_cli("backup", data, "--repo", repo, "--log", db, "--store-type", "dir", work_base=work)
    assert first.returncode == 0, first.stderr
    marker = json.loads((repo / MARKER).read_text())
    del marker["checkpointLog"]  # a marker written before the field
    (repo / MARKER).write_text(json.dumps(marker, separators=(",", ":")))
    assert run_cli("list", "--repo", repo, work_base=tmp_path / "reader").returncode == 0
    _write(data, b"v2")
    again = run_cli("backup", data, "--repo", repo, "--log", db, "--store-type", "dir", work_base=work)
    assert again.returncode == 0, again.stderr


def test_a_log_url_with_credentials_never_reaches_the_marker_the_errors_or_the_work_directory(tmp_path):
    """Held: a PostgreSQL log URL carrying a password (userinfo and query) given to a repository bound to another
    log (refused, exit 2), and to a marker from before ``checkpointLog`` (recorded, then the log cannot be reached,
    exit 1): the password is in no output, not in the marker, not in any file of the repository or the work
    directories (``log_identity`` keeps host, database and table only; ``redact`` masks the rest)."""
    repo, data = tmp_path / "repo", tmp_path / "counts"
    _write(data, b"v1")
    assert run_cli("backup", data, "--repo", repo, "--store-type", "dir", work_base=tmp_path / "w").returncode == 0
    log = "postgresql://bob:hunter2@127.0.0.1:9/db?password=hunter3"
    refused = run_cli("list", "--repo", repo, "--log", log, work_base=tmp_path / "r1")
    assert refused.returncode == 2, refused.stderr
    marker = json.loads((repo / MARKER).read_text())
    del marker["checkpointLog"]
    (repo / MARKER).write_text(json.dumps(marker, separators=(",", ":")))
    unreachable = run_cli("list", "--repo", repo, "--log", log, work_base=tmp_path / "r2")
    assert unreachable.returncode == 1, unreachable.stderr
    said = refused.stdout + refused.stderr + unreachable.stdout + unreachable.stderr
    assert "hunter" not in said and "bob" not in said
    stored = [p for p in tmp_path.rglob("*") if p.is_file() and b"hunter" in p.read_bytes()]
    assert not stored, stored


def test_a_restore_whose_snapshot_a_writer_prunes_meanwhile_fails_typed_and_leaves_the_destination(tmp_path,
                                                                                                   monkeypatch):
    """Held: a restore reads the latest record and its index (the Open door of a reader: one view), then a writer
    on another host commits with ``--retain 1`` and deletes the blobs only that snapshot had, before the restore
    downloads them. The restore fails with a typed error, and the destination is exactly as it was (nothing half
    restored); a rerun restores the new latest."""
    from blobstate.errors import BlobstateError
    from blobstate.restoring import snapshot

    repo, data, dest = f"file://{tmp_path}/repo", tmp_path / "counts", tmp_path / "dest"
    _write(data, b"v1")
    api.backup(str(data), repo=repo, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "a"))
    api.restore(str(dest), repo=repo, store="counts", store_type="dir", work_base=str(tmp_path / "b"))
    _write(data, b"v2")
    api.backup(str(data), repo=repo, store_type="dir", retain=1, store="counts", work_base=str(tmp_path / "a"))
    before = tree_digest(dest)
    real_download, real_prefetch = snapshot.download_files, snapshot.Prefetch
    ran = []

    def writer_first():
        if not ran:
            ran.append(True)
            _write(data, b"v3")
            done = run_cli("backup", data, "--repo", repo, "--store-type", "dir", "--store", "counts", "--retain",
                           "1", work_base=tmp_path / "a")
            assert done.returncode == 0, done.stderr

    def download(*args, **kwargs):
        writer_first()
        return real_download(*args, **kwargs)

    def prefetch(*args, **kwargs):
        writer_first()
        return real_prefetch(*args, **kwargs)

    monkeypatch.setattr(snapshot, "download_files", download)
    monkeypatch.setattr(snapshot, "Prefetch", prefetch)
    with pytest.raises(BlobstateError) as failed:
        api.restore(str(dest), repo=repo, store="counts", store_type="dir", work_base=str(tmp_path / "b"))
    assert ran and failed.value.exit_code == 3, failed.value  # BlobNotFound: the snapshot read is gone
    assert tree_digest(dest) == before
    monkeypatch.undo()
    api.restore(str(dest), repo=repo, store="counts", store_type="dir", work_base=str(tmp_path / "b"))
    assert tree_digest(dest) == tree_digest(data)
