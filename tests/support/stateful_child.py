"""A Spark driver process running the sessions processor (``tests/processors/sessions.py``: event-time timers)
through ``blobstate.spark.transform_with_state``, for the SIGKILL tests.

``python stateful_child.py CONFIG.json``. CONFIG: ``source`` (one Parquet file per batch), ``checkpoint``,
``repo``, ``out`` (the sink writes batch N's rows to ``out/N.json``: an overwrite by batch id, so idempotent),
``partitions`` (None: the driver's store), ``state_dir``, ``local``, ``last_file`` (the query stops once a committed
batch read it). Kills come from the ``kill_plugin`` (a journal event, through the environment): a SIGKILL of this
process group (Python and its Spark JVM). Prints ``not killed`` when the stream ends.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main(config: dict) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from blobstate.spark import transform_with_state
    from tests.processors import sessions
    from tests.processors.test_against_spark import input_stream

    spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out = config["out"]
    os.makedirs(out, exist_ok=True)

    def sink(df, batch_id):  # noqa: ANN001, ANN202
        rows = [r.asDict() for r in df.collect()]
        tmp = os.path.join(out, f".{batch_id}.tmp")
        with open(tmp, "w") as fh:
            json.dump(rows, fh)
        os.replace(tmp, os.path.join(out, f"{batch_id}.json"))

    from pathlib import Path

    query = transform_with_state(
        input_stream(spark, Path(config["source"])), sessions.Sessions(), key_cols=["user"],
        output_schema=sessions.OUTPUT, time_mode="EventTime", sink=sink, repo=config["repo"],
        checkpoint_location=config["checkpoint"], job="tws", store="sessions", num_partitions=config["partitions"],
        state_dir=config["state_dir"], local_dir=config["local"], event_time_column="ts",
        watermark_delay_ms=sessions.WATERMARK_DELAY_MS)
    try:
        run_until_read(query, config)
    finally:
        spark.stop()
    print("not killed", time.time())


def run_until_read(query, config: dict) -> None:  # noqa: ANN001
    """Wait until a committed batch of ``query`` (a ``StatefulQuery``) read ``config["last_file"]`` (its checkpoint
    files, never a sleep), then close it; exits naming the error when the query died first."""
    from tests.processors.test_against_spark import read_everything

    try:
        while not read_everything(config["checkpoint"], config["last_file"]):
            if not query.isActive:
                raise SystemExit(f"the query died: {query.exception()}")
            query.awaitTermination(1)  # returns at once when the query dies
    finally:
        query.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        main(json.load(fh))
