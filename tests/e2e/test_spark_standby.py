"""Warm standby partitions on a real Spark standalone cluster of three "hosts" (issue 42): a master and three workers,
each in its own UTS and mount namespace with its own tmpfs at the same local dir (``tests/support/spark_cluster.py``),
the flights stream through ``blobstate.spark.partitioned(N=4, standby=1)`` in a driver process
(``tests/support/cluster_child.py``, through ``tests/support/standby_run.py``). The stream gets its day files in three
steps, so that a worker is killed between batches, never under one:

1. days ``0..K-1``: the test waits until the warm jobs report every partition's standby at batch ``K-1``;
2. day ``K``: its group record (in the repository) and ``batch_stats`` say where each partition's primary and standby
   are, the standby at ``K-1`` (the last committed batch when ``K`` committed); once the warm job of ``K``
   reported, the worker holding partition 1's primary is SIGKILLed (its JVM and its executor's, by PID);
3. the other days: the lost partitions run on their standbys' executors and **no partition is restored** from the
   repository; the final state equals a pandas pass over the same days.

The same run with ``standby=0`` (a long variant: ``python -m bench.long_tests``) restores each lost partition once
(what the standby saves, and what makes the test able to fail).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")

from spark_cluster import cluster_for_test  # noqa: E402
from spark_fixtures import restored_routes  # noqa: E402
from standby_run import run_with_a_lost_worker  # noqa: E402

N = 4
DAYS = 8
K = 4  # the batch after which a worker is killed


@pytest.fixture
def cluster(tmp_path_factory):
    with cluster_for_test(tmp_path_factory, workers=3, tmpfs_size="512m") as running:
        yield running


@pytest.fixture
def draining_cluster(tmp_path_factory):
    """Three workers whose JVMs drain on Spark's decommission signal (``spark.decommission.enabled``)."""
    with cluster_for_test(tmp_path_factory, workers=3, tmpfs_size="512m", decommission=True) as running:
        yield running


def run(cluster, flights_frame, tmp_path, standby, lose="kill"):
    """The run of ``standby_run`` (module docstring), its stats shown with -s and its final state checked."""
    from blobstate.spark.demo.flights import reference_routes
    from blobstate.spark.placement.coordinator import host_of

    out = run_with_a_lost_worker(cluster, flights_frame, str(tmp_path), standby=standby, days=DAYS, kill_after=K,
                                 partitions=N, lose=lose)
    for s in out.result["stats"]:
        print("batch", s["batch_id"], "job_ms", round(s["job_ms"]), "restored", s["partitions_restored"], "on",
              [host_of(e) for e in s["executors"]], "standbys", [host_of(e) for e in s["standbys"]],
              s["standby_batches"])
    days = {(int(os.path.basename(p)[5:7]), int(os.path.basename(p)[8:10])) for p in out.paths}
    frame = flights_frame[[(m, d) in days for m, d in zip(flights_frame["month"], flights_frame["day"],
                                                          strict=True)]]
    state, _ = restored_routes(tmp_path, out.repo_url)
    assert state == reference_routes(frame)
    assert [s["batch_id"] for s in out.result["stats"]] == list(range(DAYS))
    return out


def lost_partitions(cluster, stats, victim):
    """The batch the kill followed (the last with a part written on the victim) and its partitions there."""
    killed_at = max(s["batch_id"] for s in stats if any(cluster.worker_of(e) is victim for e in s["executors"]))
    return killed_at, {p for p, e in enumerate(stats[killed_at]["executors"]) if cluster.worker_of(e) is victim}


@pytest.mark.parametrize("standby", [1, pytest.param(0, id="control", marks=pytest.mark.long)],
                         ids=lambda s: f"standby{s}")
def test_a_lost_worker_s_partitions_run_on_their_warm_standbys_without_a_restore(cluster, flights_frame, tmp_path,
                                                                                  standby):
    """``standby=1``: steps 1-3 of the module docstring. The control (``standby=0``, a long variant: the suite's
    cluster budget) loses the same worker and restores each lost partition once."""
    from blobstate.spark.placement.coordinator import host_of

    out = run(cluster, flights_frame, tmp_path, standby=standby)
    stats, record = out.result["stats"], out.record
    killed_at, lost = lost_partitions(cluster, stats, out.victim)
    assert killed_at == K and 1 in lost
    if not standby:
        assert sum(s["partitions_restored"] for s in stats[K + 1:]) == len(lost)
        assert not out.result["warm"] and all(not s["standbys"] for s in stats)
        return
    # step 2: the record of batch K, read back from the repository, and the batch's stats say the same
    assert record is not None and [r.partition for r in record.replicas] == list(range(N))
    for r in record.replicas:
        assert r.primary == stats[K]["executors"][r.partition] and host_of(r.standby) != host_of(r.primary)
        assert r.standby_batch_id == K - 1, record.replicas  # the last batch committed before K
    assert list(stats[K]["standbys"]) == [r.standby for r in record.replicas]
    assert list(stats[K]["standby_batches"]) == [K - 1] * N
    # step 3: the lost partitions ran where their standbys were, and nothing was restored
    assert all(stats[K + 1]["executors"][p] == stats[K]["standbys"][p] for p in lost), (stats[K + 1], stats[K])
    assert sum(s["partitions_restored"] for s in stats[K + 1:]) == 0, [s["partitions_restored"] for s in stats]
    # and each promoted partition got a new standby off the lost host
    last = stats[-1]
    assert all(e and cluster.worker_of(e) is not out.victim for e in last["standbys"]), last
    assert all(host_of(e) != host_of(x) for e, x in zip(last["standbys"], last["executors"], strict=True))


def test_a_decommissioned_worker_s_partitions_are_handed_to_their_standbys_before_the_next_batch(
        draining_cluster, flights_frame, tmp_path):
    """The same stream, the worker drained instead of killed (Spark's decommission signal): the driver hears it
    (``blobstate.spark.partitioned.driver.handover``) while the executor is still there, brings each of its
    partitions' standbys to the committed batch and makes them the holders, all before the next batch's input
    arrives; the next batches run there and restore nothing."""
    cluster = draining_cluster
    out = run(cluster, flights_frame, tmp_path, standby=1, lose="decommission")
    stats, handovers = out.result["stats"], out.result["handovers"]
    killed_at, lost = lost_partitions(cluster, stats, out.victim)
    assert killed_at == K and 1 in lost
    heard = [e for e in handovers["heard"] if cluster.worker_of(e) is out.victim]
    assert heard, handovers  # heard as a decommission, not found lost
    moved = {int(p): e for executor, m in handovers["done"] if executor in heard for p, e in m.items()}
    assert set(moved) == lost, (moved, lost)
    assert all(moved[p] == stats[K]["standbys"][p] for p in lost), (moved, stats[K])  # the warm standbys
    done = [r for r in handovers["results"] if r["partition"] in lost and not r["skipped"]]
    assert done and all(r["batch_id"] == K and not r["restored"] for r in done), done
    assert all(stats[K + 1]["executors"][p] == moved[p] for p in lost), stats[K + 1]
    assert sum(s["partitions_restored"] for s in stats[K + 1:]) == 0, [s["partitions_restored"] for s in stats]
