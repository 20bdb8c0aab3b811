"""The benchmark run: make the data, measure every tool on every backend, write JSON, Markdown and PNG.

``python bench/run.py [--size 1GiB] [--keys N] [--runs 3] [--quick] [--backends file,s3] [--tools ...]
[--cache cold|warm] [--work DIR] [--out bench/results]``

Per run, per backend, per tool: a fresh repository; full backup of v0, incremental backups of v1 (1 % of the keys
changed) and v2 (10 % more); restore of v2 into an empty directory and into a directory holding v1 (a ``cp -a`` of
v1, the same for every tool). Wall times are medians over the runs. A failing tool or operation is recorded with
its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from typing import Any

if __package__ in (None, ""):  # ``python bench/run.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import measure, report, state  # noqa: E402
from bench.s3server import S3Server  # noqa: E402
from bench.tools import ALL_TOOLS, NOTES, STEPS, Ctx, Tool  # noqa: E402

FRACTIONS = {"v1": 0.01, "v2": 0.10}
RESTORE_OPS = {"restore_empty": "empty", "restore_prev": "prev"}
OPS = (*STEPS, *RESTORE_OPS)
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def parse_size(text: str) -> int:
    """``1GiB``, ``20MB``, ``512k``, ``1048576`` -> bytes (binary units: k = KiB). Raises ``ValueError``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", text.lower())
    if not m:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2) or " "))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="1GiB", help="state size (default 1GiB); k/M/G are binary units")
    p.add_argument("--keys", type=int, default=None, help="number of keys (default: one per KiB of --size)")
    p.add_argument("--runs", type=int, default=3, help="runs per operation; medians are reported (default 3)")
    p.add_argument("--quick", action="store_true", help="20 MiB, 20 000 keys, 1 run: a fast end-to-end check")
    p.add_argument("--backends", default="file,s3", help="comma list of file, s3")
    p.add_argument("--tools", default=",".join(t.name for t in ALL_TOOLS), help="comma list of tools")
    p.add_argument("--cache", choices=("cold", "warm"), default="cold",
                   help="cold: drop the page cache before every timed operation (falls back to warm if not "
                        "permitted); warm: read the inputs once before every timed operation")
    p.add_argument("--work", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "blobstate-bench"),
                   help="scratch directory (data is kept there and reused when the parameters match)")
    p.add_argument("--out", default=DEFAULT_OUT, help="results directory")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--delta-commits", type=int, default=100,
                   help="in-process delta commits per backend (the Spark per-batch rows; 0: none)")
    return p


def prepare_data(work: str, size: int, keys: int, seed: int) -> dict[str, Any]:
    """Generate v0, change 1 % -> v1, 10 % -> v2 (snapshots), and the changelog of v2. Reused if unchanged."""
    data = os.path.join(work, "data")
    params = {"size": size, "keys": keys, "seed": seed, "format": state.SST_FORMAT_VERSION}
    marker = os.path.join(data, "params.json")
    if os.path.exists(marker):
        with open(marker) as fh:
            saved = json.load(fh)
        if saved.get("params") == params:
            return saved
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(data)
    db = os.path.join(data, "db")
    t0 = time.perf_counter()
    state.generate(db, size_bytes=size, keys=keys, seed=seed)
    state.snapshot(db, os.path.join(data, "v0"))
    changed = {}
    for i, (version, fraction) in enumerate(FRACTIONS.items(), start=1):
        changed[version] = state.change(db, fraction=fraction, keys=keys, size_bytes=size, seed=seed + i)
        state.snapshot(db, os.path.join(data, version))
    records, log_bytes = state.write_changelog(os.path.join(data, "v2"), os.path.join(data, "changelog.log"))
    info: dict[str, Any] = {"params": params, "generate_s": round(time.perf_counter() - t0, 2),
                            "keys_changed": changed, "changelog_records": records, "changelog_bytes": log_bytes,
                            "versions": {}}
    for version in ("v0", "v1", "v2"):
        d = os.path.join(data, version)
        inv = state.inventory(d)
        info["versions"][version] = {
            "files": len(inv), "bytes": sum(f.size for f in inv.values()),
            "sst_files": sum(1 for n in inv if n.endswith(".sst")),
        }
    for version, prev in STEPS.values():
        if prev:
            names = state.delta_files(os.path.join(data, prev), os.path.join(data, version))
            info["versions"][version]["delta_files"] = len(names)
            info["versions"][version]["delta_bytes"] = state.total_bytes(os.path.join(data, version), names)
    v1, v2 = os.path.join(data, "v1"), os.path.join(data, "v2")
    prev_names = state.delta_files(v1, v2)
    info["restore_prev_delta_bytes"] = state.total_bytes(v2, prev_names)
    with open(marker, "w") as fh:
        json.dump(info, fh, indent=1)
    return info


def tool_versions() -> dict[str, str]:
    def first_line(argv: list[str]) -> str:
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            return (out.stdout or out.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "not installed"

    from importlib.metadata import PackageNotFoundError, version

    def pkg(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return {"blobstate": pkg("blobstate"), "restic": first_line(["restic", "version"]),
            "rclone": first_line(["rclone", "version"]), "ldb": first_line(["ldb", "--version"]),
            "rocksdict": pkg("rocksdict"), "s3fs": pkg("s3fs"), "moto": pkg("moto"),
            "python": platform.python_version()}


def verify_restore(tool: Tool, ctx: Ctx, dest: str, stdout: str, info: dict[str, Any]) -> dict[str, Any]:
    """Check what a restore produced; returns facts for the sample. Raises ``BenchError`` when it is wrong."""
    if tool.name.startswith("changelog"):
        count = int(stdout.strip().splitlines()[-1])
        if count != info["params"]["keys"]:
            raise measure.BenchError(f"{tool.name} replayed {count} records, expected {info['params']['keys']}")
        return {"records": count}
    if tool.name == "limit" and ctx.backend == "s3":
        return {"bytes": int(stdout.strip().splitlines()[-1])}
    want = {n: f for n, f in state.inventory(ctx.snaps["v2"]).items() if n.endswith(".sst")}
    got = state.inventory(dest)
    wrong = [n for n, f in want.items() if n not in got or got[n].size != f.size]
    if wrong:
        raise measure.BenchError(f"{tool.name} restore lacks or mis-sizes {len(wrong)} SSTs, e.g. {wrong[:3]}")
    extra = [n for n in got if n.endswith(".sst") and n not in want]
    return {"extra_sst_files_left": len(extra)}


class Bench:
    def __init__(self, args: argparse.Namespace, info: dict[str, Any], cold: bool) -> None:
        self.args = args
        self.info = info
        self.cold = cold
        self.data = os.path.join(args.work, "data")
        self.snaps = {v: os.path.join(self.data, v) for v in ("v0", "v1", "v2")}
        self.samples: dict[tuple[str, str, str], list[measure.Sample]] = {}
        self.errors: dict[tuple[str, str, str], str] = {}
        self.skipped: dict[str, str] = {}
        self.log_path = os.path.join(args.work, "commands.log")

    def _before(self, warm_paths: list[str]) -> None:
        if self.cold:
            measure.drop_caches()
        else:
            measure.warm(warm_paths)

    def timed(self, tool: Tool, ctx: Ctx, op: str, cmd: Any, *, warm_paths: list[str], sync_path: str,
              backup: bool) -> tuple[measure.Sample, str]:
        listing = tool.repo_listing(ctx) if backup else {}
        self._before(warm_paths)
        if ctx.s3 is not None:
            ctx.s3.counts(reset=True)
        sample, out = measure.run_measured(cmd.argv, env=cmd.environ(), cwd=cmd.cwd,
                                           sync_path=sync_path, log_path=self.log_path)
        if ctx.s3 is not None:
            sample.requests = ctx.s3.counts()
        if backup:
            after = tool.repo_listing(ctx)
            added = [k for k, v in after.items() if listing.get(k) != v]
            sample.repo_objects_added = len(added)
            sample.repo_bytes_added = sum(after[k][0] for k in added)
        return sample, out

    def record(self, backend: str, tool: str, op: str, sample: measure.Sample) -> None:
        self.samples.setdefault((backend, tool, op), []).append(sample)

    def make_ctx(self, tool: Tool, backend: str, run: int, s3: S3Server | None, shared: dict[str, Any]) -> Ctx:
        return Ctx(backend=backend, work=os.path.join(self.args.work, "runs", f"{backend}-{tool.name}"), run=run,
                   snaps=self.snaps, s3=s3, shared=shared, changelog=os.path.join(self.data, "changelog.log"))

    def run_tool(self, tool: Tool, ctx: Ctx) -> None:
        """Set ``tool`` up and run its operations; the caller tears it down (also when this raises)."""
        backend = ctx.backend
        shutil.rmtree(ctx.work, ignore_errors=True)
        try:
            tool.setup(ctx)
        except Exception as exc:  # noqa: BLE001 - any failure of a tool's preparation is recorded; the run goes on
            for op in tool.ops:
                self.errors[(backend, tool.name, op)] = f"setup failed: {type(exc).__name__}: {exc}"
            return
        src = os.path.join(self.args.work, "runs", "src")
        failed = False
        for op in tool.ops:
            if op not in STEPS:
                continue
            version, _prev = STEPS[op]
            shutil.rmtree(src, ignore_errors=True)
            subprocess.run(["cp", "-al", self.snaps[version], src], check=True)
            try:
                sample, out = self.timed(tool, ctx, op, tool.backup(ctx, src, op), warm_paths=[src],
                                         sync_path=self.args.work, backup=True)
                sample.extra.update(tool.backup_extra(out))
                self.record(backend, tool.name, op, sample)
            except (measure.BenchError, OSError, subprocess.CalledProcessError) as exc:
                self.errors[(backend, tool.name, op)] = str(exc)
                failed = True
                break
        if not failed:
            tool.after_backups(ctx)
        for op, mode in RESTORE_OPS.items():
            if op not in tool.ops or failed:
                continue
            dest = os.path.join(ctx.work, f"dest-{mode}")
            shutil.rmtree(dest, ignore_errors=True)
            if mode == "prev":
                subprocess.run(["cp", "-a", self.snaps["v1"], dest], check=True)
            try:
                cmd = tool.restore(ctx, dest, mode)
                sample, out = self.timed(tool, ctx, op, cmd, warm_paths=tool.restore_inputs(ctx),
                                         sync_path=self.args.work, backup=False)
                sample.extra.update(verify_restore(tool, ctx, dest, out, self.info))
                sample.extra.update(tool.restore_extra(ctx))
                self.record(backend, tool.name, op, sample)
            except (measure.BenchError, OSError, ValueError, IndexError, subprocess.CalledProcessError) as exc:
                self.errors[(backend, tool.name, op)] = str(exc)
            shutil.rmtree(dest, ignore_errors=True)

    def run(self) -> None:
        backends = [b for b in self.args.backends.split(",") if b]
        wanted = {t for t in self.args.tools.split(",") if t}
        tools = [t for t in ALL_TOOLS if t.name in wanted]
        for t in tools:
            reason = t.missing()
            if reason:
                self.skipped[t.name] = reason
        tools = [t for t in tools if t.name not in self.skipped]
        for run in range(self.args.runs):
            for backend in backends:
                s3 = S3Server(os.path.join(self.args.work, "moto.log")) if backend == "s3" else None
                ctxs: list[tuple[Tool, Ctx]] = []
                try:
                    shared: dict[str, Any] = {}
                    for tool in tools:
                        if backend not in tool.backends:
                            continue
                        print(f"[run {run + 1}/{self.args.runs}] {backend} {tool.name}", file=sys.stderr, flush=True)
                        ctx = self.make_ctx(tool, backend, run, s3, shared)
                        ctxs.append((tool, ctx))
                        self.run_tool(tool, ctx)
                finally:
                    try:
                        for tool, ctx in ctxs:
                            try:
                                tool.teardown(ctx)
                            except Exception as exc:  # noqa: BLE001 - tear the others down all the same
                                print(f"teardown of {tool.name} failed: {exc}", file=sys.stderr, flush=True)
                    finally:
                        if s3 is not None:
                            s3.stop()


MEDIAN_FIELDS = ("wall_s", "peak_rss_mib", "read_bytes", "write_bytes", "rchar", "wchar", "repo_bytes_added",
                 "repo_objects_added")


def summarise(bench: Bench) -> list[dict[str, Any]]:
    rows = []
    for (backend, tool, op), samples in sorted(bench.samples.items()):
        med: dict[str, Any] = {}
        for f in MEDIAN_FIELDS:
            values = [getattr(s, f) for s in samples if getattr(s, f) is not None]
            med[f] = statistics.median(values) if values else None
        commit_s = [s.extra["commit_s"] for s in samples if s.extra.get("commit_s") is not None]
        med["commit_s"] = statistics.median(commit_s) if commit_s else None
        reqs = [s.requests for s in samples if s.requests is not None]
        if reqs:
            kinds = sorted({k for r in reqs for k in r})
            med["requests"] = {k: statistics.median([r.get(k, 0) for r in reqs]) for k in kinds}
        else:
            med["requests"] = None
        rows.append({"backend": backend, "tool": tool, "op": op, "runs": len(samples), "median": med,
                     "samples": [s.to_json() for s in samples], "error": bench.errors.get((backend, tool, op))})
    for (backend, tool, op), err in sorted(bench.errors.items()):
        if (backend, tool, op) not in bench.samples:
            rows.append({"backend": backend, "tool": tool, "op": op, "runs": 0, "median": None, "samples": [],
                         "error": err})
    return rows


def cli_startup_s(runs: int = 10) -> float | None:
    """Median wall time of ``blobstate --version`` (seconds) over ``runs`` runs, warm; None if it fails."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        done = subprocess.run(["blobstate", "--version"], capture_output=True, timeout=60)
        if done.returncode != 0:
            return None
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _exit_on_sigterm(signum: int, _frame: Any) -> None:
    """SIGTERM -> ``SystemExit``, so the ``finally`` blocks stop the servers this run started (by PID)."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = build_parser().parse_args(argv)
    if args.quick:
        args.size, args.keys, args.runs = "20MiB", args.keys or 20_000, 1
    size = parse_size(args.size)
    keys = args.keys or max(1, size // 1024)
    os.makedirs(args.work, exist_ok=True)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    cold, cache_note = (False, "warm: inputs read once before every timed operation")
    if args.cache == "cold":
        cold, cache_note = measure.can_drop_caches()
    print(f"data: {size} bytes, {keys} keys in {args.work}; {cache_note}", file=sys.stderr, flush=True)
    info = prepare_data(args.work, size, keys, args.seed)
    info["cli_version_s"] = cli_startup_s()
    bench = Bench(args, info, cold)
    started = time.time()
    bench.run()
    rows = summarise(bench)
    deltas: dict[str, Any] = {}
    if args.delta_commits and "blobstate" in args.tools.split(","):
        from bench import delta_commits

        print("delta commits (in process)", file=sys.stderr, flush=True)
        deltas = delta_commits.run([b for b in args.backends.split(",") if b], args.work,
                                   commits=args.delta_commits, ops=200, value_size=100)
    doc: dict[str, Any] = {
        "meta": {
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "duration_s": round(time.time() - started, 1),
            "argv": sys.argv[1:] if argv is None else argv,
            "size_bytes": size, "keys": keys, "runs": args.runs, "cache": "cold" if cold else "warm",
            "cache_note": cache_note, "data": info, "tools": tool_versions(), "notes": NOTES,
            "skipped": bench.skipped,
            "machine": {"cpus": os.cpu_count(), "kernel": platform.release(),
                        "mem_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
        },
        "results": rows,
        "delta_commits": deltas,
    }
    doc["ratios"] = report.ratios(rows)
    doc["peer_ratios"] = report.peer_rows(doc)
    doc["targets"] = report.targets(rows, info)
    os.makedirs(args.out, exist_ok=True)
    paths = report.write_all(doc, args.out)
    for p in paths:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
