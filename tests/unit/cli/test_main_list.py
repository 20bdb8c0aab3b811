"""``blobstate list``'s lines of a group record that says where its partitions' copies are
(``blobstate.cli.main_list.replica_line``) and its JSON (``CheckpointSummary.to_json``)."""

from __future__ import annotations

from dataclasses import replace

from blobstate.cli.main_list import replica_line
from blobstate.maintenance.catalog import CheckpointSummary
from blobstate.model.records import GROUP, Checkpoint, Replica, StoreKey


def test_each_partition_shows_its_primary_at_the_groups_batch_and_its_standby_at_its_own():
    assert replica_line(Replica(0, "executor_10.0.0.2_1", "executor_10.0.0.3_4", 6), 7) == (
        "    partition 0    primary executor_10.0.0.2_1 at batch 7, standby executor_10.0.0.3_4 at batch 6")
    assert replica_line(Replica(3, "executor_10.0.0.2_1", "executor_10.0.0.3_4"), 7).endswith(
        "standby executor_10.0.0.3_4 at batch ?")  # chosen, not warm yet
    assert replica_line(Replica(1, ""), None) == "    partition 1    primary ? at batch ?, standby none"


def test_the_json_of_a_group_names_its_replicas_only_when_it_records_them():
    record = Checkpoint(StoreKey("j", "group", "s"), "g1", 1, "", 0, 0, 1, batch_id=7, kind=GROUP, num_partitions=1,
                        replicas=(Replica(0, "executor_h_1", "executor_k_2", 6),))
    doc = CheckpointSummary(record, None, 10, partitions_committed=1).to_json()
    assert doc["replicas"] == [{"partition": 0, "primary": "executor_h_1", "standby": "executor_k_2",
                                "standbyBatchId": 6}]
    assert "replicas" not in CheckpointSummary(replace(record, replicas=()), None, 10).to_json()
