"""A partition's snapshot task, on an executor: the partition's RocksDB local checkpoint staged as a snapshot part,
off the batch's path (the driver asks for it and commits it: ``blobstate.spark.partitioned.driver.snapshots``).

Task ``p`` of a snapshot job (``snapshot_partition``):

1. takes partition ``p``'s local directory (the lock a batch task holds while it runs; waited for up to
   ``SNAPSHOT_LOCK_WAIT_S``, then the partition is skipped);
2. brings the local copy to the state after ``b`` from what the host has alone (``LocalPartition.advance_locally``:
   the changelog of ``b`` it kept when it wrote it): a copy that is missing (the partition ran on another host),
   already past ``b`` or off the chain is skipped, never downloaded: a snapshot is an optimisation, the deltas
   stay restorable;
3. takes the RocksDB local checkpoint (``blobstate.worker.local_checkpoint``: hard links, milliseconds; a
   directory held by its own lock until it is removed, ``blobstate.spark.executor.leftovers``: the checkpoint of a
   task killed with its driver is swept by the next task that opens the partition on that host) and lets go of the
   partition's lock: the next batch's task can run while
4. the checkpoint's new files and its snapshot index are uploaded with a TTL
   (``blobstate.worker.stage_snapshot``, diffed against the partition's newest committed snapshot);
5. the task returns a ``SnapshotResult``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from blobstate.errors import CommitInProgressError
from blobstate.model.layout import now_ms
from blobstate.spark.executor.identity import task_identity, task_partition
from blobstate.spark.executor.leftovers import held_dir
from blobstate.spark.executor.rows import pickled_batch
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.partition import SNAPSHOT_PREFIX, LocalPartition
from blobstate.worker import StagedSnapshot, local_checkpoint, stage_snapshot, worker_repository

SNAPSHOT_LOCK_WAIT_S = 30.0  # how long a snapshot task waits for the batch task holding its partition


@dataclass(frozen=True)
class SnapshotResult:
    """A snapshot task's answer: partition ``partition``'s ``staged`` snapshot of batch ``batch_id`` uploaded from
    ``created_ms`` on (epoch ms), or None and the ``skipped`` reason; ``executor``: where the task ran (``""``:
    unknown), ``ms``: how long (the partition held ``held_ms`` of it)."""

    partition: int
    batch_id: int
    created_ms: int
    staged: StagedSnapshot | None
    skipped: str = ""
    executor: str = ""
    ms: float = 0.0
    held_ms: float = 0.0


def snapshot_partition(plan: BatchPlan, partition: int, rows: Iterable[Any]) -> Iterator[SnapshotResult]:
    """Steps 1-5 of the module docstring for ``partition`` (``mapPartitionsWithIndex``; ``rows`` read to the end,
    unused: a Python worker whose input was not read is not reused by Spark): the
    snapshot of the state after ``plan.batch_id`` (``plan.upto`` is that batch too; ``plan.base``: the generation
    the snapshot was asked at). Yields one ``SnapshotResult``. Raises ``StorageError`` from the upload (Spark
    retries the task)."""
    t0, created, task = time.perf_counter(), now_ms(), task_identity()
    for _ in rows:
        pass
    repo = worker_repository(plan.repo, plan.log_url, plan.storage_options, plan.settings)
    local = LocalPartition(plan.local_dir, plan.key, partition, wait_s=SNAPSHOT_LOCK_WAIT_S)
    target = os.path.join(local.path, f"{SNAPSHOT_PREFIX}{plan.batch_id}-{task.task_attempt_id}")

    def result(staged: StagedSnapshot | None, skipped: str = "", held_ms: float = 0.0) -> SnapshotResult:
        return SnapshotResult(partition, plan.batch_id, created, staged, skipped, task.executor,
                              (time.perf_counter() - t0) * 1000, held_ms)

    with contextlib.ExitStack() as held:
        try:
            with local:  # sweeps the partition's leftovers of snapshot tasks that died
                t1 = time.perf_counter()
                fetched = local.advance_locally(repo, plan.records.get(partition, ()), plan.batch_id)
                if fetched is None:
                    yield result(None, "no local copy at this batch")
                    return
                held.enter_context(held_dir(target))  # held until it is removed, beyond the partition's lock
                shutil.rmtree(target, ignore_errors=True)
                local_checkpoint(local.open_db(), target, settings=repo.settings)
                held_ms = (time.perf_counter() - t1) * 1000
        except CommitInProgressError:
            yield result(None, "the partition stayed busy")
            return
        staged = stage_snapshot(repo, plan.key, partition=partition, batch_id=plan.batch_id, checkpoint_dir=target,
                                previous=fetched.snapshot, ttl_ms=plan.ttl_ms, attempt=task.task_attempt_id,
                                base=plan.base)
    yield result(staged, held_ms=held_ms)


def arrow_snapshot_task(plan: BatchPlan, batches: Iterator[Any]) -> Iterator[Any]:
    """A snapshot task of the DataFrame path (``mapInArrow``): partition ``TaskContext.partitionId()``, its
    ``SnapshotResult`` back as one pickled row."""
    for _ in batches:  # one row, unused: read to the end
        pass
    for result in snapshot_partition(plan, task_partition(), ()):
        yield pickled_batch(result)


__all__ = ["SNAPSHOT_LOCK_WAIT_S", "SnapshotResult", "arrow_snapshot_task", "snapshot_partition"]
