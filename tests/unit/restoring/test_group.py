"""``blobstate.restoring.group`` on real RocksDB files and a ``file://`` repository: every partition of a
partitioned store restored into ``DEST/<p>/`` (each exactly its own state after the batch asked for), a subset of
partitions, each partition with a work directory of its own, and a store that is not partitioned or a partition no
group commits refused."""

from __future__ import annotations

import pytest

from blobstate import worker
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.errors import NothingToRestore
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.restoring.entries import open_entries
from blobstate.restoring.group import partition_work_dir, restore_partitions

KEY = StoreKey("orders", "group", "totals")
PARTITIONS = 3


def _read(path) -> dict:  # noqa: ANN001
    """The restored partition's entries, read as state-as-data reads them (decoded, nothing run)."""
    with open_entries(str(path)) as found:
        return dict(found)


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Batches 0 and 1, each one group of three partitions' deltas: partition p holds ``total = p * 10 + batch``
    and ``batch-<b>`` for each batch."""
    tmp = tmp_path_factory.mktemp("groups")
    repository = worker.open_repository(f"file://{tmp}/repo", create=True)
    with StoreCommitter(KEY, repository, work_dir=str(tmp / "driver")) as owner:
        groups = GroupCommitter(owner, num_partitions=PARTITIONS)
        for batch in (0, 1):
            parts = [worker.stage_changelog(repository, KEY, partition=p, batch_id=batch, ttl_ms=60_000,
                                            data=changelog.encode([(changelog.PUT, "total", p * 10 + batch),
                                                                   (changelog.PUT, f"batch-{batch}", True)]))
                     for p in range(PARTITIONS)]
            groups.commit(parts, batch_id=batch)
    yield repository
    repository.close()


def _state(p: int, batch: int) -> dict:
    return {"total": p * 10 + batch, **{f"batch-{b}": True for b in range(batch + 1)}}


def test_every_partition_goes_to_its_own_folder_with_its_own_state(repo, tmp_path):
    result = restore_partitions(repo, KEY, str(tmp_path / "dest"), local_store=open_local_store("rocksdb"),
                                work_dir=str(tmp_path / "w"), max_concurrency=2)
    assert sorted(result.partitions) == list(range(PARTITIONS))
    for p in range(PARTITIONS):
        assert result.destinations[p] == str(tmp_path / "dest" / str(p))
        assert _read(tmp_path / "dest" / str(p)) == _state(p, 1)
        assert result.partitions[p].last_batch_id == 1 and result.partitions[p].deltas_applied == 2
    assert partition_work_dir(str(tmp_path / "w"), 2) == str(tmp_path / "w" / "partition-2")
    assert result.to_json()["store"] == str(KEY)


def test_a_subset_of_partitions_at_an_earlier_batch(repo, tmp_path):
    result = restore_partitions(repo, KEY, str(tmp_path / "dest"), local_store=open_local_store("rocksdb"),
                                partitions=[2, 0], max_batch_id=0)
    assert sorted(result.partitions) == [0, 2] and not (tmp_path / "dest" / "1").exists()
    assert _read(tmp_path / "dest" / "2") == _state(2, 0) and _read(tmp_path / "dest" / "0") == _state(0, 0)


def test_a_dry_run_writes_nothing(repo, tmp_path):
    result = restore_partitions(repo, KEY, str(tmp_path / "dest"), local_store=open_local_store("rocksdb"),
                                dry_run=True)
    assert all(r.dry_run for r in result.partitions.values()) and not (tmp_path / "dest").exists()


def test_a_store_that_is_not_partitioned_or_a_partition_no_group_commits_is_refused(repo, tmp_path):
    with pytest.raises(NothingToRestore, match="partition\\(s\\) \\[7\\]"):
        restore_partitions(repo, KEY, str(tmp_path / "d"), local_store=open_local_store("rocksdb"), partitions=[7])
    with pytest.raises(NothingToRestore, match="not a partitioned store"):
        restore_partitions(repo, StoreKey("orders", "0", "plain"), str(tmp_path / "d"),
                           local_store=open_local_store("rocksdb"))
    assert not (tmp_path / "d").exists()
