"""A restore into the previous version with and without the fetch ahead (issue 31), side by side.

``python -m bench.restore_ahead [--files 50] [--file-mib 10] [--changed 5] [--runs 3] [--latency-ms 0,20,50]
[--verify-kept full] [--out FILE]``

A directory store of ``--files`` random files of ``--file-mib`` MiB is backed up (v1), ``--changed`` of them are
rewritten 10% larger (v2) and backed up again. Then, per backend (file:// and, for each ``--latency-ms``, the moto
server with that emulated round trip, ``bench/s3server.py``), and per run, alternately with the fetch ahead
(``blobstate.restoring.download.Prefetch``) and without it (``certain_downloads`` answering nothing): v1 is restored
into a directory, the page cache dropped (when permitted), and v2 restored into it, timed. The changed files are
the ones fetched ahead; the kept ones are read by the plan (``--verify-kept full``: every kept file read, the case
the fetch ahead is for). Medians are reported, and the time of the plan and of the downloads after it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

if __package__ in (None, ""):  # ``python bench/restore_ahead.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import measure as page_cache  # noqa: E402
from bench.report import emit  # noqa: E402


def drop_caches() -> bool:
    """``bench.measure.drop_caches``; False when not permitted (then the reads come from memory)."""
    try:
        page_cache.drop_caches()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def backend(kind: str, latency_ms: float, work: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(repository URL, storage options)`` of a fresh repository on ``kind`` (``file`` or ``s3``)."""
    if kind == "file":
        yield f"file://{work}/repo-file", {}
        return
    from bench.s3server import S3Server, client_env

    os.environ.update(client_env())
    server = S3Server(os.path.join(work, f"moto-{latency_ms:g}.log"), latency_ms=latency_ms)
    try:
        import boto3

        boto3.client("s3", endpoint_url=server.endpoint).create_bucket(Bucket="ahead")
        yield "s3://ahead/repo", {"endpoint_url": server.endpoint}
    finally:
        server.stop()


def measure(repo: str, options: dict[str, Any], src: str, work: str, args: argparse.Namespace) -> dict[str, Any]:
    import blobstate
    from blobstate.restoring import download, snapshot

    def write(i: int, size: int) -> None:
        with open(os.path.join(src, f"f{i:03d}.bin"), "wb") as fh:
            fh.write(os.urandom(size))

    shutil.rmtree(src, ignore_errors=True)
    os.makedirs(src)
    size = args.file_mib << 20
    for i in range(args.files):
        write(i, size)
    common = {"repo": repo, "storage_options": options}
    v1 = blobstate.backup(src, store_type="dir", work_base=f"{work}/w", **common).checkpoint.checkpoint_id
    for i in range(args.changed):
        write(i, size + size // 10)
    v2 = blobstate.backup(src, store_type="dir", work_base=f"{work}/w", **common).checkpoint.checkpoint_id
    dest, parts = f"{work}/dest/{os.path.basename(src)}", {"plan": snapshot.plan_restore}
    spent: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - t0
        return run

    rows: dict[str, list[dict[str, float]]] = {"ahead": [], "after the plan": []}
    real = download.certain_downloads
    try:
        snapshot.plan_restore = timed("plan", parts["plan"])
        for _ in range(args.runs):
            for mode in rows:
                snapshot.certain_downloads = real if mode == "ahead" else (lambda files, roots: {})
                blobstate.restore(dest, checkpoint=v1, work_dir=f"{work}/h", force=True, **common)
                dropped = drop_caches()
                spent.clear()
                t0 = time.perf_counter()
                result = blobstate.restore(dest, checkpoint=v2, work_dir=f"{work}/h", force=True,
                                           verify_kept=args.verify_kept, **common)
                total = time.perf_counter() - t0
                assert result.files_downloaded == args.changed, result
                rows[mode].append({"s": total, "plan_s": spent.get("plan", 0.0), "dropped": dropped})
    finally:
        snapshot.plan_restore, snapshot.certain_downloads = parts["plan"], real
    return {mode: {"median_s": round(statistics.median(r["s"] for r in runs), 3),
                   "plan_median_s": round(statistics.median(r["plan_s"] for r in runs), 3),
                   "runs_s": [round(r["s"], 3) for r in runs], "cache_dropped": all(r["dropped"] for r in runs)}
            for mode, runs in rows.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=50)
    parser.add_argument("--file-mib", type=int, default=10)
    parser.add_argument("--changed", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency-ms", default="0,20,50", help="emulated round trips of the moto server")
    parser.add_argument("--verify-kept", default="full")
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="blobstate-ahead-")
    results: dict[str, Any] = {"files": args.files, "fileMiB": args.file_mib, "changed": args.changed,
                               "verifyKept": args.verify_kept, "load": list(os.getloadavg()), "rows": {}}
    try:
        for kind in args.backends.split(","):
            for latency in ([0.0] if kind == "file" else [float(x) for x in args.latency_ms.split(",")]):
                with backend(kind, latency, work) as (repo, options):
                    name = kind if kind == "file" else f"s3 ({latency:g} ms)"
                    results["rows"][name] = row = measure(repo, options, f"{work}/src", work, args)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = ["| backend | fetch ahead s (its plan s) | downloads after the plan s (its plan s) | ratio |",
             "| --- | ---: | ---: | ---: |"]
    for name, row in results["rows"].items():
        a, b = row["ahead"], row["after the plan"]
        lines.append(f"| {name} | {a['median_s']} ({a['plan_median_s']}) | {b['median_s']} ({b['plan_median_s']}) | "
                     f"{a['median_s'] / b['median_s']:.2f} |")
    emit(results, "\n".join(lines), args.out)
    return results


if __name__ == "__main__":
    main()
