"""``blobstate.spark.partitioned.driver.snapshots.SnapshotRequests``, the driver's queue of partition snapshots, with
its Spark job replaced by a function (the job itself runs in ``tests/e2e/test_spark_partitioned.py``): one job at a
time, a failed job never breaks the batches, and a partition's newer staged snapshot replaces its older one."""

from __future__ import annotations

import threading

from blobstate.model.layout import now_ms
from blobstate.model.records import PartitionEntry, StoreKey
from blobstate.spark.partitioned.driver.snapshots import SnapshotRequests
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.snapshot_task import SnapshotResult
from blobstate.worker import StagedSnapshot

KEY = StoreKey("flights", "group", "routes")
TTL = 60_000


def _plan(batch: int) -> BatchPlan:
    return BatchPlan("file:///r", KEY, "/l", 2, batch, batch + 1, batch, {}, ttl_ms=TTL)


def _staged(partition: int, batch: int) -> SnapshotResult:
    entry = PartitionEntry(partition, "snapshot", f"c{partition}-{batch}", batch, f"{KEY.prefix}/indexes/i", 1, 1, 0, 0)
    return SnapshotResult(partition, batch, now_ms(), StagedSnapshot(entry, (), 1))


def test_one_job_at_a_time_and_a_newer_snapshot_replaces_an_older_one():
    release, started = threading.Event(), threading.Event()

    def job(plan: BatchPlan) -> list[SnapshotResult]:
        started.set()
        release.wait(10)
        return [_staged(0, plan.batch_id)]

    queue = SnapshotRequests(job, ttl_ms=TTL)
    assert queue.request(_plan(3)) and started.wait(10)
    assert not queue.request(_plan(4)) and queue.requested == [3]  # skipped: the next batch asks again
    release.set()
    assert queue.wait(10) and queue.request(_plan(5)) and queue.wait(10)
    (taken,) = queue.take(6)
    assert taken.batch_id == 5 and queue.take(6) == []  # batch 3's staged snapshot was replaced: its blobs expire


def test_a_failed_job_is_recorded_and_asks_for_nothing_more():
    def job(plan: BatchPlan) -> list[SnapshotResult]:
        raise OSError("the executors went away")

    queue = SnapshotRequests(job, ttl_ms=TTL)
    assert queue.request(_plan(3)) and queue.wait(10)
    assert [type(e) for e in queue.failures] == [OSError] and queue.take(10) == []
    assert queue.request(_plan(4)) and queue.wait(10)  # the next request runs again
