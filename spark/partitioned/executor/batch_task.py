"""The task of a partitioned micro-batch, on an executor: one Spark task per partition and batch. Spark-agnostic but
for the task context it reads.

Task ``p`` of batch ``b`` (``run_partition``), in the Python worker that runs it:

1. takes partition ``p``'s local directory under ``local_dir`` (a lock file: one attempt at a time on a host) and
   its RocksDB: kept open by this Python worker since its last task, or taken over from the process that has it
   open (``blobstate.spark.partitioned.executor.partition.LocalPartition``);
2. brings its RocksDB to the state after batch ``b - 1`` as the driver's committed records say
   (``LocalPartition.ensure_at``): the local copy is reused when its marker names a record of the chain, and the
   committed deltas after it are applied (each from the changelog this host kept when it wrote it, or downloaded,
   always checked against the record's size and CRC32C); otherwise (a wiped or moved partition, a divergent
   copy) it is restored from the repository (``blobstate.worker.restore_partition``: snapshot, then deltas);
3. runs ``update(db, rows, ctx)`` on ``blobstate.model.changelog.StagedWrites`` (a key-grouped store's through
   ``blobstate.spark.partitioned.executor.keygrouped.KeyGroupedWrites``: each key stored behind its key group):
   nothing reaches RocksDB;
4. uploads the batch's changelog with a TTL (``blobstate.worker.stage_changelog``) and keeps a copy;
5. returns one small ``Prepare`` record, with who ran it (the executor, Spark's task attempt id and stage attempt:
   ``blobstate.spark.executor.identity.TaskIdentity``). Nothing is applied locally yet: the driver may commit another
   attempt's part, or none. The next batch applies whichever part the group record committed (step 2).

Only committed records are ever applied to a local copy, so a retried, speculative or stale attempt never leaves
a trace in any state; its blob expires by its TTL. Applying a changelog twice gives the same state (each op sets a
key's final value or deletes it), so a crash between applying and writing the marker is harmless.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blobstate.config.settings import Settings
from blobstate.model import changelog
from blobstate.model.keygroups import key_group_range
from blobstate.model.layout import now_ms
from blobstate.model.records import Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.executor.identity import TaskIdentity, task_identity, task_partition
from blobstate.spark.executor.rows import arrow_rows, pickled_batch, takes_arrow
from blobstate.spark.partitioned.executor.keygrouped import KeyGroupedWrites
from blobstate.spark.partitioned.executor.partition import SNAPSHOT_PREFIX, Fetched, LocalPartition
from blobstate.worker import (
    StagedSnapshot,
    heal_parts,
    local_checkpoint,
    stage_changelog,
    stage_snapshot,
    worker_repository,
)

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionContext:
    """What ``update`` learns about its task: ``partition`` of ``num_partitions``, ``batch_id``, the Spark task
    ``attempt`` number (0 first; a re-run stage starts again at 0), the query id, and Spark's ``task_attempt_id``
    (unique within the SparkContext)."""

    partition: int
    num_partitions: int
    batch_id: int
    attempt: int
    query_id: str
    task_attempt_id: int = 0


@dataclass(frozen=True)
class BatchPlan:
    """What the driver sends every task of batch ``batch_id`` (picklable): the repository, the group's ``key``,
    ``local_dir``, the blob TTL ``ttl_ms``, the group generation ``base`` the driver will append after, the batch
    the state must be at (``upto``: ``batch_id - 1``, None for the first batch) and each partition's committed
    records (``records[p]``, group records expanded, by generation). ``fault_hook(stage, ctx)`` is called after
    the upload (stage ``"uploaded"``): fault injection for tests and drills. ``settings``: the driver's, which the
    tasks run with (``Settings.on_executor``), never their own environment's."""

    repo: str
    key: StoreKey
    local_dir: str
    num_partitions: int
    batch_id: int
    base: int
    upto: int | None
    records: dict[int, tuple[Checkpoint, ...]]
    query_id: str = ""
    log_url: str | None = None
    storage_options: dict[str, Any] | None = None
    ttl_ms: int = 0
    fault_hook: Callable[[str, PartitionContext], None] | None = None
    settings: Settings = field(default_factory=Settings)
    #: a key-grouped store's number of key groups (0: none), its key columns' Spark types, ``key_of`` and the route
    #: of each partition (``blobstate.spark.partitioned.driver.routing``)
    key_groups: int = 0
    key_types: tuple[str, ...] = ()
    key_of: Callable[[Any], Any] | None = None
    routes: tuple[int, ...] = ()
    #: the first batch of a restart with another number of partitions (``blobstate.model.regroup``): partition ->
    #: its ``PartitionRegroup`` (the old partitions' chains it starts from); its ``records`` are then empty
    regroup: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepare:
    """A task's answer: partition ``partition``'s part ``entry`` of batch ``batch_id``, written by ``attempt`` (the
    task's attempt number) on top of group generation ``base`` from the state after record ``state_record`` (``""``:
    empty). How it got there: ``restored`` (a restore from the repository, not the local copy), ``files_downloaded``,
    ``bytes_downloaded``, ``ms`` (the whole task). Who ran it: ``task`` (the executor, Spark's task attempt id, which
    ``entry.attempt`` records, and the stage attempt). ``local``: the copy on the task's host was current (nothing
    downloaded)."""

    partition: int
    batch_id: int
    attempt: int
    base: int
    entry: PartitionEntry
    created_ms: int
    state_record: str
    restored: bool
    files_downloaded: int
    bytes_downloaded: int
    ms: float
    task: TaskIdentity = TaskIdentity()
    #: the first batch after a rescale: the snapshot of the state the partition started from (batch ``upto``)
    snapshot: StagedSnapshot | None = None
    #: the first batch after a rescale: where its start went (ms): ``restore`` (the old partitions' chains
    #: downloaded and applied), ``cut`` (``delete_range``), ``ingest`` (the others' key groups taken in),
    #: ``snapshot`` (the copy checkpointed and uploaded as the snapshot of batch ``upto``)
    phases_ms: tuple[tuple[str, float], ...] = ()

    @property
    def local(self) -> bool:
        return not self.restored and self.files_downloaded == 0


Update = Callable[[changelog.StagedWrites, Iterable[Any], PartitionContext], None]


def run_partition(plan: BatchPlan, update: Update, partition: int, rows: Iterable[Any]) -> Iterator[Prepare]:
    """Steps 1-5 of the module docstring for ``partition`` (``mapPartitionsWithIndex``); yields one ``Prepare``.

    Raises what the restore raises (``IntegrityError``, ``BrokenChainError``), the user function's error (nothing
    uploaded), ``StorageError`` from the upload, ``CommitInProgressError`` when another attempt holds the partition.
    """
    t0, created = time.perf_counter(), now_ms()  # the TTL budget of everything this task uploads counts from here
    task = task_identity()
    ctx = PartitionContext(partition, plan.num_partitions, plan.batch_id, task.attempt, plan.query_id,
                           task.task_attempt_id)
    repo = worker_repository(plan.repo, plan.log_url, plan.storage_options, plan.settings)
    with LocalPartition(plan.local_dir, plan.key, partition) as local:
        # the committed changelogs this host kept, put back when a late group's gc took them (issue 27 case 2)
        heal_parts(repo, plan.records.get(partition, ()), local.kept, ttl_ms=plan.ttl_ms)
        phases: tuple[tuple[str, float], ...] = ()
        if partition in plan.regroup:  # the first batch after a rescale: built from the old partitions' chains
            fetched, snapshot, phases = start_regrouped(repo, plan, local, plan.regroup[partition],
                                                        task.task_attempt_id)
        else:
            fetched, snapshot = local.ensure_at(repo, plan.records.get(partition, ()), plan.upto), None
        view: Any = changelog.StagedWrites(local.open_db())
        if plan.key_groups:
            view = KeyGroupedWrites(view, key_groups=plan.key_groups, key_types=plan.key_types, key_of=plan.key_of,
                                    keep=key_group_range(plan.key_groups, plan.num_partitions, partition))
        update(view, rows, ctx)
        ops = view.ops()
        data = changelog.encode(ops)
        entry = stage_changelog(repo, plan.key, partition=partition, batch_id=plan.batch_id, data=data,
                                ttl_ms=plan.ttl_ms, attempt=task.task_attempt_id, base=plan.base)
        local.keep(entry, data)
        local.owned.stage(entry.checkpoint_id, ops)
    if plan.fault_hook is not None:
        plan.fault_hook("uploaded", ctx)
    yield Prepare(partition, plan.batch_id, ctx.attempt, plan.base, entry, created, fetched.record,
                  fetched.restored, fetched.files, fetched.bytes, (time.perf_counter() - t0) * 1000, task, snapshot,
                  phases)


def start_regrouped(repo: Any, plan: BatchPlan, local: LocalPartition, regroup: Any,
                    attempt: int) -> tuple[Fetched, StagedSnapshot, tuple[tuple[str, float], ...]]:
    """A new partition's copy after a rescale at restart: built from the old partitions' chains
    (``keygroup_cut.restore_regrouped``: its base restored and cut, the others' key groups ingested), then staged as
    a snapshot of the batch it is at (``plan.upto``), committed with this batch's group record, so the new
    partitioning's records make every later state on their own. The copy is marked at that snapshot. Returns
    ``Prepare.phases_ms`` besides."""
    from blobstate.spark.partitioned.executor.keygroup_cut import restore_regrouped

    local.close_db()
    local.owned.set_marker(None)
    shutil.rmtree(local.db_path, ignore_errors=True)
    scratch = os.path.join(local.path, "regroup-work")
    built = restore_regrouped(repo, regroup, plan.key_groups, local.db_path, scratch_dir=scratch)
    t0 = time.perf_counter()
    target = os.path.join(local.path, f"{SNAPSHOT_PREFIX}regroup-{attempt}")
    shutil.rmtree(target, ignore_errors=True)
    try:
        local_checkpoint(local.open_db(), target, settings=repo.settings)
        staged = stage_snapshot(repo, plan.key, partition=regroup.partition, batch_id=plan.upto,
                                checkpoint_dir=target, previous=None, ttl_ms=plan.ttl_ms, attempt=attempt,
                                base=plan.base)
    finally:
        shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    local.owned.set_marker({"checkpointId": staged.entry.checkpoint_id, "batchId": plan.upto})
    log.info("partition %s built from old partitions %s (%s entries taken in)", regroup.partition, built.sources,
             built.taken)
    phases = (("restore", built.restore_ms), ("cut", built.cut_ms), ("ingest", built.take_ms),
              ("snapshot", (time.perf_counter() - t0) * 1000))
    return Fetched(record=staged.entry.checkpoint_id, restored=True), staged, tuple((k, round(v, 1)) for k, v in phases)


def arrow_task(plan: BatchPlan, update: Update, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The task of the DataFrame path (``mapInArrow``, ``blobstate.spark.partitioned.driver.job``): partition
    ``TaskContext.partitionId()``'s rows through ``update`` (as ``Row``s; as the record batches themselves for an
    update marked by ``blobstate.spark.executor.rows.arrow_input``), its ``Prepare`` back as one pickled row."""
    rows = batches if takes_arrow(update) else arrow_rows(batches)
    for prepare in run_partition(plan, update, task_partition(), rows):
        yield pickled_batch(prepare)


__all__ = ["BatchPlan", "PartitionContext", "Prepare", "Update", "arrow_task", "run_partition"]
