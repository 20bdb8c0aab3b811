"""``blobstate.spark.partitioned.driver.stats.batch_stats``: what a committed batch of a partitioned state reports,
summed from the tasks' answers in partition order: restores, downloads, the changelog bytes uploaded, where each part
was written and how long it took, and how many tasks ran where the driver wanted them."""

from __future__ import annotations

from blobstate.model import layout
from blobstate.model.records import DELTA, GROUP, Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.executor.identity import TaskIdentity
from blobstate.spark.partitioned.driver.stats import GroupBatchStats, batch_stats
from blobstate.spark.partitioned.executor.batch_task import Prepare
from blobstate.spark.partitioned.executor.snapshot_task import SnapshotResult

KEY = StoreKey("job", "0", "flights")


def prepare(p: int, *, size: int, restored=False, files=0, nbytes=0, ms=10.04, executor="") -> Prepare:
    entry = PartitionEntry(p, DELTA, f"p{p}-7", 7, layout.blob_id(KEY, f"{p:032x}"), 1, size)
    return Prepare(p, 7, 0, 3, entry, 1, "", restored, files, nbytes, ms, TaskIdentity(executor=executor))


def group(batch_id: int | None = 7) -> Checkpoint:
    return Checkpoint(KEY, "g4", 4, "", 0, 0, 1, batch_id=batch_id, kind=GROUP, num_partitions=3)


def test_the_stats_sum_the_tasks_answers_in_partition_order():
    accepted = [prepare(0, size=100, executor="executor_a_1", ms=12.345),
                prepare(1, size=20, restored=True, files=3, nbytes=4096, executor="executor_b_2", ms=250.0),
                prepare(2, size=0, files=1, nbytes=10, executor="", ms=1.06)]
    snapshots = [SnapshotResult(1, 6, 0, None, skipped="busy")]
    stats = batch_stats(group(), accepted, snapshots, ["executor_a_1", "executor_a_1", ""], job_ms=900.5,
                        commit_ms=40.25)
    assert stats == GroupBatchStats(batch_id=7, job_ms=900.5, commit_ms=40.25, generation=4, partitions_restored=1,
                                    files_downloaded=4, bytes_downloaded=4106, bytes_uploaded=120, snapshots=1,
                                    partitions_local=1, partitions_placed=1,
                                    executors=("executor_a_1", "executor_b_2", ""), task_ms=(12.3, 250.0, 1.1))


def test_a_task_placed_nowhere_in_particular_is_not_counted_placed():
    accepted = [prepare(0, size=1, executor=""), prepare(1, size=1, executor="executor_a_1")]
    assert batch_stats(group(), accepted, [], ["", "executor_a_1"], job_ms=1, commit_ms=1).partitions_placed == 1
    assert batch_stats(group(), accepted, [], [], job_ms=1, commit_ms=1).partitions_placed == 0  # no preferences


def test_a_group_without_a_batch_reports_batch_minus_one_and_no_tasks_report_zeros():
    stats = batch_stats(group(None), [], [], [], job_ms=0.0, commit_ms=0.0)
    assert (stats.batch_id, stats.partitions_restored, stats.bytes_uploaded, stats.executors, stats.task_ms) == (
        -1, 0, 0, (), ())


def test_the_batch_that_regrouped_says_from_which_count_to_which_and_where_each_start_went():
    import dataclasses

    phases = (("restore", 120.0), ("cut", 0.4), ("ingest", 30.0), ("snapshot", 80.0))
    accepted = [dataclasses.replace(prepare(p, size=1), phases_ms=phases) for p in range(3)]
    stats = batch_stats(group(), accepted, [], [], job_ms=1, commit_ms=1, key_groups=64, regrouped=(4, 3))
    assert (stats.key_groups, stats.regrouped, stats.phases_ms) == (64, (4, 3), (phases,) * 3)
    steady = batch_stats(group(), accepted, [], [], job_ms=1, commit_ms=1, key_groups=64)
    assert (steady.key_groups, steady.regrouped, steady.phases_ms) == (64, None, ())


def test_the_standbys_a_group_records_are_in_its_stats():
    from blobstate.model.records import Replica

    accepted = [prepare(0, size=1, executor="executor_a_1"), prepare(1, size=1, executor="executor_b_2")]
    stats = batch_stats(group(), accepted, [], [], job_ms=1, commit_ms=1,
                        replicas=(Replica(0, "executor_a_1", "executor_b_2", 6), Replica(1, "executor_b_2")))
    assert (stats.standbys, stats.standby_batches) == (("executor_b_2", ""), (6, None))
    assert batch_stats(group(), accepted, [], [], job_ms=1, commit_ms=1).standbys == ()  # standby=0
