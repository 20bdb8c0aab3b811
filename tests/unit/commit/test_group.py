"""``blobstate.commit.group`` on a ``file://`` repository: the parts partition writers staged (through
``blobstate.worker``) committed as one group record (the batch counts for every partition at once), their TTLs
removed; a malformed manifest refused before anything is written; a second owner fenced and its parts deleted;
and the partition count a store's group records hold enforced."""

from __future__ import annotations

import msgspec
import pytest

from blobstate import worker
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter, check_key_groups, check_partition_count, recorded_key_groups
from blobstate.errors import ConfigurationError, FencedError, InvalidRecordError, PartitionCountError
from blobstate.model import changelog
from blobstate.model.records import GROUP, MAX_PARTITIONS, StoreKey

KEY = StoreKey("flights", "group", "routes")
TTL = 60_000


@pytest.fixture
def repo(tmp_path):
    repository = worker.open_repository(f"file://{tmp_path}/repo", create=True)
    yield repository
    repository.close()


def _part(repo, partition: int, batch: int):  # noqa: ANN001, ANN202
    data = changelog.encode([(changelog.PUT, f"p{partition}", batch)])
    return worker.stage_changelog(repo, KEY, partition=partition, batch_id=batch, data=data, ttl_ms=TTL)


def _owner(repo, tmp_path, name: str = "driver") -> StoreCommitter:  # noqa: ANN001
    return StoreCommitter(KEY, repo, work_dir=str(tmp_path / name), ttl_ms=TTL)


def test_every_partitions_part_is_committed_by_one_record(repo, tmp_path):
    parts = [_part(repo, 1, 0), _part(repo, 0, 0)]
    assert all(repo.store.has_ttl(p.blob_id) for p in parts) and repo.log.history(KEY) == []
    with _owner(repo, tmp_path) as owner:
        record = GroupCommitter(owner, num_partitions=2).commit(parts, batch_id=0, query_id="q")
    assert (record.kind, record.generation, record.num_partitions, record.batch_id) == (GROUP, 1, 2, 0)
    assert [e.partition for e in record.partitions] == [0, 1]  # in partition order
    assert [cp.checkpoint_id for cp in repo.log.history(KEY)] == [record.checkpoint_id]
    assert not any(repo.store.has_ttl(p.blob_id) for p in parts)


@pytest.mark.parametrize("bad", ["two deltas of one partition", "a partition outside the group"])
def test_a_malformed_manifest_is_refused_before_anything_is_written(repo, tmp_path, bad):
    parts = [_part(repo, 0, 0), _part(repo, 0, 0)] if bad.startswith("two") else [_part(repo, 0, 0), _part(repo, 5, 0)]
    with _owner(repo, tmp_path) as owner:
        with pytest.raises(ConfigurationError, match="malformed group checkpoint"):
            GroupCommitter(owner, num_partitions=2).commit(parts, batch_id=0)
        assert owner.session.states() == {}  # nothing journaled
    assert repo.log.history(KEY) == []


@pytest.mark.parametrize(("wrong", "field"), [({"crc32c": "12"}, "partitions[1].crc32c"),
                                             ({"size": True}, "partitions[1].sizeInBytes"),
                                             ({"batch_id": -2}, "partitions[1].batchId")])
def test_a_part_with_a_wrong_field_type_is_refused_naming_the_field(repo, tmp_path, wrong, field):
    parts = [_part(repo, 0, 0), msgspec.structs.replace(_part(repo, 1, 0), **wrong)]
    with _owner(repo, tmp_path) as owner:
        with pytest.raises(InvalidRecordError, match="malformed group checkpoint") as caught:
            GroupCommitter(owner, num_partitions=2).commit(parts, batch_id=0)
        assert caught.value.field == field and caught.value.exit_code == 2
        assert owner.session.states() == {}  # nothing journaled
    assert repo.log.history(KEY) == []


def test_a_second_owner_is_fenced_and_its_parts_deleted(repo, tmp_path):
    with _owner(repo, tmp_path, "first") as first:
        groups = GroupCommitter(first, num_partitions=1)
        mine = _part(repo, 0, 0)
        with _owner(repo, tmp_path, "second") as second:
            GroupCommitter(second, num_partitions=1).commit([_part(repo, 0, 0)], batch_id=0)
        with pytest.raises(FencedError):
            groups.commit([mine], batch_id=0)
    listed = {i.blob_id for i in repo.store.list(KEY.prefix)}
    assert mine.blob_id not in listed and len(repo.log.history(KEY)) == 1


def test_the_partition_count_is_the_one_the_group_records_hold(repo, tmp_path):
    with _owner(repo, tmp_path) as owner:
        GroupCommitter(owner, num_partitions=2).commit([_part(repo, 0, 0), _part(repo, 1, 0)], batch_id=0)
    history = repo.log.history(KEY)
    check_partition_count(history, 2, str(KEY))
    check_partition_count([], 7, str(KEY))  # no group yet: any count
    with pytest.raises(PartitionCountError, match="num_partitions=2"):
        check_partition_count(history, 3, str(KEY))
    for count in (0, MAX_PARTITIONS + 1):
        with pytest.raises(ConfigurationError, match="num_partitions must be"):
            check_partition_count(history, count, str(KEY))


def test_a_key_grouped_group_records_its_key_groups_through_the_engine(repo, tmp_path):
    with _owner(repo, tmp_path) as owner:
        record = GroupCommitter(owner, num_partitions=2, key_groups=128).commit(
            [_part(repo, 0, 0), _part(repo, 1, 0)], batch_id=0)
    [read] = repo.log.history(KEY)
    assert record.key_groups == read.key_groups == 128 and read.checkpoint_id == record.checkpoint_id
    assert recorded_key_groups([read]) == 128


def test_a_key_grouped_store_may_restart_with_another_count_where_rescale_is_allowed(repo, tmp_path):
    with _owner(repo, tmp_path) as owner:
        GroupCommitter(owner, num_partitions=2, key_groups=8).commit([_part(repo, 0, 0), _part(repo, 1, 0)],
                                                                    batch_id=0)
    history = repo.log.history(KEY)
    check_partition_count(history, 2, str(KEY))
    check_partition_count(history, 5, str(KEY), rescale=True)
    with pytest.raises(PartitionCountError, match="does not reassign key-group ranges"):
        check_partition_count(history, 5, str(KEY))
    with pytest.raises(ConfigurationError, match="8 key groups"):
        check_partition_count(history, 9, str(KEY), rescale=True)
    assert check_key_groups(history, None, str(KEY)) == 8 and check_key_groups(history, 8, str(KEY)) == 8
    with pytest.raises(ConfigurationError, match="key_groups=8"):
        check_key_groups(history, 16, str(KEY))


def test_a_store_written_without_key_groups_keeps_the_offline_rescale_and_says_so(repo, tmp_path):
    with _owner(repo, tmp_path) as owner:
        GroupCommitter(owner, num_partitions=2).commit([_part(repo, 0, 0), _part(repo, 1, 0)], batch_id=0)
    history = repo.log.history(KEY)
    for rescale in (False, True):
        with pytest.raises(PartitionCountError, match="no key groups.*blobstate spark rescale"):
            check_partition_count(history, 3, str(KEY), rescale=rescale)
    assert check_key_groups(history, None, str(KEY)) == 0
    with pytest.raises(ConfigurationError, match="no key groups.*blobstate spark rescale"):
        check_key_groups(history, 128, str(KEY))
    assert check_key_groups([], 128, str(KEY)) == 128 and check_key_groups([], None, str(KEY)) == 0
