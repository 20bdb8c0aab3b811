"""``blobstate.spark.partitioned.executor.batch_task.run_partition``, a batch's task called in this process: it
stages its partition's writes as one changelog part (nothing reaches RocksDB until a group record commits it), the
next batch's task on the same host applies the committed part to the copy it kept open, and a host without the copy
restores it from the repository."""

from __future__ import annotations

import shutil

from blobstate.model.records import DELTA, StoreKey
from blobstate.spark.partitioned.executor.partition import partition_dir, release_partition
from blobstate.worker import entries

KEY = StoreKey("flights", "group", "routes")  # the conftest's group


def _state(group, partition):  # noqa: ANN001, ANN202 - the fixture's group
    assert release_partition(group.local_dir, KEY, partition)  # closed, so its files can be read
    with entries.open_entries(f"{partition_dir(group.local_dir, KEY, partition)}/db") as items:
        return dict(items)


def test_a_task_stages_its_writes_and_only_a_committed_part_reaches_the_copy(group):
    first = group.tasks(0, {0: [("JFK", 3)], 1: [("LGA", 2)]})
    assert [(p.partition, p.batch_id, p.entry.kind, p.restored) for p in first] == [(0, 0, DELTA, False),
                                                                                    (1, 0, DELTA, False)]
    retried = group.tasks(0, {0: [("JFK", 99)]}, only=[0])  # another attempt, whose part is never committed
    group.commit(0, first)
    second = group.tasks(1, {0: [("EWR", 1)]})
    assert [p.state_record for p in second] == [p.entry.checkpoint_id for p in first]  # the committed parts
    assert second[1].local  # its own kept changelog, applied to the copy it kept open: nothing downloaded
    assert second[0].files_downloaded == 1  # the retried attempt replaced what this host kept: read back, checked
    assert retried[0].entry.checkpoint_id != first[0].entry.checkpoint_id
    group.commit(1, second)
    assert _state(group, 0) == {"JFK": 3}  # never the retried attempt's 99; batch 1's part waits for batch 2


def test_a_host_without_the_copy_restores_it_from_the_repository(group, tmp_path):
    group.run(0, {0: [("JFK", 3)], 1: [("LGA", 2)]})
    group.run(1, {0: [("EWR", 1)]})
    shutil.rmtree(group.local_dir)  # the partitions move to a new host
    moved = group.tasks(2, {})
    assert all(p.restored and p.files_downloaded for p in moved)
    assert _state(group, 0) == {"JFK": 3, "EWR": 1} and _state(group, 1) == {"LGA": 2}
