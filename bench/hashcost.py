"""The cost of the 128-bit content hash (XXH3-128, besides CRC32C) on incremental backups (issue 13).

``python -m bench.hashcost [--size 256MiB] [--keys N] [--dir-files 1000] [--runs 3] [--work DIR] [--out FILE]``

Files that can change in place (a dir store's files, a RocksDB's ``MANIFEST``/``OPTIONS``/WAL) are read at every
commit and hashed with CRC32C and XXH3-128; immutable SSTs keep CRC32C from the checksum cache. Measured, in one
process, on ``file://``, medians of ``--runs``:

- raw throughput of one pass over a file: CRC32C alone, CRC32C + XXH3-128 (MB/s, page cache warm);
- incremental backup of a RocksDB state after 1% of the keys changed (the benchmark's v1 step);
- incremental backup of a dir store of ``--dir-files`` files of ``--size`` in total after 1% of them changed;

each with the content hash and with it switched off (``blobstate.local.checksum.digest_file`` forced to CRC32C only),
every variant into its own fresh repository (a full backup, then the timed incremental one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

if __package__ in (None, ""):  # ``python bench/hashcost.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import state  # noqa: E402
from bench.report import emit  # noqa: E402
from bench.run import parse_size  # noqa: E402


@contextmanager
def content_hash(enabled: bool) -> Iterator[None]:
    """Run the block with the content hash on (as shipped) or off (CRC32C only, the cost baseline)."""
    from blobstate.local import checksum

    real = checksum.digest_file
    if not enabled:
        checksum.digest_file = lambda path, *, content_hash=True: real(path, content_hash=False)  # type: ignore
    try:
        yield
    finally:
        checksum.digest_file = real


def throughput(path: str, runs: int) -> dict[str, float]:
    """MB/s of one streaming pass over ``path``: CRC32C alone and CRC32C + XXH3-128."""
    from blobstate.local.checksum import digest_file

    size = os.path.getsize(path)
    digest_file(path, content_hash=True)  # warm the page cache
    out = {}
    for label, enabled in (("crc32c", False), ("crc32c+xxh3-128", True)):
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            digest_file(path, content_hash=enabled)
            times.append(time.perf_counter() - t0)
        out[label] = size / statistics.median(times) / 1e6
    return out


def scan_cost(checkpoint_dir: str, store_type: str, cache_path: str, runs: int) -> dict[str, float]:
    """Median seconds of the commit's scan of one local checkpoint (what the content hash adds to), with and
    without the content hash, alternating, on the same files, page cache warm, SSTs' CRC32C from the cache."""
    from blobstate.commit import planner
    from blobstate.local.checksum import ChecksumCache
    from blobstate.repository.backends import open_local_store

    is_mutable = open_local_store(store_type).is_mutable
    times: dict[str, list[float]] = {"crc32c only": [], "crc32c + xxh3-128": []}
    for _ in range(runs):
        for label, enabled in (("crc32c only", False), ("crc32c + xxh3-128", True)):
            cache = ChecksumCache(cache_path)
            with content_hash(enabled):
                t0 = time.perf_counter()
                planner.scan_directory(checkpoint_dir, cache, is_mutable=is_mutable)
                times[label].append(time.perf_counter() - t0)
    return {label: statistics.median(values) for label, values in times.items()}


def incremental(make: Callable[[str], None], change: Callable[[str], None], store_type: str, work: str,
                runs: int) -> dict[str, Any]:
    """Median seconds of the incremental backup with and without the content hash (each into its own fresh
    repository), and of the scan of its local checkpoint alone (``scan_cost``, the same files both ways)."""
    import blobstate

    results: dict[str, Any] = {}
    walls: dict[str, list[float]] = {"crc32c only": [], "crc32c + xxh3-128": []}
    commits: dict[str, list[float]] = {"crc32c only": [], "crc32c + xxh3-128": []}
    for run in range(runs):  # the two variants alternate, so a drift of the machine's load hits both alike
        for label, enabled in (("crc32c only", False), ("crc32c + xxh3-128", True)):
            base = os.path.join(work, f"{store_type}-{label.replace(' ', '_')}-{run}")
            shutil.rmtree(base, ignore_errors=True)
            src, repo = os.path.join(base, "s"), os.path.join(base, "repo")
            make(src)
            with content_hash(enabled):
                opts: dict[str, Any] = {"repo": repo, "store_type": store_type, "work_dir": os.path.join(base, "w")}
                blobstate.backup(src, **opts)
                change(src)
                t0 = time.perf_counter()
                result = blobstate.backup(src, **opts)
                walls[label].append(time.perf_counter() - t0)
                commits[label].append(result.upload_ms / 1000)
            if enabled and run == runs - 1:
                from blobstate.local import workdir

                newest = workdir.local_checkpoint_dirs(opts["work_dir"])[-1]
                cache = os.path.join(opts["work_dir"], workdir.CRC_CACHE)
                results["scan_s"] = scan_cost(newest, store_type, cache, max(5, 3 * runs))
            shutil.rmtree(base, ignore_errors=True)
    for label in walls:
        results[label] = {"wall_s": statistics.median(walls[label]),
                          "scan_diff_upload_s": statistics.median(commits[label])}
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.hashcost", description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="256MiB", help="state size (default 256MiB)")
    p.add_argument("--keys", type=int, default=None, help="RocksDB keys (default: one per KiB of --size)")
    p.add_argument("--dir-files", type=int, default=1000, help="files of the dir store (default 1000)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    size = parse_size(args.size)
    keys = args.keys or max(1, size // 1024)
    work = args.work or tempfile.mkdtemp(prefix="blobstate-hashcost-")
    os.makedirs(work, exist_ok=True)
    try:
        sample = os.path.join(work, "sample.bin")
        with open(sample, "wb") as fh:
            fh.write(os.urandom(min(size, 256 << 20)))
        report: dict[str, Any] = {"size_bytes": size, "keys": keys, "dir_files": args.dir_files, "runs": args.runs,
                                  "throughput_mb_s": throughput(sample, args.runs)}
        os.unlink(sample)

        def make_db(src: str) -> None:
            state.generate(src, size_bytes=size, keys=keys)

        def change_db(src: str) -> None:
            state.change(src, fraction=0.01, keys=keys, size_bytes=size, seed=7)

        per_file = max(1, size // args.dir_files)

        def make_dir(src: str) -> None:
            os.makedirs(src)
            for i in range(args.dir_files):
                with open(os.path.join(src, f"f{i:06d}.bin"), "wb") as fh:
                    fh.write(os.urandom(per_file))

        def change_dir(src: str) -> None:
            for i in range(0, args.dir_files, 100):
                with open(os.path.join(src, f"f{i:06d}.bin"), "r+b") as fh:
                    fh.write(os.urandom(64))

        report["rocksdb_incremental_1pct"] = incremental(make_db, change_db, "rocksdb", work, args.runs)
        report["dir_incremental_1pct"] = incremental(make_dir, change_dir, "dir", work, args.runs)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    emit(report, markdown(report), args.out)
    return 0


def markdown(report: dict[str, Any]) -> str:
    t = report["throughput_mb_s"]
    lines = [f"state {report['size_bytes'] / 2**20:.0f} MiB, medians of {report['runs']}", "",
             "| one pass over a file | MB/s |", "| --- | ---: |"]
    lines += [f"| {k} | {v:,.0f} |" for k, v in t.items()]
    lines += ["", "| incremental backup, 1% changed | CRC32C only (s) | CRC32C + XXH3-128 (s) | cost |",
              "| --- | ---: | ---: | ---: |"]
    for name, key in (("RocksDB", "rocksdb_incremental_1pct"),
                      (f"dir store, {report['dir_files']} files", "dir_incremental_1pct")):
        for what, pick in (("whole backup", lambda r, k: r[k]["wall_s"]),
                           ("its scan alone", lambda r, k: r["scan_s"][k])):
            off, on = pick(report[key], "crc32c only"), pick(report[key], "crc32c + xxh3-128")
            lines.append(f"| {name}: {what} | {off:.4f} | {on:.4f} | {1000 * (on - off):+.1f} ms "
                         f"({100 * (on - off) / off:+.1f}%) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
