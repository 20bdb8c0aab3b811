"""CLI start-up (issue 31): ``blobstate backup`` of an unchanged store against ``python -c pass`` and the commit.

``python -m bench.cli_startup [--size 10MiB] [--keys N] [--runs 20] [--warmup 2] [--importtime 7] [--work DIR]
[--s3] [--cold N] [--out FILE]``

The target: ``blobstate backup SRC --repo file://REPO -q`` of a store that has not changed since its last backup
takes at most 2x ``python -c pass`` plus the in-process commit time, checked on wall times (the command's own
``--json`` ``durationMs``, fsyncs included) and on CPU times (user + sys; the commit's CPU bounded by that of a
``blobstate.backup`` call in a warm process, ``in_process``). A RocksDB store of ``--size`` is
backed up once, then each command runs ``--runs`` times after ``--warmup`` runs (the entry-point cache, the
checksum cache and the bytecode written, as on an installed package: ``PYTHONDONTWRITEBYTECODE`` is dropped from
the children's environment); each child's wall and CPU time (``os.wait4``) are taken, medians reported. With
``--importtime N`` (0: off), each module's own import time is the minimum over N runs of ``python -X importtime -m
blobstate.cli backup ...``, summed by top-level package, with the count of modules a backup imports. With
``--s3`` the repository is ``s3://`` on the counting moto server (``bench/s3server.py``, lease mode, the storage
options in ``BLOBSTATE_STORAGE_OPTIONS``) instead of ``file://``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

if __package__ in (None, ""):  # ``python bench/cli_startup.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import state  # noqa: E402
from bench.report import emit  # noqa: E402
from bench.run import parse_size  # noqa: E402


def run_child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv``; its wall time and user + sys CPU time (ms) and its stdout. Raises on a non-zero exit."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} exited {proc.returncode}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000, out.decode()


def measure(argv: list[str], env: dict[str, str], runs: int, warmup: int, *, cold: bool = False) -> dict[str, Any]:
    """Medians over ``runs`` (after ``warmup`` runs) of wall and CPU ms, and the last run's stdout; with ``cold``
    the page cache is dropped before each run (``bench.measure.drop_caches``)."""
    from bench.measure import drop_caches

    for _ in range(warmup):
        run_child(argv, env)
    samples = []
    for _ in range(runs):
        if cold:
            drop_caches()
        samples.append(run_child(argv, env))
    return {"wall_ms": round(statistics.median(s[0] for s in samples), 1),
            "cpu_ms": round(statistics.median(s[1] for s in samples), 1),
            "cpu_ms_min": round(min(s[1] for s in samples), 1), "runs": runs, "stdout": samples[-1][2]}


def import_times(argv: list[str], env: dict[str, str], runs: int) -> dict[str, Any]:
    """Per module, the minimum over ``runs`` of its own import time (``-X importtime``, microseconds), after a
    warm-up run (its caches are keyed by ``sys.path``, whose first entry differs from the console script's)."""
    run_child([sys.executable, *argv], env)
    best: dict[str, int] = {}
    for _ in range(runs):
        err = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env,
                             check=True).stderr
        seen = {}
        for line in err.splitlines():
            fields = line.removeprefix("import time:").split("|")
            if line.startswith("import time:") and len(fields) == 3 and fields[0].strip().isdigit():
                seen[fields[2].strip()] = int(fields[0])
        best = {name: min(own, best.get(name, own)) for name, own in seen.items() if not best or name in best}
    by_package: dict[str, int] = defaultdict(int)
    for name, own in best.items():
        by_package[name.split(".")[0]] += own
    top = sorted(best.items(), key=lambda kv: -kv[1])[:25]
    return {"modules": len(best), "total_ms": round(sum(best.values()) / 1000, 1),
            "by_package_ms": {k: round(v / 1000, 1) for k, v in sorted(by_package.items(), key=lambda kv: -kv[1])},
            "top_modules_ms": {k: round(v / 1000, 1) for k, v in top}}


def in_process(src: str, repo: str, env: dict[str, str], runs: int,
               options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``blobstate.backup`` of the unchanged store called ``runs`` times in this process after a first call (modules
    imported, plugins registered): medians of its ``duration_ms`` (wall) and of the whole call's CPU time (all
    threads; it also opens the repository, so it bounds the commit's CPU from above)."""
    import blobstate

    saved = {k: os.environ.get(k) for k in ("BLOBSTATE_WORK_DIR", "BLOBSTATE_CACHE_DIR")}
    os.environ.update({k: env[k] for k in saved})
    try:
        blobstate.backup(src, repo=repo, storage_options=options)
        walls, cpus = [], []
        for _ in range(runs):
            t0 = time.process_time()
            walls.append(blobstate.backup(src, repo=repo, storage_options=options).duration_ms)
            cpus.append((time.process_time() - t0) * 1000)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {"duration_ms": round(statistics.median(walls), 1), "call_cpu_ms": round(statistics.median(cpus), 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--size", default="10MiB")
    p.add_argument("--keys", type=int, default=0)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--importtime", type=int, default=7)
    p.add_argument("--work", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--s3", action="store_true",
                   help="the repository on the counting moto server (bench/s3server.py) instead of file://")
    p.add_argument("--cold", type=int, default=0,
                   help="also N runs of each command with the page cache dropped first (the peer harness's cold "
                        "mode, `python -m bench`): what a process start costs when its files are not cached (root)")
    args = p.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="blobstate-cli-startup-")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(BLOBSTATE_WORK_DIR=os.path.join(work, "work"), BLOBSTATE_CACHE_DIR=os.path.join(work, "cache"))
    if not args.s3:
        return run(args, work, f"file://{os.path.join(work, 'repo')}", env, None)
    import boto3

    from bench.s3server import S3Server, client_env

    server = S3Server(os.path.join(work, "moto.log"))
    try:
        os.environ.update(client_env())
        options = {"endpoint_url": server.endpoint}
        env.update(client_env(), BLOBSTATE_STORAGE_OPTIONS=json.dumps(options))
        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket="cli-startup")
        return run(args, work, "s3://cli-startup/repo", env, options)
    finally:
        server.stop()


def run(args: argparse.Namespace, work: str, repo: str, env: dict[str, str], options: dict[str, Any] | None) -> int:
    """The measurement of ``main`` against ``repo`` (``options``: its storage options, also in ``env``)."""
    size = parse_size(args.size)
    src = os.path.join(work, "src")
    state.generate(src, size_bytes=size, keys=args.keys or max(1, size // 1024))
    script = os.path.join(os.path.dirname(sys.executable), "blobstate")
    cli = [script] if os.path.exists(script) else [sys.executable, "-m", "blobstate.cli"]
    backup = ["backup", src, "--repo", repo]
    run_child([*cli, *backup, "-q"], env)  # the first backup: everything uploaded
    python = measure([sys.executable, "-c", "pass"], env, args.runs, args.warmup)
    command = measure([*cli, *backup, "-q"], env, args.runs, args.warmup)
    cold = {"python_c_pass": measure([sys.executable, "-c", "pass"], env, args.cold, 0, cold=True),
            "backup_unchanged": measure([*cli, *backup, "-q"], env, args.cold, 0, cold=True)} if args.cold else None
    commits = [json.loads(run_child([*cli, *backup, "--json"], env)[2]) for _ in range(args.runs)]
    assert all(c["filesUploaded"] == 0 for c in commits), "the store changed between backups"
    commit_ms = round(statistics.median(c["durationMs"] for c in commits), 1)
    warm = in_process(src, repo, env, args.runs, options)
    # durationMs is a wall time (fsyncs included): wall against wall, and CPU against the warm in-process call's CPU
    target = {"wall_ms": round(2 * python["wall_ms"] + commit_ms, 1),
              "cpu_ms": round(2 * python["cpu_ms"] + warm["call_cpu_ms"], 1)}
    met = {unit: command[unit] <= target[unit] for unit in target}
    doc: dict[str, Any] = {
        "size_bytes": size, "runs": args.runs, "command": " ".join(os.path.basename(a) for a in cli[:1]) + " backup",
        "repository": repo.split(":", 1)[0], "load_average": os.getloadavg(), "python_c_pass": python,
        "backup_unchanged": command,
        "commit_ms": commit_ms, "in_process": warm, "target_ms": target, "met": met, "cold_page_cache": cold,
        "imports": (import_times(["-m", "blobstate.cli", *backup, "-q"], env, args.importtime)
                    if args.importtime else None)}
    for row in (python, command, *(cold or {}).values()):
        row.pop("stdout")
    lines = ["| (medians) | wall ms | user + sys CPU ms |", "| --- | ---: | ---: |",
             f"| `python -c pass` | {python['wall_ms']} | {python['cpu_ms']} |",
             f"| `blobstate backup` of an unchanged store | {command['wall_ms']} | {command['cpu_ms']} |",
             f"| its commit (`--json` durationMs) | {commit_ms} | |",
             f"| `blobstate.backup` in a warm process (durationMs; CPU of the call) | {warm['duration_ms']} | "
             f"{warm['call_cpu_ms']} |",
             "| target: 2 x `python -c pass` + commit | " + " | ".join(
                 f"{target[u]} ({'met' if met[u] else 'missed'})" for u in ("wall_ms", "cpu_ms")) + " |"]
    if cold:
        lines += [f"| the same with the page cache dropped first: `python -c pass` | "
                  f"{cold['python_c_pass']['wall_ms']} | {cold['python_c_pass']['cpu_ms']} |",
                  f"| the same with the page cache dropped first: `blobstate backup` | "
                  f"{cold['backup_unchanged']['wall_ms']} | {cold['backup_unchanged']['cpu_ms']} |"]
    if doc["imports"]:
        imp = doc["imports"]
        lines.append(f"\nimports: {imp['modules']} modules, {imp['total_ms']} ms of own import time (min of "
                     f"{args.importtime}); by package: " + ", ".join(f"{k} {v}" for k, v in
                                                                      list(imp["by_package_ms"].items())[:12]))
    lines.append(f"load average {', '.join(f'{x:.1f}' for x in doc['load_average'])}")
    emit(doc, "\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
