"""A Spark driver that runs a small partitioned query to its end and shuts down cleanly, for the clean-shutdown test.

``python partitioned_shutdown_child.py BASE``: four small CSV files, one per micro-batch, through a partitioned state
(2 partitions, a partition snapshot after every batch: the listener is busy to the end), then ``query.stop()``,
``PartitionedState.close()`` and ``spark.stop()``, the order the README gives. Spark logs at WARN, so that any
ERROR (or a late snapshot job failing on the stopped SparkContext) reaches stderr. Prints ``CLOSED`` and
``STOPPED``, ``PLACED <n>`` (partition tasks that ran where the driver preferred) and ``EXACT <bool>`` (the state
read back, ``blobstate.spark.read_state``, against the input's highest value per key). With
``BLOBSTATE_SPARK_HELPER_JAR`` naming a damaged jar, the placement helper cannot load and the query runs without it.

A lagging listener bus (issue 30): a listener added before the state's holds the last batch's progress event until
``query.stop()`` returned, so the state's listener hears of that batch only after the query stopped. Prints
``LATE <n>``: the snapshot jobs asked for between ``query.stop()`` and ``close()`` (none may start then).
"""

from __future__ import annotations

import os
import sys


def main(base: str) -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    source = os.path.join(base, "input")
    os.makedirs(source, exist_ok=True)
    for day in range(4):
        with open(os.path.join(source, f"d{day}.csv"), "w", encoding="utf-8") as fh:
            fh.write("k,v\n" + "".join(f"k{j % 7},{day * 100 + j}\n" for j in range(50)))
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("clean-shutdown")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    import threading

    from pyspark.sql.streaming import StreamingQueryListener

    from blobstate.spark import partitioned

    stopped, terminated = threading.Event(), threading.Event()

    class Lagging(StreamingQueryListener):  # ahead of the state's listener on Spark's listener bus
        def onQueryStarted(self, event):  # noqa: ANN001, ANN202, N802
            pass

        def onQueryProgress(self, event):  # noqa: ANN001, ANN202, N802
            if event.progress.batchId == 3:
                stopped.wait(120)  # the last batch's progress reaches the next listener after query.stop()

        def onQueryIdle(self, event):  # noqa: ANN001, ANN202, N802
            pass

        def onQueryTerminated(self, event):  # noqa: ANN001, ANN202, N802
            terminated.set()  # every listener has had the last progress event

    spark.streams.addListener(Lagging())

    def update(db, rows, ctx):  # noqa: ANN001, ANN202
        for row in rows:  # the highest value per key (read-modify-write: the order within a batch is Spark's)
            key, old = row["k"].encode(), db.get(row["k"].encode())
            if old is None or int(old) < row["v"]:
                db.put(key, str(row["v"]).encode())

    state = partitioned(spark, repo=os.path.join(base, "repo"), checkpoint_location=os.path.join(base, "ck"),
                        job="j", store="s", num_partitions=2, key_cols=["k"], local_dir=os.path.join(base, "local"),
                        work_dir=os.path.join(base, "work"), snapshot_every=1)
    stream = (spark.readStream.schema("k string, v int").option("header", True).option("maxFilesPerTrigger", 1)
              .csv(source))
    query = state.start(stream.writeStream, update)
    query.processAllAvailable()
    state.snapshots.wait(120)
    query.stop()
    asked = len(state.snapshots.requested)
    stopped.set()
    terminated.wait(120)
    print("LATE", len(state.snapshots.requested) - asked, flush=True)
    placed = sum(s.partitions_placed for s in state.batch_stats)
    state.close()
    print("CLOSED", len(state.batch_stats), flush=True)
    print("PLACED", placed, flush=True)
    from blobstate.spark import read_state

    expected: dict[str, str] = {}
    for j in range(50):  # the last day holds each key's highest value
        expected[f"k{j % 7}"] = str(300 + j)
    got = {bytes(r["key"]).decode(): bytes(r["value"]).decode()
           for r in read_state(spark, repo=os.path.join(base, "repo"), job="j", store="s", key_type="binary",
                               value_type="binary").collect()}
    print("EXACT", got == expected, "" if got == expected else got, flush=True)
    spark.stop()
    print("STOPPED", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
