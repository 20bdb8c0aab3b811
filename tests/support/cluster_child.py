"""A Spark driver on the namespace cluster (``spark_cluster.py``): the flights stream through a partitioned state.

``python cluster_child.py CONFIG.json``. CONFIG: ``conf`` (the driver's Spark conf: ``SparkCluster.driver_conf``),
``executors`` (wait for that many), ``repo``, ``checkpoint``, ``local`` (the workers' local dir), ``work``,
``input`` (day files), ``partitions``, ``snapshotEvery``, ``out`` (the result JSON), optionally ``standby`` (0 or 1),
``batches`` (run until that many batches committed: the test adds day files as it goes; default: what the input
holds) and ``processor`` (the running count processor of ``tests/processors`` per route through
``transform_with_state`` instead of the flights update; the executors import ``tests`` from
``spark.executorEnv.PYTHONPATH``). Prints ``READY`` once the executors registered, ``BATCH <b> <executor of each
partition's part>`` as batches commit (the test kills a worker from there) and, with standbys, ``WARM <batch each
partition's standby is at, -2: none>`` as the warm jobs report; runs the stream to its end, waits for the last
snapshot and warm jobs, stops the query, closes the state (in the order the README gives) and writes ``out``: every
``GroupBatchStats``, the snapshot requests and every skipped snapshot task (partition, batch, reason, executor), the
executors alive at the end, and the warm tasks' answers.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
import time


def main(path: str) -> int:
    with open(path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    from spark_cluster import driver_session

    spark = driver_session(cfg, "blobstate-cluster-test")
    print("READY", flush=True)
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, update_routes

    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(cfg["input"]))
    if cfg.get("processor"):  # the running count per route through transform_with_state (its own Spark job)
        from blobstate.spark import transform_with_state
        from tests.processors.running_count import OUTPUT, RunningCount

        query = transform_with_state(
            stream, RunningCount(), key_cols=ROUTE_COLS, output_schema=OUTPUT, sink=lambda df, batch_id: None,
            repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], job="flights", store="routes",
            num_partitions=cfg["partitions"], local_dir=cfg["local"], work_dir=cfg["work"],
            snapshot_every=cfg["snapshotEvery"], standby=cfg.get("standby", 0))
        ps = query.state
    else:
        ps = partitioned(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], job="flights",
                         store="routes", num_partitions=cfg["partitions"], key_cols=ROUTE_COLS,
                         local_dir=cfg["local"], work_dir=cfg["work"], snapshot_every=cfg["snapshotEvery"],
                         standby=cfg.get("standby", 0))
    results = ps.snapshots

    def report(stop: threading.Event) -> None:  # progress for the test: the batches committed so far
        seen, warm, handed = 0, "", 0
        while not stop.is_set():
            done = ps.handovers.snapshot()["done"] if ps.handovers is not None else []
            for executor, moved in done[handed:]:  # a decommissioned executor's partitions handed over
                print(f"HANDED {executor} {','.join(f'{p}:{e}' for p, e in sorted(moved.items()))}", flush=True)
            handed = len(done)
            stats = list(ps.stats)
            for s in stats[seen:]:
                print(f"BATCH {s.batch_id} {','.join(s.executors)}", flush=True)
            seen = len(stats)
            at = ps.standbys.at
            now = ",".join(str(at[p].batch_id if p in at else -2) for p in range(cfg["partitions"]))
            if at and now != warm:
                print(f"WARM {now}", flush=True)
                warm = now
            stop.wait(0.05)

    stop = threading.Event()
    reporter = threading.Thread(target=report, args=(stop,), daemon=True)
    reporter.start()
    if not cfg.get("processor"):
        query = ps.start(stream.writeStream, update_routes)
    query.processAllAvailable()
    while len(ps.stats) < cfg.get("batches", 0) and query.isActive:  # the test adds the rest of the input
        query.processAllAvailable()
        stop.wait(0.1)
    deadline = time.monotonic() + 120
    while (results.running or ps.standbys.running) and time.monotonic() < deadline:
        results.wait(1)
        ps.standbys.wait(1)
    handovers = ps.handovers.snapshot() if ps.handovers is not None else {"heard": [], "results": [], "done": []}
    query.stop()
    ps.close()
    stop.set()
    reporter.join()
    skips = [dataclasses.asdict(r) | {"staged": None} for r in results.skips]
    out = {"stats": [dataclasses.asdict(s) for s in ps.batch_stats], "requested": results.requested,
           "skipped": {str(k): v for k, v in results.skipped.items()}, "skips": skips,
           "failures": [repr(e) for e in results.failures],
           "live": spark.sparkContext._jsc.sc().getExecutorIds().size(),
           "warm": [dataclasses.asdict(r) for r in ps.standbys.results], "warmRequested": ps.standbys.requested,
           "handovers": {"heard": handovers["heard"], "results": [dataclasses.asdict(r) for r in handovers["results"]],
                         "done": [[e, {str(p): x for p, x in m.items()}] for e, m in handovers["done"]]}}
    with open(cfg["out"], "w", encoding="utf-8") as fh:
        json.dump(out, fh)
    spark.stop()
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
