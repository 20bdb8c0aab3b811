"""The fault-injection harness of issue 12: a repository target (file:// or moto S3), real `blobstate` subprocesses
that pause themselves (pause_plugin) or append through a log that answers late (fault_logs), and the end-state
checks every case ends with: every retained checkpoint restorable and verified, no orphan after gc, the next backup
succeeding."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fixtures_core import CliResult, cli_env, read_all

DAY_MS = 24 * 3600 * 1000


@dataclass
class Target:
    """Where a case runs: the repository URL, storage options for in-process calls, env for subprocesses."""

    url: str
    options: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    log: str | None = None  # a checkpoint log URL other than the repository's

    def args(self, key: Any) -> list[str]:
        """``--repo`` (and ``--log``) plus the store key options, for a CLI call."""
        log = ["--log", self.log] if self.log else []
        return ["--repo", self.url, *log, "--job", key.job, "--task", key.task, "--store", key.store]

    def store(self, ttl_mode: str | None = None) -> Any:
        from blobstate.repository.backends import open_blob_store

        return open_blob_store(self.url, storage_options=self.options, ttl_mode=ttl_mode)


def start_cli(*args: Any, work_base: Path, env: dict[str, str]) -> subprocess.Popen:
    """A `blobstate` subprocess running in the background."""
    return subprocess.Popen([sys.executable, "-m", "blobstate.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**cli_env(work_base), **env})


def wait_stopped(proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until ``proc`` is stopped by SIGSTOP (state T in /proc), failing if it exits or the deadline passes."""
    if not stopped_or_exited(proc, timeout):
        out, err = proc.communicate()
        raise AssertionError(f"the process exited ({proc.returncode}) instead of pausing:\n{err}")


def stopped_or_exited(proc: subprocess.Popen, timeout: float = 120) -> bool:
    """Poll until ``proc`` is stopped by SIGSTOP (True) or has exited (False: it never reached its pause point);
    past the deadline it is killed and ``AssertionError`` raised."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            state = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = ""
        if state == "T":
            return True
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("the process did not pause in time")


def resume(proc: subprocess.Popen, *, clock_file: Path | None = None, advance_ms: int = 0,
           timeout: float = 300) -> CliResult:
    """Move the paused process's clock forward by ``advance_ms`` (the pause plugin waits for ``clock_file``),
    SIGCONT it and wait for it to finish."""
    send_cont(proc, clock_file=clock_file, advance_ms=advance_ms)
    out, err = proc.communicate(timeout=timeout)
    return CliResult(proc.returncode, out, err)


def send_cont(proc: subprocess.Popen, *, clock_file: Path | None = None, advance_ms: int = 0) -> None:
    """Write ``advance_ms`` to ``clock_file`` (atomically: the pause plugin reads it once it exists), then SIGCONT
    the paused process without waiting for it."""
    if clock_file is not None:
        tmp = clock_file.with_suffix(".tmp")
        tmp.write_text(str(advance_ms))
        tmp.rename(clock_file)
    os.kill(proc.pid, signal.SIGCONT)


def pause_env(event: str, clock_file: Path) -> dict[str, str]:
    return {"BLOBSTATE_PLUGINS": "pause_plugin", "BLOBSTATE_TEST_PAUSE_AT": event,
            "BLOBSTATE_TEST_CLOCK_FILE": str(clock_file)}


def referenced_objects(target: Target, key: Any) -> set[str]:
    """Every object the retained checkpoints of ``key`` reference (indexes included)."""
    from blobstate.repository.repo import Repository

    repo = Repository.open(target.url, log=target.log, storage_options=target.options)
    try:
        return repo.retained_references(repo.log.history(key))
    finally:
        repo.close()


def store_objects(target: Target, key: Any) -> set[str]:
    """Every blob and index under ``key``'s prefix (leases excluded)."""
    store = target.store()
    try:
        return {i.blob_id for i in store.list(key.prefix)}
    finally:
        store.close()


def assert_end_state(cli: Any, target: Target, key: Any, store_dir: Path, tmp_path: Path,
                     *, expected_latest: dict[bytes, bytes], ttl_mode: str | None = None) -> None:
    """Every retained checkpoint restorable and verified; no orphan after a gc far in the future; the next backup
    succeeds and restores."""
    env = target.env
    base = target.args(key)
    listed = cli("list", *base, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    checkpoints = listed.json()
    assert checkpoints, "no checkpoint retained"
    verified = cli("verify", *base, "--all", env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for i, cp in enumerate(checkpoints):
        dest = tmp_path / f"check-{i}" / key.store
        restored = cli("restore", dest, *base, "--checkpoint", cp["checkpointId"], "--no-cleanup", "-q", env=env,
                       work=tmp_path / f"check-host-{i}")
        assert restored.returncode == 0, restored.stderr
    latest = tmp_path / "check-latest" / key.store
    assert cli("restore", latest, *base, "-q", env=env, work=tmp_path / "check-host-latest").returncode == 0
    assert read_all(latest) == expected_latest
    mode = ["--ttl-mode", ttl_mode] if ttl_mode else []
    later = int(time.time() * 1000) + 30 * DAY_MS
    log = ["--log", target.log] if target.log else []
    gc = cli("gc", "--repo", target.url, *log, *mode, "--now", str(later), "--json", env=env,
             work=tmp_path / "gc-host")
    assert gc.returncode == 0, gc.stderr
    assert all(r["skipped"] is None for r in gc.json()), gc.json()
    assert store_objects(target, key) == referenced_objects(target, key), "orphans left, or references lost"
    again = cli("backup", store_dir, *base, *mode, "--json", "-q", env=env)
    assert again.returncode == 0, again.stderr
    again_dest = tmp_path / "check-again" / key.store
    assert cli("restore", again_dest, *base, "-q", env=env, work=tmp_path / "check-host-again").returncode == 0
    assert read_all(again_dest) == read_all(store_dir)
