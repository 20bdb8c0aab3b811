"""Issue 39 case 4 at the level of the Spark binding's pure planning, no Spark: a restart
(``blobstate.spark.committed.alignment.plan_alignment``, ``align_partitions``) and a partition task bringing its copy to
a batch (``LocalPartition.ensure_at``) never take a snapshot of an older batch for the batch Spark committed. Before the
fix both accepted it (the restart restored the state after batch 2, the partition ran batch 5 on it)."""

from __future__ import annotations

import pytest

from blobstate.errors import StateNotHeld
from blobstate.model.records import DELTA, GROUP, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.committed.alignment import plan_alignment
from blobstate.spark.errors import SparkAlignmentError
from blobstate.spark.partitioned.driver.partitioning import align_partitions
from blobstate.spark.partitioned.executor.partition import LocalPartition

KEY = StoreKey("flights", "0", "stats")
GKEY = StoreKey("flights", "group", "routes-m3")
Q = "11111111-0000-4000-8000-000000000001"


def snap(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch, query_id=Q)


def group_of_snapshots(gen: int, batch: int, n: int) -> Checkpoint:
    """A rescale's (or a partitioned ``write_state``'s) one group record: a snapshot of ``batch`` per partition."""
    parts = tuple(PartitionEntry(p, SNAPSHOT, f"g{gen}p{p}", batch, f"{GKEY.prefix}/indexes/{gen:030x}{p:02x}.json",
                                 1, 10) for p in range(n))
    return Checkpoint(GKEY, f"g{gen}", gen, "", 0, 0, 0, batch, kind=GROUP, query_id=Q, num_partitions=n,
                      partitions=parts, key_columns=(("origin", "string"), ("dest", "string")))


def test_a_driver_store_holding_batch_2_is_refused_when_spark_committed_batch_4():
    with pytest.raises(SparkAlignmentError, match=r"Spark committed batch 4.*after batch 2 at most") as info:
        plan_alignment([snap(1, 2)], KEY, last_committed=4, query_id=Q, location="/ck", repo_url="file:///r")
    assert info.value.exit_code == 5
    plan = plan_alignment([snap(1, 2)], KEY, last_committed=2, query_id=Q, location="/ck", repo_url="file:///r")
    assert plan.restored_batch == 2 and plan.chain.snapshot.batch_id == 2


def test_a_rescaled_group_holding_batch_2_is_refused_when_spark_committed_batch_4():
    history = [group_of_snapshots(1, 2, 3)]
    with pytest.raises(SparkAlignmentError, match=r"after batch 2 at most"):
        align_partitions(history, GKEY, num_partitions=3, key_cols=["origin", "dest"], last_committed=4,
                         last_planned=5, query_id=Q, location="/ck", repo_url="file:///r")
    plans = align_partitions(history, GKEY, num_partitions=3, key_cols=["origin", "dest"], last_committed=2,
                             last_planned=3, query_id=Q, location="/ck", repo_url="file:///r")
    assert [p.restored_batch for p in plans] == [2, 2, 2]


def test_a_partition_task_never_brings_its_copy_to_an_older_snapshot_for_a_later_batch(tmp_path):
    records = tuple(group_of_snapshots(1, 2, 3).expand())
    partition = LocalPartition(str(tmp_path), GKEY, 0)
    with pytest.raises(StateNotHeld, match=r"after batch 4 is needed.*after batch 2 at most"):
        partition.ensure_at(None, tuple(r for r in records if r.partition == 0), 4)  # type: ignore[arg-type]


def test_the_deltas_of_a_rerun_batch_after_a_snapshot_make_the_exact_chain():
    delta = Checkpoint(KEY, "d2", 2, "", 0, 0, 0, 3, kind=DELTA, changelog_blob_id=f"{KEY.prefix}/blobs/{2:032x}",
                       changelog_crc32c=7, changelog_size=5, query_id=Q)
    plan = plan_alignment([snap(1, 2), delta], KEY, last_committed=3, query_id=Q, location="/ck",
                          repo_url="file:///r")
    assert (plan.snapshot_batch, plan.deltas, plan.restored_batch) == (2, 1, 3)
