"""Bring partition ``p``'s copy on this executor to the committed state after batch ``b``: the warm task.

The driver runs it after a group record commits, off the batch's path, on each partition's standby executor
(``blobstate.spark.partitioned.driver.standbys``), so that the standby's copy stays a catch-up away from the
committed state; a decommission hand-over can run the same task to seed a copy at a new location. Task ``i`` of a
warm job (``warm_partition``), for the job's ``i``-th ``(partition, executor)``:

1. runs only on the executor it was meant for (``executor``; ``""``: anywhere): a task Spark put elsewhere (its
   executor busy past ``spark.locality.wait``, or gone) touches nothing and says so;
2. takes the partition's directory on this host (``LocalPartition``: the lock a batch task holds, waited for up to
   ``WARM_LOCK_WAIT_S``, then skipped) and brings the copy to batch ``b`` exactly as a batch task brings its own
   (``LocalPartition.ensure_at``: the copy plus the committed changelogs, downloaded and checked against their
   records, or, when the copy is missing, stale or off the chain, a verified restore). Only committed records are
   applied: the copy never stages, never answers a prepare and serves no read;
3. answers a ``WarmResult``: where the copy is, the batch and record it is at, whether it was restored and what
   was downloaded.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from blobstate.errors import CommitInProgressError
from blobstate.spark.executor.identity import task_identity
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.partition import LocalPartition
from blobstate.worker import worker_repository

WARM_LOCK_WAIT_S = 5.0  # a warm task never queues behind a batch task for long: the next commit asks again


@dataclass(frozen=True)
class WarmResult:
    """A warm task's answer: partition ``partition``'s copy on ``executor`` (where the task ran) is at batch
    ``batch_id``, record ``checkpoint_id``; ``restored``: it took a restore from the repository (a new or
    off-chain copy), else the committed changelogs were applied to it; ``files`` and ``bytes`` downloaded; ``ms``
    the whole task. ``skipped``: why nothing was done (``""``: done)."""

    partition: int
    executor: str
    batch_id: int | None
    checkpoint_id: str = ""
    restored: bool = False
    files: int = 0
    bytes: int = 0
    ms: float = 0.0
    skipped: str = ""


def warm_partition(plan: BatchPlan, partition: int, executor: str = "") -> WarmResult:
    """Steps 1-3 of the module docstring: partition ``partition``'s copy on this host brought to the state after
    ``plan.upto`` (None: the empty state before batch 0) of ``plan.records[partition]``, when this task runs on
    ``executor`` (``""``: wherever it runs). Raises what a restore raises (``IntegrityError``, ``BrokenChainError``)
    and ``StorageError``."""
    t0, task = time.perf_counter(), task_identity()
    if executor and task.executor != executor:
        return WarmResult(partition, task.executor, None, skipped=f"ran on {task.executor or 'an unknown executor'}, "
                          f"not on {executor}")
    repo = worker_repository(plan.repo, plan.log_url, plan.storage_options, plan.settings)
    try:
        with LocalPartition(plan.local_dir, plan.key, partition, wait_s=WARM_LOCK_WAIT_S) as local:
            fetched = local.ensure_at(repo, plan.records.get(partition, ()), plan.upto)
    except CommitInProgressError:
        return WarmResult(partition, task.executor, None, skipped="the partition stayed busy",
                          ms=(time.perf_counter() - t0) * 1000)
    return WarmResult(partition, task.executor, plan.upto, fetched.record, fetched.restored, fetched.files,
                      fetched.bytes, (time.perf_counter() - t0) * 1000)


def warm_task(plan: BatchPlan, targets: tuple[tuple[int, str], ...], index: int,
              rows: Iterable[Any]) -> Iterator[WarmResult]:
    """Task ``index`` of a warm job (``mapPartitionsWithIndex``): ``warm_partition`` for ``targets[index]``
    (``(partition, executor)``). ``rows`` are read to the end, unused: Spark reuses only a Python worker that read
    its input."""
    for _ in rows:
        pass
    partition, executor = targets[index]
    yield warm_partition(plan, partition, executor)


__all__ = ["WARM_LOCK_WAIT_S", "WarmResult", "warm_partition", "warm_task"]
