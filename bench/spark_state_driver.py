"""The Spark driver of ``bench/spark_state.py``: one stateful aggregation query, native state store or blobstate.

``python -m bench.spark_state_driver CONFIG.json``. CONFIG: ``mode`` (``native``: Spark's own
``RocksDBStateStoreProvider`` with changelog checkpointing, ``groupBy(k).agg(count, sum(v))`` in update mode into
the ``noop`` sink; ``blobstate``: ``blobstate.spark.partitioned`` with the same fold in Python, one RocksDB key per
``k``), ``partitions`` (N: Spark's shuffle partitions for both), ``conf`` (the session's Spark conf), ``executors``
(wait for that many), ``input`` (Parquet files, one per batch), ``checkpoint``, ``repo``, ``local`` (blobstate's
local dir), ``work``, ``progress`` (a JSON-lines file: one line per completed batch, with the wall clock),
``stopAfter`` (stop once that many batches completed in this run; 0: when the input is drained). A blobstate line
also carries the batch's ``GroupBatchStats``.

Prints ``READY`` when the executors registered and ``DONE`` after a clean stop (``query.stop()``, ``ps.close()``).
The parent SIGKILLs the process group to measure a restart.
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


def session(cfg: dict[str, Any]) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"blobstate-bench-{cfg['mode']}")
    conf = {**cfg["conf"], "spark.sql.shuffle.partitions": str(cfg["partitions"]),
            **(NATIVE_CONF if cfg["mode"] == "native" else {})}
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
    """Writes one JSON line per completed batch of the run (a ``StreamingQueryListener`` on the driver)."""

    def __init__(self, path: str) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.path, self.count, self.done = path, 0, threading.Condition()
        self.ps: Any = None  # blobstate: each line also carries the batch's GroupBatchStats
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryProgress(self, event: Any) -> None:  # noqa: N802
                p = event.progress
                if p.numInputRows == 0:
                    return
                line = {"t": time.time(), "batch": p.batchId, "rows": p.numInputRows,
                        "trigger_ms": p.durationMs.get("triggerExecution"), "add_ms": p.durationMs.get("addBatch"),
                        "state_rows": sum(o.numRowsTotal for o in p.stateOperators)}
                if outer.ps is not None:
                    import dataclasses

                    stats = next((s for s in reversed(outer.ps.stats) if s.batch_id == p.batchId), None)
                    line["blobstate"] = dataclasses.asdict(stats) if stats else None
                with open(outer.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")
                with outer.done:
                    outer.count += 1
                    outer.done.notify_all()

            def onQueryIdle(self, event: Any) -> None:  # noqa: N802
                pass

            def onQueryTerminated(self, event: Any) -> None:  # noqa: N802
                pass

        self.listener = Listener()

    def wait_for(self, count: int, query: Any, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self.done:
            while self.count < count and query.isActive and time.monotonic() < deadline:
                self.done.wait(1)


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    t0 = time.time()
    spark = session(cfg)
    print("READY", flush=True)
    progress = Progress(cfg["progress"])
    spark.streams.addListener(progress.listener)
    stream = spark.readStream.schema("k long, v long").option("maxFilesPerTrigger", 1).parquet(cfg["input"])
    ps = None
    if cfg["mode"] == "native":
        from pyspark.sql import functions as F

        agg = stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("s"))
        query = (agg.writeStream.outputMode("update").format("noop").option("checkpointLocation", cfg["checkpoint"])
                 .start())
    else:
        from blobstate.spark import partitioned

        ps = partitioned(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], job="bench",
                         store="agg", num_partitions=cfg["partitions"], key_cols=["k"], local_dir=cfg["local"],
                         work_dir=cfg["work"], snapshot_every=cfg.get("snapshotEvery", 10))
        progress.ps = ps
        query = ps.start(stream.writeStream, fold)
    print(f"STARTED {time.time() - t0:.3f}", flush=True)
    if cfg.get("stopAfter"):
        progress.wait_for(cfg["stopAfter"], query, 3600)
    else:
        query.processAllAvailable()
    query.stop()
    if ps is not None:
        ps.close()

    spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
