"""The CLI scenarios every checkpoint log must pass on a real server, shared by ``test_logs_e2e.py`` (SQL) and
``test_kafka_e2e.py`` (both Kafka brokers): a backup/restore cycle with ``--log``, and two ``blobstate backup``
processes racing on one store key (one wins each generation, the other exits 4, restore gives the winner's state).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from fixtures_core import CliResult, cli_env, read_all, run_cli, write_keys

from blobstate.errors import EXIT_FENCED


def ok(result: CliResult) -> CliResult:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def start_backup(store: Path, key_opts: list, work: Path, expected: int) -> subprocess.Popen:
    """``blobstate backup STORE --expected-generation EXPECTED`` as a running subprocess."""
    args = [sys.executable, "-m", "blobstate.cli", "backup", str(store), *map(str, key_opts),
            "--expected-generation", str(expected), "-q"]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cli_env(work))


def backup_restore_cycle(log_url: str, tmp_path: Path) -> str:
    """Two backups, list, restore of the latest and of the first; returns the job name."""
    repo = tmp_path / "repo"
    store = tmp_path / "src" / "s"
    job = f"job{uuid.uuid4().hex[:8]}"
    key_opts = ["--repo", repo, "--log", log_url, "--job", job, "--store", "s"]
    host = tmp_path / "host-a"

    first = write_keys(store, n=500, seed=1)
    cp1 = ok(run_cli("backup", store, *key_opts, "-q", work_base=host)).stdout.strip()
    second = {**first, **write_keys(store, n=300, start=400, seed=2)}
    cp2 = ok(run_cli("backup", store, *key_opts, "-q", work_base=host)).stdout.strip()
    assert cp1 and cp2 and cp1 != cp2

    listed = ok(run_cli("list", *key_opts, "--json", work_base=host)).stdout
    assert cp1 in listed and cp2 in listed
    assert not (repo / "checkpoints").exists(), "the checkpoints went to the file log, not --log"

    dest = tmp_path / "restored" / "s"
    ok(run_cli("restore", dest, *key_opts, "-q", work_base=tmp_path / "host-b"))
    assert read_all(dest) == second
    old = tmp_path / "old" / "s"
    ok(run_cli("restore", old, *key_opts, "--checkpoint", cp1, "-q", work_base=tmp_path / "host-c"))
    assert read_all(old) == first
    return job


def two_writers_race(log_url: str, tmp_path: Path, rounds: int = 2) -> tuple[str, list[str]]:
    """``rounds`` generations, each raced by two backup processes; returns the job and the winners' ids."""
    repo = tmp_path / "repo"
    job = f"race{uuid.uuid4().hex[:8]}"
    key_opts = ["--repo", repo, "--log", log_url, "--job", job, "--store", "s"]
    writers = {name: tmp_path / name / "s" for name in ("a", "b")}
    winners = []
    for generation in range(rounds):
        for seed, path in enumerate(writers.values(), start=10 * generation + 1):
            write_keys(path, n=200, start=generation * 1000, seed=seed)
        contents = {name: read_all(path) for name, path in writers.items()}
        assert contents["a"] != contents["b"]
        procs = {name: start_backup(path, key_opts, tmp_path / f"host-{name}", generation)
                 for name, path in writers.items()}
        results = {name: (p.wait(timeout=300), *p.communicate()) for name, p in procs.items()}
        codes = sorted(code for code, _, _ in results.values())
        assert codes == [0, EXIT_FENCED], {n: (c, err[-2000:]) for n, (c, _, err) in results.items()}
        winner = next(n for n, (code, _, _) in results.items() if code == 0)
        loser = next(n for n in results if n != winner)
        assert "fenced" in results[loser][2].lower()
        winners.append(results[winner][1].strip())

        dest = tmp_path / f"restored-{generation}" / "s"
        ok(run_cli("restore", dest, *key_opts, "-q", work_base=tmp_path / f"host-r{generation}"))
        assert read_all(dest) == contents[winner]

    listed = ok(run_cli("list", *key_opts, "--json", work_base=tmp_path / "host-l")).stdout
    assert all(cp in listed for cp in winners)
    return job, winners
