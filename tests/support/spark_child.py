"""A Spark driver process for the SIGKILL tests: the flights query with blobstate, killed where the test says.

``python spark_child.py CONFIG.json``. CONFIG: ``repo``, ``checkpoint``, ``state``, ``work``, ``input``,
``archive`` (the file source runs with ``cleanSource=archive`` into it), ``connect`` (a Spark Connect session
instead of a classic one), ``partitions`` and ``local`` (the partitioned state instead of the driver binding: N
partitions, the executors' local dir; ``partitionSnapshotEvery``, ``retain`` and ``ttl`` its options),
``snapshotEvery``, and ``kill``, comma-separated actions: ``fn:N``
(SIGKILL inside the user function of batch N, its writes staged), ``after-commit:N`` (SIGKILL at the start of
batch N+1's function, once ``commits/N`` exists), ``pause-snapshots:N`` (hold snapshots from batch N on: a lagging
listener). Kills by journal event come from the ``kill_plugin`` through the environment. Every kill is a SIGKILL
of this process group (Python and its Spark JVM). Prints ``not killed`` when the stream ends. With ``probe`` (a
path), what the binding (or the partitioned state) refuses in this process is written there as JSON
(``{what: error message}``).
"""

from __future__ import annotations

import json
import os
import signal
import sys


def kill_group() -> None:
    os.killpg(os.getpgid(0), signal.SIGKILL)


def session(connect: bool):  # noqa: ANN201
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    conf = {"spark.master": "local[2]", "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
            "spark.driver.host": "127.0.0.1"}
    if connect:
        return connect_session(conf)
    builder = SparkSession.builder
    for name, value in conf.items():
        builder = builder.config(name, value)
    return builder.getOrCreate()


def connect_session(conf: dict):  # noqa: ANN201
    """A Spark Connect client of a server started in this process's own JVM (as ``remote("local[2]")`` does, so a
    SIGKILL of this process group takes the server, its JVM and its Python workers with it), listening on loopback
    on a port the server itself binds (port 0: the kernel's choice, at bind time) and dialled at the port it
    reports once bound (``SparkConnectService.localPort``). ``remote("local[...]")`` always binds 15002, and two
    test workers would race for it; a port picked free beforehand races too: when something took it meanwhile,
    Spark's ``startServiceOnPort`` binds the next one up without a word and the client dials the old one, maybe
    another child's server (issue 43 item 10: a child exited 1 with a Connect server error before its kill point)."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(f"sc://localhost:{start_server(conf)}").getOrCreate()


def start_server(conf: dict) -> int:
    """Start a Spark Connect server in this process's JVM (``conf`` plus the plugin, loopback, port 0) and return
    the port it bound. Its token: ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` when set, else a new one put there (read by
    the server's JVM and by a client of this process)."""
    import uuid

    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_CONNECT_AUTHENTICATE_TOKEN", str(uuid.uuid4()))
    server = {**conf, "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
              "spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": "0",
              "spark.connect.grpc.port.maxRetries": "0",
              "spark.sql.artifact.isolation.enabled": "true",
              "spark.sql.artifact.isolation.alwaysApplyClassloader": "true"}
    sc = SparkContext.getOrCreate(SparkConf().setAll(list(server.items())))
    SparkSession(sc)
    return bound_port(sc)


def bound_port(sc) -> int:  # noqa: ANN001
    """The port the Connect server of ``sc``'s JVM listens on: the plugin starts it, bound, while the context is
    created (``SparkConnectService.start``), so it is known once ``sc`` exists; a server that is not started is an
    error here, not a client dialling nothing."""
    service = getattr(sc._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$").__getattr__("MODULE$")
    if not service.started():
        raise RuntimeError("the Spark Connect plugin did not start its server")
    return int(service.localPort())


def probe(binding, path: str) -> None:  # noqa: ANN001
    """What ``binding`` (a ``StateBinding`` or a ``PartitionedState``) refuses in this process."""
    from blobstate.errors import ConfigurationError

    refused = {}
    calls = {"batch_stats": lambda: binding.batch_stats}
    if hasattr(binding, "wait_snapshot"):
        calls.update(db=lambda: binding.db, wait_snapshot=lambda: binding.wait_snapshot(0, 1),
                     pause_snapshots=binding.pause_snapshots)
    for what, call in calls.items():
        try:
            call()
        except ConfigurationError as exc:
            refused[what] = str(exc)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(refused, fh)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    from blobstate.model.records import StoreKey
    from blobstate.spark import register
    from blobstate.spark.demo.flights import flights_schema, update_state

    spark = session(bool(cfg.get("connect")))
    if cfg.get("partitions"):
        run_partitioned(spark, cfg)
        return
    binding = register(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], state_dir=cfg["state"],
                       work_dir=cfg["work"], key=StoreKey("flights", "0", "stats"),
                       snapshot_every=cfg.get("snapshotEvery", 1))
    if cfg.get("probe"):
        probe(binding, cfg["probe"])
    actions = {a.split(":")[0]: int(a.split(":")[1]) for a in (cfg.get("kill") or "").split(",") if a}
    commits = os.path.join(cfg["checkpoint"], "commits")
    # Under Connect ``update`` is pickled to the server's worker: it must not hold the binding (a live session).
    pause = binding.pause_snapshots if "pause-snapshots" in actions else None

    def update(df, batch_id, state):  # noqa: ANN001, ANN202
        if batch_id == actions.get("after-commit", -2) + 1:
            assert os.path.exists(os.path.join(commits, str(batch_id - 1)))
            kill_group()
        if batch_id == actions.get("pause-snapshots"):
            pause()  # classic only: the scheduler lives in this process
        update_state(df, batch_id, state)
        if batch_id == actions.get("fn"):
            kill_group()

    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .option("cleanSource", "archive").option("sourceArchiveDir", cfg["archive"]).csv(cfg["input"]))
    query = binding.start(stream.writeStream, update)
    query.processAllAvailable()
    binding.close()
    print("not killed", flush=True)


def run_partitioned(spark, cfg) -> None:  # noqa: ANN001
    """The flights query on a partitioned state (``partitions`` N, executors' ``local`` dir); kills by journal
    event only."""
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, update_routes

    ps = partitioned(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], job="flights",
                     store="routes", num_partitions=cfg["partitions"], key_cols=ROUTE_COLS, local_dir=cfg["local"],
                     work_dir=cfg["work"], snapshot_every=cfg.get("partitionSnapshotEvery", 0),
                     retain=cfg.get("retain", 3), ttl=cfg.get("ttl", "1d"))
    if cfg.get("probe"):
        probe(ps, cfg["probe"])
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .option("cleanSource", "archive").option("sourceArchiveDir", cfg["archive"]).csv(cfg["input"]))
    ps.start(stream.writeStream, update_routes).processAllAvailable()
    ps.close()
    print("not killed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
