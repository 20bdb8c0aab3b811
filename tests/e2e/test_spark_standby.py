"""Warm standby partitions on a real Spark standalone cluster of three "hosts" (issue 42): a master and three workers,
each in its own UTS and mount namespace with its own tmpfs at the same local dir (``tests/support/spark_cluster.py``),
the flights stream through ``blobstate.spark.partitioned(N=4, standby=1)`` in a driver process
(``tests/support/cluster_child.py``). The test hands the stream its day files in three steps, so that a worker is
killed between batches, never under one:

1. days ``0..K-1``: the test waits until the warm jobs report every partition's standby at batch ``K-1``;
2. day ``K``: its group record (in the repository) and ``batch_stats`` say where each partition's primary and standby
   are, the standby at ``K-1`` (the last committed batch when ``K`` committed); once the warm job of ``K``
   reported, the worker holding partition 1's primary is SIGKILLed (its JVM and its executor's, by PID);
3. the other days: the lost partitions run on their standbys' executors and **no partition is restored** from the
   repository; the final state equals a pandas pass over the same days.

The same run with ``standby=0`` restores each lost partition once (what the standby saves, and what makes the test
able to fail).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from spark_cluster import SparkCluster, unavailable  # noqa: E402
from spark_fixtures import ROUTES_KEY, SUPPORT, restored_routes  # noqa: E402

N = 4
DAYS = 8
K = 4  # the batch after whose warm job a worker is killed


@pytest.fixture
def cluster(tmp_path_factory):
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    from blobstate.spark.placement import helper_jar

    try:  # placement is what a standby needs: without the JVM helper it would fail for no clear reason
        helper_jar.ensure_jar(pytest.importorskip("pyspark").__version__)
    except helper_jar.HelperUnavailable as exc:
        message = f"blobstate's JVM helper is unavailable ({exc}): .ci/install-spark.sh builds it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    base = tmp_path_factory.mktemp("cluster")
    with SparkCluster(str(base / "spark"), str(base / "local"), workers=3, cores=1, memory="2g",
                      tmpfs_size="512m") as running:
        yield running


def _start_driver(cluster, tmp_path, days_dir, standby):
    cfg = {"conf": cluster.driver_conf(executor_memory="1g"), "executors": len(cluster.workers),
           "repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": cluster.local_dir,
           "work": str(tmp_path / "work"), "input": days_dir, "partitions": N, "snapshotEvery": 5,
           "out": str(tmp_path / "result.json"), "standby": standby, "batches": DAYS}
    config = tmp_path / "driver.json"
    config.write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    with open(tmp_path / "driver.err", "wb") as err:
        return subprocess.Popen([sys.executable, os.path.join(SUPPORT, "cluster_child.py"), str(config)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)


def _group_record(repo_url, batch):
    from blobstate.worker import open_repository

    repo = open_repository(repo_url)
    try:
        return next(r for r in reversed(repo.log.history(ROUTES_KEY)) if r.is_group and r.batch_id == batch)
    finally:
        repo.close()


def run_with_a_lost_worker(cluster, flights_frame, tmp_path, standby):
    """Steps 1-3 of the module docstring; returns (the driver's result, the victim, the record of batch K)."""
    from blobstate.spark.placement.coordinator import host_of

    staged = write_days(flights_frame, tmp_path)
    days_dir = str(tmp_path / "days")
    os.makedirs(days_dir)

    def hand_over(upto):  # the day files up to ``upto`` enter the stream's directory (renamed: mtimes kept)
        for path in staged[:upto]:
            target = os.path.join(days_dir, os.path.basename(path))
            if not os.path.exists(target):
                os.rename(path, target)

    hand_over(K)
    child = _start_driver(cluster, tmp_path, days_dir, standby)
    victim, record, primaries = None, None, []
    try:
        for line in child.stdout:
            words = line.split()
            if words[:1] == ["BATCH"]:
                batch, primaries = int(words[1]), words[2].split(",")
                if not standby and batch == K - 1:
                    hand_over(K + 1)
                elif not standby and batch == K:
                    victim = cluster.worker_of(primaries[1])
                    cluster.kill_worker(victim)
                    hand_over(DAYS)
            elif words[:1] == ["WARM"] and victim is None:
                at = [int(b) for b in words[1].split(",")]
                if min(at) == K - 1:  # every standby at batch K - 1: batch K may commit
                    hand_over(K + 1)
                elif min(at) == K:  # every standby caught up to batch K: the primary's host goes
                    record = _group_record(f"file://{tmp_path}/repo", K)
                    victim = cluster.worker_of(primaries[1])
                    cluster.kill_worker(victim)
                    hand_over(DAYS)
        assert child.wait(timeout=300) == 0, (tmp_path / "driver.err").read_text()[-4000:]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert victim is not None, "the stream ended before a worker was killed"
    result = json.loads((tmp_path / "result.json").read_text())
    for s in result["stats"]:  # shown with -s
        print("batch", s["batch_id"], "job_ms", round(s["job_ms"]), "restored", s["partitions_restored"], "on",
              [host_of(e) for e in s["executors"]], "standbys", [host_of(e) for e in s["standbys"]],
              s["standby_batches"])
    state, _ = restored_routes(tmp_path, f"file://{tmp_path}/repo")
    assert state == reference(flights_frame, staged)
    return result, victim, record


def write_days(flights_frame, tmp_path):
    from blobstate.spark.demo.flights import write_day_files

    return write_day_files(flights_frame, str(tmp_path / "staged"), days=DAYS)


def reference(flights_frame, paths):
    from blobstate.spark.demo.flights import reference_routes

    days = {(int(os.path.basename(p)[5:7]), int(os.path.basename(p)[8:10])) for p in paths}
    return reference_routes(flights_frame[[(m, d) in days for m, d in zip(flights_frame["month"],
                                                                             flights_frame["day"], strict=True)]])


def lost_partitions(cluster, stats, victim):
    """The batch the kill followed (the last with a part written on the victim) and its partitions there."""
    killed_at = max(s["batch_id"] for s in stats if any(cluster.worker_of(e) is victim for e in s["executors"]))
    return killed_at, {p for p, e in enumerate(stats[killed_at]["executors"]) if cluster.worker_of(e) is victim}


def test_a_lost_worker_s_partitions_run_on_their_warm_standbys_without_a_restore(cluster, flights_frame, tmp_path):
    from blobstate.spark.placement.coordinator import host_of

    result, victim, record = run_with_a_lost_worker(cluster, flights_frame, tmp_path, standby=1)
    stats = result["stats"]
    assert [s["batch_id"] for s in stats] == list(range(DAYS))
    # step 2: the record of batch K, read back from the repository, and the batch's stats say the same
    assert record is not None and [r.partition for r in record.replicas] == list(range(N))
    for r in record.replicas:
        assert r.primary == stats[K]["executors"][r.partition] and host_of(r.standby) != host_of(r.primary)
        assert r.standby_batch_id == K - 1, record.replicas  # the last batch committed before K
    assert list(stats[K]["standbys"]) == [r.standby for r in record.replicas]
    assert list(stats[K]["standby_batches"]) == [K - 1] * N
    # step 3: the lost partitions ran where their standbys were, and nothing was restored
    killed_at, lost = lost_partitions(cluster, stats, victim)
    assert killed_at == K and 1 in lost
    after = stats[K + 1]
    assert all(after["executors"][p] == stats[K]["standbys"][p] for p in lost), (after, stats[K])
    assert sum(s["partitions_restored"] for s in stats[K + 1:]) == 0, [s["partitions_restored"] for s in stats]
    # and the standbys moved off the lost host: a new one for each promoted partition, warm again
    last = stats[-1]
    assert all(e and cluster.worker_of(e) is not victim for e in last["standbys"]), last
    assert all(host_of(e) != host_of(x) for e, x in zip(last["standbys"], last["executors"], strict=True))


def test_without_standbys_the_same_loss_restores_each_lost_partition(cluster, flights_frame, tmp_path):
    result, victim, _ = run_with_a_lost_worker(cluster, flights_frame, tmp_path, standby=0)
    stats = result["stats"]
    killed_at, lost = lost_partitions(cluster, stats, victim)
    assert killed_at == K and lost
    assert sum(s["partitions_restored"] for s in stats[K + 1:]) == len(lost)
    assert not result["warm"] and all(not s["standbys"] for s in stats)
