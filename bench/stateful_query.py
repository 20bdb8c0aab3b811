"""A stateful processor's query end to end (issue 41): the running count (``tests/processors/running_count.py``)
through ``blobstate.spark.transform_with_state`` on the driver's store and on N partitions, and through Spark's own
``transformWithStateInPandas`` (RocksDB provider, changelog checkpointing), over the same input files.

``python -m bench.stateful_query [--keys 20000] [--rows 5000] [--batches 20] [--partitions 4] [--out FILE]``

Each batch reads one Parquet file of ``--rows`` rows over ``--keys`` keys (seeded). Reported per run: each batch's
``triggerExecution`` time from Spark's progress (ms: the whole micro-batch, state commit and sink included),
p50/p99 over the batches after the first (the first loads the state), and the whole run's wall time. The runs go
one after another in one ``local[2]`` session (not interleaved batch by batch: each is its own query), so a busy
machine shows in all of them; run it on an idle one.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ROCKSDB = {"spark.sql.streaming.stateStore.providerClass":
           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
           "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
           "spark.sql.streaming.fileSource.log.compactInterval": "1000",
           "spark.sql.session.timeZone": "UTC"}


def session(conf: dict[str, str] | None = None) -> Any:
    """A ``local[2]`` session with Spark's RocksDB provider, changelog checkpointing and ``conf`` on top."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                                os.environ.get("PYTHONPATH", "")])
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("blobstate-bench-stateful")
    for k, v in {**ROCKSDB, "spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
                 "spark.driver.host": "127.0.0.1", **(conf or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def frames(keys: int, rows: int, batches: int) -> list[Any]:
    import pandas as pd

    rng = random.Random(41)
    return [pd.DataFrame({"k": [f"k{rng.randrange(keys)}" for _ in range(rows)], "v": list(range(rows))})
            for _ in range(batches)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, -(-len(ordered) * q // 100) - 1)] if ordered else 0.0


def one_run(spark: Any, what: str, source: Any, work: str, last_file: int, partitions: int) -> dict[str, Any]:
    """One query over ``source`` (``what``: ``spark``, ``driver``, ``partitioned``) until it read every file."""
    from blobstate.spark import transform_with_state
    from tests.processors import running_count
    from tests.processors.test_against_spark import committed_batches, input_stream, read_everything

    checkpoint = os.path.join(work, what, "checkpoint")
    stream = input_stream(spark, source)
    sink_rows = []

    def sink(df: Any, batch_id: int) -> None:
        sink_rows.append(df.count())

    t0 = time.perf_counter()
    if what == "spark":
        query = (stream.groupBy("k").transformWithStateInPandas(
            running_count.RunningCount(), outputStructType=running_count.OUTPUT, outputMode="Update",
            timeMode="None").writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).start())
    else:
        query = transform_with_state(
            stream, running_count.RunningCount(), key_cols=["k"], output_schema=running_count.OUTPUT, sink=sink,
            repo=f"file://{work}/{what}/repo", checkpoint_location=checkpoint, job="bench", store="counts",
            num_partitions=partitions if what == "partitioned" else None, state_dir=f"{work}/{what}/state",
            local_dir=f"{work}/{what}/local")
    try:
        while not read_everything(checkpoint, last_file):
            if not query.isActive:
                raise SystemExit(f"{what}: the query died: {query.exception()}")
            query.awaitTermination(1)
        # Spark reports a batch's progress after it wrote the batch's commit file: wait for the last one's report.
        last_batch = max(committed_batches(checkpoint))
        deadline = time.monotonic() + 60
        while not any(p["batchId"] >= last_batch for p in query.recentProgress) and time.monotonic() < deadline:
            query.awaitTermination(0.2)
        progress = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        (query.close if what != "spark" else query.stop)()
    steady = progress[1:] or progress
    return {"batches": len(progress), "batch_ms": progress, "p50_ms": percentile(steady, 50),
            "p99_ms": percentile(steady, 99), "wall_s": round(time.perf_counter() - t0, 2),
            "rows_out": sum(sink_rows)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", default="spark,driver,partitioned")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from tests.processors.test_against_spark import write_inputs

    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-stateful-")
    os.makedirs(work, exist_ok=True)
    from pathlib import Path

    source = write_inputs(Path(work) / "in", frames(args.keys, args.rows, args.batches))
    from pyspark.sql import SparkSession

    # a session already running in this process (the suite's) is the caller's: getOrCreate returns it, and it stays up
    own = SparkSession.getActiveSession() is None and getattr(SparkSession, "_instantiatedSession", None) is None
    spark = session()
    try:
        report = {"keys": args.keys, "rows": args.rows, "batches": args.batches, "partitions": args.partitions,
                  "runs": {what: one_run(spark, what, source, work, args.batches - 1, args.partitions)
                           for what in args.runs.split(",")}}
    finally:
        if own:
            spark.stop()
    from bench.report import emit

    emit(report, "\n".join(f"{what:12s} p50 {run['p50_ms']:8.0f} ms  p99 {run['p99_ms']:8.0f} ms  wall "
                           f"{run['wall_s']:7.1f} s  rows out {run['rows_out']}"
                           for what, run in report["runs"].items()), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
