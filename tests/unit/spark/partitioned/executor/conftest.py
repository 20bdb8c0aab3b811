"""A partitioned store's executors without Spark: a ``file://`` repository, the tasks called in this process (as
``tests/project/test_architecture.py`` does), the driver's group commit of what they staged; every database this
process keeps open and every worker repository closed after each test."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from blobstate import worker as staging
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model.chain import partition_history
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.spark.executor import open_partitions
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, Prepare, run_partition

KEY = StoreKey("flights", "group", "routes")
TTL = 3_600_000


class Group:
    """N partitions of ``KEY`` in ``repo_url``: ``run(batch, rows)`` runs every partition's task of ``batch`` on the
    committed records with the executors' disks at ``local_dir``, then commits their prepares as the driver does."""

    def __init__(self, repo_url: str, local_dir: str, driver_dir: str, partitions: int = 2) -> None:
        self.repo_url, self.local_dir, self.driver_dir, self.partitions = repo_url, local_dir, driver_dir, partitions
        self.repo = staging.open_repository(repo_url, create=True)

    def plan(self, batch: int, upto: int | None) -> BatchPlan:
        history = self.repo.log.history(KEY)
        return BatchPlan(self.repo_url, KEY, self.local_dir, self.partitions, batch,
                         history[-1].generation if history else 0, upto,
                         {p: tuple(partition_history(history, p)) for p in range(self.partitions)}, "q-1",
                         ttl_ms=TTL)

    def tasks(self, batch: int, rows: dict[int, Iterable[tuple[str, int]]],
              only: Iterable[int] | None = None) -> list[Prepare]:
        """The tasks of ``batch`` (of the partitions ``only`` names; default every one): their prepares."""
        plan = self.plan(batch, batch - 1 if batch else None)

        def update(db, batch_rows, ctx):  # noqa: ANN001, ANN202 - the partitioned update function's shape
            for origin, n in batch_rows:
                db[origin] = n

        return [prepare for p in (range(self.partitions) if only is None else only)
                for prepare in run_partition(plan, update, p, rows.get(p, ()))]

    def commit(self, batch: int, prepares: list[Prepare], extra: list | None = None) -> Checkpoint:
        with StoreCommitter(KEY, self.repo, store_type="rocksdb", work_dir=self.driver_dir, ttl_ms=TTL) as owner:
            return GroupCommitter(owner, num_partitions=self.partitions).commit(
                [p.entry for p in prepares] + [s.entry for s in extra or []], batch_id=batch, query_id="q-1",
                created_ms=min(p.created_ms for p in prepares),
                new_blob_ids=[b for s in extra or [] for b in s.new_blob_ids])

    def run(self, batch: int, rows: dict[int, Iterable[tuple[str, int]]]) -> list[Prepare]:
        prepares = self.tasks(batch, rows)
        self.commit(batch, prepares)
        return prepares


@pytest.fixture
def group(tmp_path, monkeypatch):
    monkeypatch.setattr(staging, "_REPOS", {})
    made = Group(f"file://{tmp_path}/repo", str(tmp_path / "executors"), str(tmp_path / "driver"))
    yield made
    open_partitions.close_all()
    for repo in [*staging._REPOS.values(), made.repo]:
        repo.close()
