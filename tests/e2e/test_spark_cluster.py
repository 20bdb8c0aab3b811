"""Partitioned state on a real Spark standalone cluster of two "hosts" (issue 30): a master and two workers, each in
its own UTS and mount namespace with its own tmpfs at the same local dir and its own loopback address
(``tests/support/spark_cluster.py``), the flights stream through ``blobstate.spark.partitioned(N=4)`` in a driver
process (``tests/support/cluster_child.py``).

Once warm, every partition task runs on the executor holding its copy and finds it current (counted from what the
tasks report: ``GroupBatchStats.partitions_local`` and ``partitions_placed``), and no snapshot task is skipped
while its host is alive. Then one worker is SIGKILLed mid-stream (its JVM and its executor's, by PID): the stream
goes on, the final state equals a pandas pass over the same days, and each partition that lived on the lost host is
restored exactly once on the other and stays there.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from spark_cluster import cluster_for_test  # noqa: E402
from spark_fixtures import SUPPORT, restored_routes  # noqa: E402

N = 4
# 12 day files keep the test near 120 s of the suite (cluster start ~40 s); the longer variant, for the issue's
# 100-batch figures: BLOBSTATE_CLUSTER_DAYS=110 python -m pytest -n 0 -s tests/e2e/test_spark_cluster.py
DAYS = int(os.environ.get("BLOBSTATE_CLUSTER_DAYS", "12"))
KILL_AFTER = DAYS // 2  # the batch after whose commit a worker is killed
WARM = 2  # batches before placement counts: the first one places every partition


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with cluster_for_test(tmp_path_factory, workers=2, tmpfs_size="1g") as running:
        yield running


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start_driver(cluster, tmp_path, days_dir, processor=False):
    conf = cluster.driver_conf(executor_memory="1g")
    if processor:  # the executors unpickle tests.processors
        conf["spark.executorEnv.PYTHONPATH"] = ROOT
        # the processor's first tasks (their Python workers importing pandas and pyarrow) outlast Spark's default 3 s
        # locality wait on a loaded machine: Spark then runs a placed task on the other executor and the group piles
        # up on one 1-core executor, whose snapshot tasks then wait out the locality wait too (seen: batch 0 placed
        # 3 of 4, two snapshot tasks run where no copy was). A dead executor is never waited for: ``choose`` names
        # live ones only.
        conf["spark.locality.wait"] = "30s"
    cfg = {"conf": conf, "executors": len(cluster.workers), "processor": processor,
           "repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": cluster.local_dir,
           "work": str(tmp_path / "work"), "input": days_dir, "partitions": N, "snapshotEvery": 5,
           "out": str(tmp_path / "result.json")}
    config = tmp_path / "driver.json"
    config.write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, ROOT, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    with open(tmp_path / "driver.err", "wb") as err:
        return subprocess.Popen([sys.executable, os.path.join(SUPPORT, "cluster_child.py"), str(config)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)


@pytest.mark.parametrize("processor", [pytest.param(False, id="update"),
                                       pytest.param(True, id="processor", marks=pytest.mark.long)])
def test_partition_tasks_run_where_their_copy_is_and_a_lost_worker_moves_them_once(cluster, flights_frame,
                                                                                  tmp_path, processor):
    """``processor``: the running count of ``tests/processors`` per route through ``transform_with_state`` (its
    ``mapInArrow`` job over ``PlacedRDD``, ``blobstate.spark.stateful.driver.on_partitions.placed_rows``) in place of
    the flights update; the same placement checks, and the final counts per route."""
    from blobstate.spark.demo.flights import reference_routes, write_day_files

    days_dir = str(tmp_path / "days")
    paths = write_day_files(flights_frame, days_dir, days=DAYS)
    days = {(int(os.path.basename(p)[5:7]), int(os.path.basename(p)[8:10])) for p in paths}
    frame = flights_frame[[(m, d) in days for m, d in zip(flights_frame["month"], flights_frame["day"],
                                                          strict=True)]]
    child = _start_driver(cluster, tmp_path, days_dir, processor)
    victim = None
    try:
        for line in child.stdout:  # "BATCH <b> <executor of each partition's part>" as batches commit
            if line.startswith("BATCH ") and victim is None and int(line.split()[1]) >= KILL_AFTER:
                # the worker holding partition 1's newest copy is lost mid-stream (its JVM and its executor's)
                victim = cluster.worker_of(line.split()[2].split(",")[1])
                cluster.kill_worker(victim)
        assert child.wait(timeout=300) == 0, (tmp_path / "driver.err").read_text()[-4000:]
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    assert victim is not None
    result = json.loads((tmp_path / "result.json").read_text())

    stats = result["stats"]
    for s in stats:  # shown with -s: the placement figures
        print("batch", s["batch_id"], "job_ms", round(s["job_ms"]), "restored", s["partitions_restored"], "local",
              s["partitions_local"], "placed", s["partitions_placed"], "on",
              [e.split("_", 1)[1] for e in s["executors"]])
    print("snapshots requested", result["requested"], "skipped", result["skipped"], result["skips"])
    assert [s["batch_id"] for s in stats] == list(range(DAYS))
    # the last batch with a part written on the lost host: the kill came after its commit
    killed_at = max(s["batch_id"] for s in stats if any(cluster.worker_of(e) is victim for e in s["executors"]))
    assert killed_at >= KILL_AFTER
    before = [s for s in stats if WARM <= s["batch_id"] <= killed_at]
    local = sum(s["partitions_local"] for s in before)
    placed = sum(s["partitions_placed"] for s in before)
    assert local >= 0.95 * N * len(before) and placed >= 0.95 * N * len(before), (local, placed, len(before))
    assert len({e for s in before for e in s["executors"]}) == 2  # the group spread over both hosts
    requested = [b for b in result["requested"] if b < killed_at]
    assert requested and not [s for s in result["skips"] if s["batch_id"] in requested], result["skips"]

    lost = {p for p, e in enumerate(stats[killed_at]["executors"]) if cluster.worker_of(e) is victim}
    assert 1 in lost and 0 < len(lost) < N
    after = stats[killed_at + 1:]
    assert sum(s["partitions_restored"] for s in after) == len(lost), [(s["batch_id"], s["partitions_restored"])
                                                                       for s in after]
    assert all(s["partitions_local"] == N for s in after[2:])  # moved once, then local again
    if processor:
        assert _route_counts(tmp_path) == {tuple(k): int(n) for k, n in frame.groupby(["origin", "dest"]).size()
                                           .items()}
        return
    state, _ = restored_routes(tmp_path, f"file://{tmp_path}/repo")
    assert state == reference_routes(frame)


def _route_counts(tmp_path) -> dict:
    """The running count processor's ``count`` per route, restored from the repository."""
    from rocksdict import Rdict

    from blobstate import api
    from blobstate.spark.processor import StateReader

    api.restore_partitions(str(tmp_path / "restored"), repo=f"file://{tmp_path}/repo", job="flights", task="group",
                           store="routes")
    counts = {}
    for p in range(N):
        db = Rdict(str(tmp_path / "restored" / str(p)))
        try:
            for row in StateReader(db).read_variable("count").to_pylist():
                counts[(row["key"]["origin"], row["key"]["dest"])] = row["value"]["count"]
        finally:
            db.close()
    return counts
