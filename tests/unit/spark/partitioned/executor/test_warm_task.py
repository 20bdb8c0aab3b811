"""``blobstate.spark.partitioned.executor.warm_task.warm_partition``, called in this process on a second "host"
(another local dir): a standby's copy is seeded once, then caught up from the committed changelogs (never a restore
while it is on the chain), and a batch task that finds it there starts from it without a restore."""

from __future__ import annotations

import os

from blobstate.spark.executor import open_partitions
from blobstate.spark.partitioned.executor.warm_task import warm_partition, warm_task


def test_a_standby_is_seeded_once_then_caught_up_and_a_batch_on_its_host_restores_nothing(group):
    primary = group.local_dir
    standby = primary + "-standby"
    group.run(0, {0: [("JFK", 1)], 1: [("LGA", 2)]})
    group.local_dir = standby
    seeded = warm_partition(group.plan(0, 0), 0)
    assert (seeded.batch_id, seeded.restored, seeded.skipped) == (0, True, "")  # a new copy: its one restore
    group.local_dir = primary
    for batch in (1, 2):
        group.run(batch, {0: [("JFK", 10 + batch)], 1: [("LGA", batch)]})
    group.local_dir = standby
    caught_up = warm_partition(group.plan(2, 2), 0)
    assert (caught_up.batch_id, caught_up.restored) == (2, False)
    assert caught_up.files == 2 and caught_up.bytes > 0  # the changelogs of batches 1 and 2, downloaded
    assert caught_up.checkpoint_id == group.plan(2, 2).records[0][-1].checkpoint_id
    # the primary's host is lost: partition 0's task runs where its standby is and starts from that copy
    open_partitions.close_all()
    (promoted,) = group.tasks(3, {0: [("JFK", 99)]}, only=[0])
    assert not promoted.restored and promoted.files_downloaded == 0
    (moved,) = group.tasks(3, {1: [("LGA", 99)]}, only=[1])  # partition 1 had no standby there: restored
    assert moved.restored


def test_a_task_on_another_executor_than_its_target_touches_nothing(group):
    group.run(0, {0: [("JFK", 1)]})
    (result,) = warm_task(group.plan(0, 0), ((0, "executor_127.0.0.9_4"),), 0, iter(["row"]))
    assert result.skipped.startswith("ran on an unknown executor") and result.batch_id is None
    assert not os.path.exists(f"{group.local_dir}-x")
    group.local_dir += "-x"
    assert warm_partition(group.plan(0, 0), 0, "executor_127.0.0.9_4").skipped
    assert not os.path.exists(group.local_dir)  # no directory, no lock, no copy
