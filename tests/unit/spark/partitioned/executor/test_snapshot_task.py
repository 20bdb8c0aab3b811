"""``blobstate.spark.partitioned.executor.snapshot_task.snapshot_partition``, called in this process: a partition's
snapshot is staged only from the copy this host has at exactly the batch asked for (never a download), its local
checkpoint removed once staged, and it counts once a group record commits it."""

from __future__ import annotations

import os

from blobstate.model.chain import partition_history, plan_chain
from blobstate.model.records import SNAPSHOT, StoreKey
from blobstate.spark.partitioned.executor.snapshot_task import snapshot_partition

KEY = StoreKey("flights", "group", "routes")  # the conftest's group


def test_a_snapshot_is_staged_from_the_hosts_copy_and_counts_once_committed(group):
    group.run(0, {0: [("JFK", 3)], 1: [("LGA", 2)]})
    plan = group.plan(0, 0)  # a snapshot of the state after batch 0, the batch the listener reported
    (result,) = snapshot_partition(plan, 0, iter(["row"]))
    assert result.staged is not None and result.staged.entry.kind == SNAPSHOT and result.staged.entry.batch_id == 0
    assert not [name for name in os.listdir(f"{group.local_dir}/{KEY.job}/{KEY.task}/{KEY.store}/p0000")
                if name.startswith("snapshot-")]  # the local checkpoint is gone once staged
    group.commit(1, group.tasks(1, {}), extra=[result.staged])  # committed in the next batch's group record
    chain = plan_chain(partition_history(group.repo.log.history(KEY), 0), 1)
    assert chain.snapshot is not None and chain.snapshot.checkpoint_id == result.staged.entry.checkpoint_id


def test_a_host_without_the_copy_at_that_batch_skips_the_snapshot(group):
    for batch in range(3):
        group.run(batch, {0: [("JFK", batch)]})
    (past,) = snapshot_partition(group.plan(0, 0), 0, iter(()))  # batch 2's task moved the copy on to batch 1
    group.local_dir += "-elsewhere"
    (missing,) = snapshot_partition(group.plan(1, 1), 0, iter(()))  # another host: no copy at all
    assert (past.staged, past.skipped) == (None, "no local copy at this batch") == (missing.staged, missing.skipped)
