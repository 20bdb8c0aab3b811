"""A partitioned stream on the namespace cluster that loses a worker between two batches, with or without standbys.

``run_with_a_lost_worker(cluster, frame, work, standby=...)`` runs the flights stream (``frame``'s first ``days``
days, one file per batch) through ``blobstate.spark.partitioned(N=partitions, standby=...)`` in a driver process
(``cluster_child.py``) and hands it its day files in three steps, so that the worker is killed between batches,
never under one:

1. days ``0..K-1`` (``K``: ``kill_after``); with standbys, the next step waits until the warm jobs report every
   partition's standby at batch ``K-1``;
2. day ``K``; once batch ``K`` committed (with standbys: once every standby reported batch ``K``; the group record of
   ``K`` is read from the repository then), the worker holding partition 1's primary is SIGKILLed (its JVM and its
   executor's, by PID);
3. the other days; the driver runs to the last batch.

Used by ``tests/e2e/test_spark_standby.py`` and ``bench/standby.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class LostWorkerRun:
    """What a run gives: the driver's ``result`` (``cluster_child.py``'s JSON), the ``victim`` worker, the group
    ``record`` of batch ``K`` read when the worker was killed (standbys only), the day files ``paths`` and the
    repository ``repo_url``."""

    result: dict[str, Any]
    victim: Any
    record: Any
    paths: list[str]
    repo_url: str


def run_with_a_lost_worker(cluster: Any, frame: Any, work: str, *, standby: int, days: int = 8,
                           kill_after: int = 4, partitions: int = 4, snapshot_every: int = 5,
                           timeout_s: float = 300, lose: str = "kill") -> LostWorkerRun:
    """Steps 1-3 of the module docstring in ``work`` (a new directory). ``lose="decommission"``: the worker is
    drained instead of killed (``SparkCluster.decommission_worker``, a cluster made with ``decommission=True``), and
    the rest of the days enter once the driver reported the hand-over of its executor (a ``HANDED`` line). Raises
    ``AssertionError`` when the driver fails or the stream ended before the kill."""
    from blobstate.spark.demo.flights import write_day_files

    repo_url, days_dir = f"file://{work}/repo", os.path.join(work, "days")
    staged = write_day_files(frame, os.path.join(work, "staged"), days=days)
    os.makedirs(days_dir)

    def hand_over(upto: int) -> None:  # the day files up to ``upto`` enter the stream's directory (mtimes kept)
        for path in staged[:upto]:
            target = os.path.join(days_dir, os.path.basename(path))
            if not os.path.exists(target):
                os.rename(path, target)

    def kill(primaries: list[str]) -> Any:
        victim = cluster.worker_of(primaries[1])
        if lose == "decommission":
            cluster.decommission_worker(victim)  # the rest of the days once its hand-over is reported
        else:
            cluster.kill_worker(victim)
            hand_over(days)
        return victim

    hand_over(kill_after)
    child = _start_driver(cluster, work, days_dir, standby=standby, partitions=partitions, batches=days,
                          snapshot_every=snapshot_every)
    victim, record, primaries = None, None, []
    try:
        for line in child.stdout:
            words = line.split()
            if words[:1] == ["BATCH"]:
                batch, primaries = int(words[1]), words[2].split(",")
                if not standby and batch == kill_after - 1:
                    hand_over(kill_after + 1)
                elif not standby and batch == kill_after:
                    victim = kill(primaries)
            elif words[:1] == ["HANDED"] and victim is not None and cluster.worker_of(words[1]) is victim:
                hand_over(days)
            elif words[:1] == ["WARM"] and victim is None:
                at = [int(b) for b in words[1].split(",")]
                if min(at) == kill_after - 1:  # every standby at batch K - 1: batch K may commit
                    hand_over(kill_after + 1)
                elif min(at) == kill_after:  # every standby caught up to batch K: the primary's host goes
                    record = group_record(repo_url, kill_after)
                    victim = kill(primaries)
        code = child.wait(timeout=timeout_s)
        err = open(os.path.join(work, "driver.err"), encoding="utf-8", errors="replace").read()[-4000:]
        assert code == 0, err
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert victim is not None, "the stream ended before a worker was killed"
    with open(os.path.join(work, "result.json"), encoding="utf-8") as fh:
        result = json.load(fh)
    return LostWorkerRun(result, victim, record, [os.path.join(days_dir, os.path.basename(p)) for p in staged],
                         repo_url)


def group_record(repo_url: str, batch: int) -> Any:
    """The newest group record of ``batch`` of the flights routes store in ``repo_url``."""
    from blobstate.model.records import StoreKey
    from blobstate.worker import open_repository

    repo = open_repository(repo_url)
    try:
        return next(r for r in reversed(repo.log.history(StoreKey("flights", "group", "routes")))
                    if r.is_group and r.batch_id == batch)
    finally:
        repo.close()


def _start_driver(cluster: Any, work: str, days_dir: str, *, standby: int, partitions: int, batches: int,
                  snapshot_every: int) -> subprocess.Popen:
    cfg = {"conf": cluster.driver_conf(executor_memory="1g"), "executors": len(cluster.workers),
           "repo": f"file://{work}/repo", "checkpoint": os.path.join(work, "ck"), "local": cluster.local_dir,
           "work": os.path.join(work, "work"), "input": days_dir, "partitions": partitions,
           "snapshotEvery": snapshot_every, "out": os.path.join(work, "result.json"), "standby": standby,
           "batches": batches}
    config = os.path.join(work, "driver.json")
    with open(config, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    with open(os.path.join(work, "driver.err"), "wb") as err:
        return subprocess.Popen([sys.executable, os.path.join(HERE, "cluster_child.py"), config], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
