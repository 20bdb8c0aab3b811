"""``blobstate.worker``, the executors' one door into the core, on a real ``file://`` repository and real
RocksDB files under ``tmp_path``: what an executor stages through it (a snapshot of its partition, a changelog)
is what the driver's group commit makes count, and what an executor restores through it is exactly that state; the
worker's repository is opened once per Python worker."""

from __future__ import annotations

import pytest
from rocksdict import Rdict

from blobstate import worker as staging
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.config.settings import Settings
from blobstate.errors import RepositoryNotFound
from blobstate.model import changelog
from blobstate.model.align import chain_to
from blobstate.model.chain import partition_history
from blobstate.model.records import DELTA, SNAPSHOT, StoreKey

KEY = StoreKey("flights", "group", "routes")
TTL = 60_000


@pytest.fixture
def repo(tmp_path):
    repository = staging.open_repository(f"file://{tmp_path}/repo", create=True)
    yield repository
    repository.close()


def test_a_partition_staged_through_the_door_restores_through_it_exactly(repo, tmp_path):
    db = Rdict(str(tmp_path / "db"))
    db["JFK"], db["EWR"] = 3, 1
    db.flush(True)
    staging.local_checkpoint(db, str(tmp_path / "ck"))  # the snapshot task's copy of batch 0
    db.close()
    snapshot = staging.stage_snapshot(repo, KEY, partition=0, batch_id=0, checkpoint_dir=str(tmp_path / "ck"),
                                      previous=None, ttl_ms=TTL)
    delta = staging.stage_changelog(repo, KEY, partition=0, batch_id=1, ttl_ms=TTL, data=changelog.encode(
        [(changelog.PUT, "JFK", 4), (changelog.DELETE, "EWR", None), (changelog.PUT, "LGA", 2)]))
    assert (snapshot.entry.kind, delta.kind) == (SNAPSHOT, DELTA) and snapshot.new_blob_ids
    assert not repo.log.history(KEY)  # staged, never committed: the driver's group record is the commit point
    with StoreCommitter(KEY, repo, store_type="rocksdb", work_dir=str(tmp_path / "driver"), ttl_ms=TTL) as owner:
        groups = GroupCommitter(owner, num_partitions=1)
        groups.commit([snapshot.entry], batch_id=0, new_blob_ids=snapshot.new_blob_ids)
        groups.commit([delta], batch_id=1)
    records = tuple(partition_history(repo.log.history(KEY), 0))

    result = staging.restore_partition(repo, chain_to(records, 1), str(tmp_path / "restored"),
                                       work_dir=str(tmp_path / "work"))
    assert result.deltas_applied == 1 and result.last_batch_id == 1
    with staging.entries.open_entries(str(tmp_path / "restored")) as items:
        assert dict(items) == {"JFK": 4, "LGA": 2}
    scratch = staging.restore_into(repo, chain_to(records, 0), str(tmp_path / "scratch"))  # state as data's
    with staging.entries.open_entries(scratch) as items:
        assert dict(items) == {"JFK": 3, "EWR": 1}
    changes = list(staging.read_changes(repo, [r for r in records if r.is_delta], 0))
    assert [(c.batch_id, c.op, c.key) for c in changes] == [(1, "put", "JFK"), (1, "delete", "EWR"), (1, "put", "LGA")]


def test_the_workers_repository_is_opened_once_per_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "_REPOS", {})
    url = f"file://{tmp_path}/repo"
    with pytest.raises(RepositoryNotFound):  # an empty location is never made a repository by a task
        staging.open_repository(url)
    staging.open_repository(url, create=True).close()
    staging.open_repository(f"{url}-2", create=True).close()
    settings = Settings()
    first = staging.worker_repository(url, None, None, settings)
    try:
        assert staging.worker_repository(url, None, {}, settings) is first  # the next task of this Python worker
        assert staging.worker_repository(f"{url}-2", None, None, settings) is not first
        assert len(staging._REPOS) == 2
        other = Settings.for_call(settings, retry_attempts=3)
        again = staging.worker_repository(url, None, None, other)  # the driver's settings changed: opened again
        assert again is not first and again.settings == other.on_executor()
        first.close()
    finally:
        for opened in staging._REPOS.values():
            opened.close()
