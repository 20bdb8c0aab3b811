"""``blobstate.spark.partitioned.executor.partition``: a partition's copy on a host, with real files and RocksDB. One
attempt at a time holds it; a kept changelog is used only when it matches its record; placement's small tasks
report the copies a host has (their markers) and close their databases."""

from __future__ import annotations

import pytest

from blobstate.errors import CommitInProgressError
from blobstate.model.chain import partition_history
from blobstate.model.records import StoreKey
from blobstate.spark.partitioned.executor.partition import (
    LocalPartition,
    local_markers,
    locate_task,
    release_partition,
    release_task,
)

KEY = StoreKey("flights", "group", "routes")  # the conftest's group


def test_one_attempt_at_a_time_holds_a_partition_on_a_host(tmp_path):
    with LocalPartition(str(tmp_path), KEY, 0, keep_open=False):
        with pytest.raises(CommitInProgressError, match="another task holds"):
            with LocalPartition(str(tmp_path), KEY, 0, wait_s=0.2):
                pass
        with LocalPartition(str(tmp_path), KEY, 1, wait_s=0.2, keep_open=False):  # another partition: its own lock
            pass
    with LocalPartition(str(tmp_path), KEY, 0, wait_s=0.2, keep_open=False):  # let go: the next attempt enters
        pass


def test_a_kept_changelog_is_used_only_when_it_matches_its_record(group):
    group.run(0, {0: [("JFK", 3)]})
    (record,) = partition_history(group.repo.log.history(KEY), 0)
    with LocalPartition(group.local_dir, KEY, 0, keep_open=False) as local:
        kept = local.kept(record)
        assert kept is not None and len(kept) == record.changelog_size
        with open(f"{local.pending}/{record.checkpoint_id}", "r+b") as fh:
            fh.write(b"X")  # the copy on disk damaged
        assert local.kept(record) is None


def test_placements_tasks_report_the_copies_a_host_has_and_close_them(group):
    assert local_markers(group.local_dir, KEY, 2) == {} and not release_partition(group.local_dir, KEY, 0)
    group.run(0, {0: [("JFK", 3)], 1: [("LGA", 2)]})
    first = group.run(1, {})
    markers = {p.partition: p.state_record for p in first}  # each copy is at the batch 0 part it applied
    ((executor, reported),) = list(locate_task(group.local_dir, KEY, 2, 0, iter(["row"])))
    assert executor == "" and reported == markers  # no JVM helper here: the executor is unknown
    assert list(release_task(group.local_dir, KEY, 1, iter(["row"]))) == [True]
