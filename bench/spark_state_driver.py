"""The Spark driver of ``bench/spark_state.py``: the stateful aggregation, native state store and blobstate, paired.

``python -m bench.spark_state_driver CONFIG.json``. CONFIG: ``modes`` (one or more of ``native``: Spark's own
``RocksDBStateStoreProvider`` with changelog checkpointing, ``groupBy(k).agg(count, sum(v))`` in update mode into
the ``noop`` sink; ``blobstate``: ``blobstate.spark.partitioned`` with the same fold in Python, one RocksDB key per
``k``), ``partitions`` (N: Spark's shuffle partitions, for both), ``conf`` (the session's Spark conf),
``executors`` (wait for that many), ``dirs`` (per mode: ``input``, ``checkpoint``, and for blobstate ``repo``,
``local``, ``work``), ``progress`` (a JSON-lines file: one line per completed batch and mode, with the wall clock and,
for blobstate, its ``GroupBatchStats``), ``feed`` (input files: the driver hard-links file ``i`` into each mode's
input, one mode at a time, and waits for that mode's batch before the next: the queries alternate, ABBA, so both see
the same machine load batch by batch; a native batch also waits for blobstate's background snapshot job, which would
otherwise take its cores), or ``stopAfter`` (no feeding: run until that many batches completed, the input already
there); ``hold``: once done, print ``FED`` and wait to be SIGKILLed instead of stopping.

Both queries run in one SparkSession (one driver JVM, the same executors). Prints ``READY`` when the executors
registered and ``DONE`` after a clean stop. The parent SIGKILLs the process group to measure a restart.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NATIVE_CONF = {
    "spark.sql.streaming.stateStore.providerClass":
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
BATCH_TIMEOUT_S = 1800


def fold(db: Any, rows: Any, ctx: Any) -> None:
    """blobstate's side of the aggregation: per key ``k`` (int), ``(count, sum(v))`` as 16 bytes."""
    get, put, pack, unpack = db.get, db.put, struct.pack, struct.unpack
    for row in rows:
        k, v = row[0], row[1]
        old = get(k)
        if old is None:
            put(k, pack("<qq", 1, v))
        else:
            n, s = unpack("<qq", old)
            put(k, pack("<qq", n + 1, s + v))


def fold_arrow(db: Any, batches: Any, ctx: Any) -> None:
    """``fold`` over the task's Arrow record batches (``blobstate.spark.arrow_input``): each batch aggregated by key
    (``pyarrow``'s ``group_by``), the keys' values read in one ``get_many`` and written in one ``put_many``."""
    import pyarrow as pa

    pack, unpack = struct.pack, struct.unpack
    for batch in batches:
        key, value = batch.schema.names[:2]
        sums = pa.Table.from_batches([batch]).group_by(key).aggregate([(value, "count"), (value, "sum")])
        keys = sums.column(key).to_pylist()
        olds = db.get_many(keys)
        out = []
        counts, totals = sums.column(f"{value}_count").to_pylist(), sums.column(f"{value}_sum").to_pylist()
        for k, n, s, old in zip(keys, counts, totals, olds, strict=True):
            if old is not None:
                n0, s0 = unpack("<qq", old)
                n, s = n + n0, s + s0
            out.append((k, pack("<qq", n, s)))
        db.put_many(out)


fold_arrow.__blobstate_arrow_input__ = True  # type: ignore[attr-defined]  # blobstate.spark.arrow_input's mark


def session(cfg: dict[str, Any]) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("blobstate-bench-state")
    conf = {**cfg["conf"], "spark.sql.shuffle.partitions": str(cfg["partitions"]), **NATIVE_CONF}
    for name, value in conf.items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    deadline = time.monotonic() + 300
    while spark.sparkContext._jsc.sc().getExecutorIds().size() < cfg.get("executors", 0):
        if time.monotonic() > deadline:
            raise TimeoutError("executors did not register")
        time.sleep(0.1)  # polling the registration, bounded
    return spark


class Progress:
    """One JSON line per completed batch (a ``StreamingQueryListener`` on the driver); counts batches per query."""

    def __init__(self, path: str) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.path, self.done = path, threading.Condition()
        self.counts: dict[str, int] = {}
        self.names: dict[str, str] = {}  # query id -> mode
        self.ps: Any = None
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                outer.record(event.progress)

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                pass

        self.listener = Listener()

    def record(self, p: Any) -> None:
        if p.numInputRows == 0:
            return
        mode = p.name
        line = {"t": time.time(), "mode": mode, "batch": p.batchId, "rows": p.numInputRows,
                "trigger_ms": p.durationMs.get("triggerExecution"), "add_ms": p.durationMs.get("addBatch")}
        if mode == "blobstate" and self.ps is not None:
            import dataclasses

            stats = next((s for s in reversed(self.ps.stats) if s.batch_id == p.batchId), None)
            line["blobstate"] = dataclasses.asdict(stats) if stats else None
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
        with self.done:
            self.counts[mode] = self.counts.get(mode, 0) + 1
            self.done.notify_all()

    def wait_for(self, mode: str, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self.done:
            while self.counts.get(mode, 0) < count:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{mode}: batch {count} did not complete")
                self.done.wait(1)


def start(spark: Any, mode: str, cfg: dict[str, Any], progress: Progress) -> tuple[Any, Any]:
    """Start ``mode``'s query; returns (query, PartitionedState or None)."""
    d = cfg["dirs"][mode]
    stream = spark.readStream.schema("k long, v long").option("maxFilesPerTrigger", 1).parquet(d["input"])
    if mode == "native":
        from pyspark.sql import functions as F

        agg = stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
        query = (agg.writeStream.queryName(mode).outputMode("update").format("noop")
                 .option("checkpointLocation", d["checkpoint"]).start())
        return query, None
    from blobstate.spark import partitioned

    ps = partitioned(spark, repo=d["repo"], checkpoint_location=d["checkpoint"], job="bench", store="agg",
                     num_partitions=cfg["partitions"], key_cols=["k"], local_dir=d["local"], work_dir=d["work"],
                     snapshot_every=cfg.get("snapshotEvery", 10))
    progress.ps = ps
    return ps.start(stream.writeStream, fold, query_name=mode), ps


def feed(cfg: dict[str, Any], progress: Progress, ps: Any) -> None:
    """Hard-link each input file into every mode's input in turn (ABBA), waiting for each mode's batch."""
    modes = cfg["modes"]
    for i, path in enumerate(cfg["feed"]):
        for mode in modes if i % 2 == 0 else list(reversed(modes)):
            if mode == "native" and ps is not None:
                ps.snapshots.wait(BATCH_TIMEOUT_S)  # blobstate's background snapshot would take native's cores
            target = os.path.join(cfg["dirs"][mode]["input"], os.path.basename(path))
            os.link(path, target)
            os.utime(target, (1_600_000_000 + i, 1_600_000_000 + i))
            progress.wait_for(mode, progress.counts.get(mode, 0) + 1, BATCH_TIMEOUT_S)


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    spark = session(cfg)
    print("READY", flush=True)
    progress = Progress(cfg["progress"])
    spark.streams.addListener(progress.listener)
    queries, ps = [], None
    for mode in cfg["modes"]:
        query, state = start(spark, mode, cfg, progress)
        queries.append(query)
        ps = state or ps
    if cfg.get("feed"):
        feed(cfg, progress, ps)
    else:
        for mode in cfg["modes"]:
            progress.wait_for(mode, cfg.get("stopAfter", 1), BATCH_TIMEOUT_S)
    if cfg.get("hold"):  # the parent SIGKILLs this process group now: a crash between batches
        print("FED", flush=True)
        threading.Event().wait()
    for query in queries:
        query.stop()
    if ps is not None:
        ps.close()
    spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
