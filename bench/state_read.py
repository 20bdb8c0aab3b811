"""Reading a partitioned state as a Spark DataFrame (``blobstate.spark.read_state``) against restoring it with
``blobstate restore`` and scanning the restored RocksDBs locally, the way a user did it before issue 32.

``python -m bench.state_read [--size 1GiB] [--keys N] [--partitions 4] [--master local[2]] [--runs 3] [--work DIR]
[--out FILE] [--warm]``

Untimed: ``--keys`` entries (``str`` keys ``key<12 digits>``, ``str`` values of random base64 text, ``--size``
bytes in total) are written as the partitioned binding writes them (rocksdict's default mode, key ``i`` in
partition ``i % N``) and committed as one group checkpoint of N snapshots into a ``file://`` repository. A local
Spark session is started once and one untimed read warms it up (Spark's Python workers start, import pyarrow and
blobstate); both are reported, not counted. Timed, medians of ``--runs``, the page
cache dropped before each operation when this user may (else warm, and the report says so):

- **read_state count**: ``read_state(spark, ...).count()``: one Spark task per partition restores its chain into
  its scratch directory and streams the entries out as Arrow batches; Spark counts them;
- **read_state full scan**: the same DataFrame, ``count(key), sum(octet_length(value))``: every key and value
  through Spark's rows (``octet_length``, the stored size, as the local scan's ``len``: ``length`` would add a
  character count of every value in the JVM, about 10 s per GiB on this machine, which the local scan does not do);
- **restore + local scan**: ``blobstate restore DIR --task group --partition P`` for each partition, one after the
  other (fresh CLI processes, as a shell loop runs them), then every restored RocksDB opened read-only with
  rocksdict in this process and every entry read (count and total value length, ``len`` of each ASCII value):
  what reading the state took before ``read_state`` existed.

Both sides must agree on the number of entries and the total value length (checked). The target (issue 32): the
DataFrame's full scan is not slower than the restore plus the local scan.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):  # ``python bench/state_read.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.measure import can_drop_caches, drop_caches  # noqa: E402
from bench.report import emit  # noqa: E402
from bench.run import parse_size  # noqa: E402

JOB, TASK, STORE = "bench", "group", "routes"


def write_group(repo_url: str, work: str, *, size_bytes: int, keys: int, partitions: int) -> tuple[int, int]:
    """The partitions, written and committed as one group of snapshots; returns (entries, total value length)."""
    from rocksdict import Rdict, WriteBatch

    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model.layout import DEFAULT_TTL_MS
    from blobstate.model.records import StoreKey
    from blobstate.repository.backends import open_local_store
    from blobstate.repository.repo import Repository
    from blobstate.worker import stage_snapshot

    raw_len = max(12, (size_bytes // max(1, keys) - 15) * 3 // 4)  # base64 grows by 4/3
    total = 0
    dbs = [Rdict(os.path.join(work, f"p{p}")) for p in range(partitions)]
    try:
        for start in range(0, keys, 10_000):
            batches = [WriteBatch() for _ in dbs]
            for i in range(start, min(keys, start + 10_000)):
                value = base64.b64encode(os.urandom(raw_len)).decode()
                total += len(value)
                batches[i % partitions].put(f"key{i:012d}", value)
            for db, batch in zip(dbs, batches, strict=True):
                db.write(batch)
        repo = Repository.open(repo_url, create=True)
        key, staged = StoreKey(JOB, TASK, STORE), []
        try:
            for p, db in enumerate(dbs):
                db.flush(True)
                target = os.path.join(work, f"checkpoint-p{p}")
                open_local_store("rocksdb").create_checkpoint(db, target)
                staged.append(stage_snapshot(repo, key, partition=p, batch_id=0, checkpoint_dir=target,
                                             previous=None, ttl_ms=DEFAULT_TTL_MS))
            with StoreCommitter(key, repo, work_dir=os.path.join(work, "w-group")) as committer:
                GroupCommitter(committer, num_partitions=partitions).commit(
                    [s.entry for s in staged], batch_id=0, new_blob_ids=[b for s in staged for b in s.new_blob_ids])
        finally:
            repo.close()
    finally:
        for db in dbs:
            db.close()
    return keys, total


def spark_session(master: str) -> Any:
    """A local session (an existing one is reused) of ``master``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName("blobstate-bench-state-read")
            .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())


def read_with_spark(spark: Any, repo_url: str, scratch: str, *, scan: bool) -> tuple[float, tuple[int, int]]:
    """Seconds of one ``read_state`` action (``count()``, or the full scan) and its (entries, value length)."""
    from blobstate.spark import read_state

    t0 = time.perf_counter()
    df = read_state(spark, repo=repo_url, job=JOB, task=TASK, store=STORE, local_dir=scratch)
    if scan:
        row = df.selectExpr("count(key) AS n", "sum(octet_length(value)) AS total").collect()[0]
        found = (int(row["n"]), int(row["total"] or 0))
    else:
        found = (df.count(), -1)
    return time.perf_counter() - t0, found


def restore_and_scan(repo_url: str, dest: str, partitions: int, work_base: str) -> tuple[float, tuple[int, int]]:
    """Seconds of N ``blobstate restore --partition P`` runs and a local scan of what they restored."""
    from blobstate.restoring.entries import open_entries

    t0 = time.perf_counter()
    for p in range(partitions):
        subprocess.run([sys.executable, "-m", "blobstate.cli", "restore", os.path.join(dest, f"p{p}"), "--repo",
                        repo_url, "--job", JOB, "--task", TASK, "--store", STORE, "--partition", str(p), "-q",
                        "--no-cleanup", "--work-dir", work_base], check=True, capture_output=True)
    entries = length = 0
    for p in range(partitions):
        with open_entries(os.path.join(dest, f"p{p}")) as items:
            for _, value in items:
                entries += 1
                length += len(value)
    return time.perf_counter() - t0, (entries, length)


def main(argv: list[str] | None = None, *, spark: Any = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.state_read", description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--keys", type=int, default=None, help="default: one key per KiB")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("--warm", action="store_true", help="never drop the page cache (the suite's smoke run)")
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    keys = args.keys or max(1000, size // 1024)
    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-state-read-")
    os.makedirs(work, exist_ok=True)
    repo_url = "file://" + os.path.join(work, "repo")
    expected = write_group(repo_url, work, size_bytes=size, keys=keys, partitions=args.partitions)
    t0 = time.perf_counter()
    spark = spark or spark_session(args.master)
    startup = time.perf_counter() - t0
    first, _ = read_with_spark(spark, repo_url, os.path.join(work, "warm-up"), scan=False)  # Python workers start
    cold, why = (False, "--warm") if args.warm else can_drop_caches()
    results: dict[str, list[float]] = {"read_state count": [], "read_state full scan": [],
                                       "restore + local scan": []}
    for run in range(args.runs):
        for name in results:
            if cold:
                drop_caches()
            scratch = os.path.join(work, f"r{run}")
            os.makedirs(scratch, exist_ok=True)
            if name == "restore + local scan":
                seconds, found = restore_and_scan(repo_url, scratch, args.partitions, os.path.join(work, "cli"))
            else:
                seconds, found = read_with_spark(spark, repo_url, scratch, scan=name.endswith("scan"))
            assert found[0] == expected[0] and found[1] in (-1, expected[1]), (name, found, expected)
            results[name].append(seconds)
            shutil.rmtree(scratch, ignore_errors=True)
    medians = {name: round(statistics.median(v), 3) for name, v in results.items()}
    report = {"size_bytes": size, "keys": keys, "partitions": args.partitions, "master": args.master,
              "runs": args.runs, "cpus": os.cpu_count(), "cache": "cold" if cold else f"warm ({why})",
              "spark_startup_s": round(startup, 3), "first_action_s": round(first, 3), "seconds": medians,
              "samples": {name: [round(s, 3) for s in v] for name, v in results.items()},
              "load_average": os.getloadavg()}
    baseline = medians["restore + local scan"]
    report["scan_vs_restore"] = round(baseline / medians["read_state full scan"], 2)  # > 1: the read is faster
    emit(report, f"{size / 2**20:.0f} MiB in {args.partitions} partitions, {keys} entries: read_state count "
          f"{medians['read_state count']:.2f} s, full scan {medians['read_state full scan']:.2f} s; restore + local "
          f"scan {baseline:.2f} s (x{report['scan_vs_restore']}); Spark start-up {startup:.1f} s, first read "
          f"{first:.1f} s, cache {report['cache']}", args.out)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
