"""Issue 39 cases 1 and 2: the repository marker, the only copy of an encrypted repository's wrapped data key, is
rewritten by `blobstate key rotate`, `blobstate init --change-log` and the first writer that records the
checkpoint log (``bind_log``). Real subprocesses (``tests/support/marker_faults.py``): SIGKILLed after every change
they make to a file of the repository (a crash matrix), or held before their marker write until the other writer
has read it (racing rotations, and a ``bind_log`` racing a rotation) on file://, moto S3 and azurite."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from cloud_servers import wait_until
from fixtures_core import cli_env

from blobstate.model.layout import MARKER
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_blob_store

MAX_POINTS = 60  # a rewrite changes a handful of files: the matrix ends long before this


@pytest.fixture
def keys(tmp_path) -> tuple[str, str, str]:
    out = []
    for name in ("k", "k2", "k3"):
        path = tmp_path / f"{name}.key"
        path.write_bytes(os.urandom(32))
        path.chmod(0o600)
        out.append(str(path))
    return out[0], out[1], out[2]


def _blobstate(*args: object, work: Path, env: dict[str, str] | None = None,
               wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    cmd = [sys.executable, "-m", "marker_faults", *map(str, args)]
    full = cli_env(work, **(env or {}))
    if not wait:
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=300)


def _opens(repo: str, key: str, work: Path, env: dict[str, str] | None = None, *extra: str) -> int:
    """The exit code of `blobstate list` on ``repo`` with ``key`` (0: the key opens the repository)."""
    return _blobstate("list", "--repo", repo, "--key-file", key, *extra, work=work, env=env).returncode


def _encrypted_repo(repo: str, key: str, work: Path, tmp_path: Path, env: dict[str, str] | None = None) -> None:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    (notes / "a.txt").write_text("state worth keeping")
    assert _blobstate("init", "--repo", repo, "--encrypt", "--key-file", key, work=work, env=env).returncode == 0
    done = _blobstate("backup", notes, "--repo", repo, "--key-file", key, work=work, env=env)
    assert done.returncode == 0, done.stderr


def _crash_matrix(tmp_path: Path, pristine: Path, command: list[str], check,  # noqa: ANN001
                  env: dict[str, str] | None = None) -> int:
    """Run ``command`` on a fresh copy of the repository ``pristine``, SIGKILLed after its n-th change of a file in
    it, for n = 1, 2, ... until it completes; ``check(repo, n)`` after each kill. Returns the points killed at."""
    for n in range(1, MAX_POINTS):
        repo = tmp_path / f"repo-{n}"
        shutil.copytree(pristine, repo, symlinks=True)
        args = [a.replace("{repo}", str(repo)) for a in command]
        kill = {"BLOBSTATE_TEST_KILL_WRITE": str(n), "BLOBSTATE_TEST_KILL_ROOT": str(repo)}
        done = _blobstate(*args, work=tmp_path / f"work-{n}", env={**(env or {}), **kill})
        if done.returncode != -9:
            assert done.returncode == 0, (n, done.stderr)
            assert n > 1, "the command changed no file of the repository"
            return n - 1
        check(str(repo), n)
    raise AssertionError(f"the command was still killed after {MAX_POINTS} changes")


@pytest.mark.parametrize("store", ["file", "in-place"])
def test_a_key_rotation_killed_at_any_write_leaves_a_key_that_opens_the_repository(tmp_path, keys, store):
    """Case 1: `key rotate` SIGKILLed after each change it makes to a file of the repository: the old key or the new
    one opens the repository afterwards (on main, the first kill left a 0-byte marker: neither did, exit 3 on every
    verb), and the rotation run again from the key that opens it completes and leaves no copy behind. Also through
    a store whose rewrite is the interface's default, written in place (``tests/support/inplace_rewrite.py``):
    there the marker itself is cut off, and the copy of the previous wrapping the rotation keeps is what the old key
    opens (Safety rule 24)."""
    k, k2, _ = keys
    pristine = tmp_path / "pristine"
    _encrypted_repo(str(pristine), k, tmp_path / "work", tmp_path)
    env = {"BLOBSTATE_PLUGINS": "inplace_rewrite"} if store == "in-place" else {}
    torn = []

    def check(repo: str, n: int) -> None:
        work = tmp_path / f"check-{n}"
        if len((Path(repo) / MARKER).read_bytes()) < 50:
            torn.append(n)
        opened = {key: _opens(repo, key, work, env) for key in (k, k2)}
        assert 0 in opened.values(), f"killed after change {n}: no key opens the repository ({opened})"
        # the rotation run again finishes it: from the key that opens the repository now
        again = _blobstate("key", "rotate", "--repo", repo, "--key-file", k if opened[k] == 0 else k2,
                           "--new-key-file", k2, work=work, env=env)
        assert again.returncode == 0, again.stderr
        assert _opens(repo, k2, work, env) == 0
        assert not (Path(repo) / "blobstate-repository.previous").exists(), "the finished rotation left its copies"

    points = _crash_matrix(tmp_path, pristine, ["key", "rotate", "--repo", "{repo}", "--key-file", k,
                                                "--new-key-file", k2], check, env)
    assert points >= 1
    assert bool(torn) == (store == "in-place"), torn  # the marker was cut off only where it is written in place


def test_a_log_change_killed_at_any_write_leaves_a_marker_that_reads(tmp_path):
    """Case 1 for `init --change-log`: killed after each change, the marker still reads (the repository opens with
    its old log or its new one, or refuses the other as a mismatch: exit 0 or 2, never 3)."""
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    assert _blobstate("init", "--repo", pristine, work=work).returncode == 0
    db = f"sqlite:///{tmp_path / 'log.db'}"

    def check(repo: str, n: int) -> None:
        for log in ([], ["--log", db]):
            code = _blobstate("list", "--repo", repo, *log, work=tmp_path / f"check-{n}").returncode
            assert code in (0, 2), f"killed after change {n}: the repository does not open (exit {code})"

    _crash_matrix(tmp_path, pristine, ["init", "--repo", "{repo}", "--log", db, "--change-log"], check)


def test_recording_the_log_killed_at_any_write_leaves_a_marker_that_reads(tmp_path, keys):
    """Case 1 for ``bind_log``: the first writer (here `blobstate init`) that opens a marker from before the
    ``checkpointLog`` field records the log in it (a reader never does); killed after each change, the repository
    still opens with its key."""
    k, _, _ = keys
    pristine, work = tmp_path / "pristine", tmp_path / "work"
    _encrypted_repo(str(pristine), k, work, tmp_path)
    marker = json.loads((pristine / MARKER).read_text())
    del marker["checkpointLog"]
    (pristine / MARKER).write_text(json.dumps(marker, separators=(",", ":")))

    def check(repo: str, n: int) -> None:
        assert _opens(repo, k, tmp_path / f"check-{n}") == 0, f"killed after change {n}: the key no longer opens"

    _crash_matrix(tmp_path, pristine, ["init", "--repo", "{repo}", "--key-file", k], check)


def _target_env(target) -> dict[str, str]:  # noqa: ANN001
    return dict(target.env) if target.name != "file" else {}


def test_two_concurrent_key_rotations_never_both_succeed(store_target, tmp_path, keys):
    """Case 2: two rotations from the same key to two new keys, both holding until the other has read the marker.
    On main both exited 0 and only one new key opened the repository (an operator who then retires the old key is
    locked out). Now exactly one succeeds; the other is refused (exit 4) and changes nothing; the winner's key opens
    the repository."""
    k, k2, k3 = keys
    target, work = store_target, tmp_path / "work"
    env = _target_env(target)
    _encrypted_repo(target.url, k, work, tmp_path, env)
    hold = tmp_path / "hold"
    hold.mkdir()
    racers = {new: _blobstate("key", "rotate", "--repo", target.url, "--key-file", k, "--new-key-file", new,
                              work=work, env={**env, "BLOBSTATE_TEST_HOLD_DIR": str(hold)}, wait=False)
              for new in (k2, k3)}
    codes = {}
    for new, proc in racers.items():
        out, err = proc.communicate(timeout=300)
        codes[new] = (proc.returncode, err)
    assert sorted(code for code, _ in codes.values()) == [0, 4], codes
    winner = next(new for new, (code, _) in codes.items() if code == 0)
    loser = k3 if winner == k2 else k2
    assert "changed" in codes[loser][1], codes[loser][1]
    assert _opens(target.url, winner, work, env) == 0
    assert _opens(target.url, loser, work, env) == 3


def test_recording_the_log_never_reverts_a_key_rotation(store_target, tmp_path, keys):
    """Case 2, ``bind_log``: a writer (`blobstate init`) opens a marker from before the ``checkpointLog`` field and
    holds before it records the log, while a rotation runs to its end (exit 0). On main the held command then wrote
    back the marker it had read, old wrapping and all: the rotated key no longer opened the repository. Now its
    conditional write is refused, it reads the marker again and records the log in the rotated one."""
    k, k2, _ = keys
    target, work = store_target, tmp_path / "work"
    env = _target_env(target)
    _encrypted_repo(target.url, k, work, tmp_path, env)
    store = open_blob_store(target.url, storage_options=target.storage_options)
    try:
        marker = json.loads(store.get_bytes(MARKER))
        del marker["checkpointLog"]
        store.put(PutRequest(MARKER, json.dumps(marker, separators=(",", ":")).encode()))
    finally:
        store.close()
    hold, go = tmp_path / "hold", tmp_path / "go"
    hold.mkdir()
    binder = _blobstate("init", "--repo", target.url, "--key-file", k, work=work, wait=False,
                        env={**env, "BLOBSTATE_TEST_HOLD_DIR": str(hold), "BLOBSTATE_TEST_HOLD_UNTIL": str(go)})
    try:
        wait_until(lambda: any(hold.glob("arrived-*")), timeout_s=120, what="the binder at its marker write",
                   alive=lambda: binder.poll() is None)
        rotated = _blobstate("key", "rotate", "--repo", target.url, "--key-file", k, "--new-key-file", k2,
                             work=tmp_path / "rotating-host", env=env)
        assert rotated.returncode == 0, rotated.stderr
    finally:
        go.touch()
        out, err = binder.communicate(timeout=300)
    assert binder.returncode == 0, err
    assert _opens(target.url, k2, work, env) == 0, "the rotation was reverted"
    assert _opens(target.url, k, work, env) == 3


def test_an_in_place_rewrite_keeps_its_own_copy_until_the_marker_reads_back_and_drops_only_that_one(tmp_path):
    """Safety rule 24 in the Rewrite door (``blobstate.repository.marker:update_marker``): on a store whose
    ``rewrite`` writes in place, every rewrite keeps a copy of the marker as read while it writes (here seen from
    inside the write: the marker truncated, the copy readable), then drops that copy and no other."""
    from inplace_rewrite import InPlaceRewriteFileStore

    from blobstate import api
    from blobstate.model import layout
    from blobstate.repository.marker import keep_copy, parse_marker, read_marker, update_marker

    api.init(repo=str(tmp_path / "repo"))
    store = InPlaceRewriteFileStore(f"file://{tmp_path / 'repo'}")
    before = read_marker(store)
    other = keep_copy(store, replace(before, created_by="an older copy"))  # another call's, kept until its read-back
    os.utime(tmp_path / "repo" / other, (1, 1))  # older than any copy made now
    seen = []
    real_put = store.put

    def put(request):  # noqa: ANN001, ANN202 - the in-place write, cut before it writes a byte
        if request.blob_id == MARKER:
            (tmp_path / "repo" / MARKER).write_bytes(b"")
            seen.append(read_marker(store))  # what a process killed here leaves: the copy stands for the marker
        return real_put(request)

    store.put = put
    after = update_marker(store, lambda info: replace(info, created_by="rewritten"))
    assert seen == [before]
    assert parse_marker(store.get_bytes(MARKER)) == after and after.created_by == "rewritten"
    assert [i.blob_id for i in store.list(layout.MARKER_COPIES)] == [other]
