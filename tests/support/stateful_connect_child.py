"""A Spark Connect client running one of ``tests/processors``' processors through
``blobstate.spark.transform_with_state``: ``python stateful_connect_child.py CONFIG.json``.

CONFIG: ``port`` (a running server's, ``connect_server.py``; None: a server in this process's own JVM, so that a
SIGKILL of this process group takes client, server and its Python workers), ``name`` (a case of
``tests.processors.test_against_spark.CASES``), ``source`` (one Parquet file per batch), ``checkpoint``, ``repo``,
``out`` (the sink, pickled to the server's Python worker, writes batch N's rows to ``out/N.json``: an overwrite by
batch id), ``partitions`` (None: the driver's store), ``state_dir``, ``local``, ``last_file`` (the query stops once a
committed batch read it), ``initial`` (rows ``[k, count]``: the running count from that initial state, which
``transform_with_state`` refuses under Connect). Kills come from the ``kill_plugin`` in the server's worker (through
the environment). Prints ``not killed`` when the stream ends.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def session(port: int | None):  # noqa: ANN201
    from connect_server import CONF
    from spark_child import connect_session

    if port is None:
        return connect_session(CONF)
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(f"sc://localhost:{port}").getOrCreate()


def sink_to(out: str):  # noqa: ANN201
    def sink(df, batch_id):  # noqa: ANN001, ANN202 - runs in the server's Python worker
        rows = [r.asDict() for r in df.collect()]
        tmp = os.path.join(out, f".{batch_id}.tmp")
        with open(tmp, "w") as fh:
            json.dump(rows, fh)
        os.replace(tmp, os.path.join(out, f"{batch_id}.json"))
    return sink


def main(config: dict) -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = session(config.get("port"))
    assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)

    from stateful_child import run_until_read

    from blobstate.spark import transform_with_state
    from tests.processors.test_against_spark import CASES, input_stream

    make, _, keys, output, time_mode, watermark, _ = CASES[config["name"]]
    initial = {}
    if config.get("initial"):  # the running count started from an initial state: rows of (k, count)
        from tests.processors.running_count import RunningCountFrom

        make = RunningCountFrom
        initial = {"initial_state": spark.createDataFrame([tuple(r) for r in config["initial"]],
                                                          "k string, count long")}
    os.makedirs(config["out"], exist_ok=True)
    query = transform_with_state(
        input_stream(spark, Path(config["source"])), make(), key_cols=keys, **initial, output_schema=output,
        time_mode=time_mode, sink=sink_to(config["out"]), repo=config["repo"],
        checkpoint_location=config["checkpoint"], job="tws", store=config["name"],
        num_partitions=config["partitions"], state_dir=config["state_dir"], local_dir=config["local"],
        event_time_column=watermark[0] if watermark else None, watermark_delay_ms=config.get("watermark_ms", 0))
    run_until_read(query, config)
    print("not killed", flush=True)


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        main(json.load(fh))
