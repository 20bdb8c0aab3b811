"""The batch side of the binding: where the store lives and every micro-batch is committed.

It runs in the process that runs ``foreachBatch``: the driver (classic PySpark) or, under Spark Connect, the
server's Python worker the function is pickled to (it pickles as configuration only and opens there on the first
batch). Per micro-batch ``b``:

1. Spark committed ``b - 1`` before it planned ``b``: tell the snapshot scheduler; raise an earlier snapshot
   failure; check that the store holds exactly batch ``b - 1`` (a restart restored it);
2. the user's ``fn(df, b, state)`` reads and writes ``state`` (``blobstate.model.changelog.StagedWrites``): the store
   itself is untouched, so a batch that raises leaves no partial writes and Spark's retry runs on clean state;
3. the delta commit (``blobstate.commit.delta``): the batch's writes as one changelog blob and one delta record
   at the checkpoint log. This is the point of no return, before ``foreachBatch`` returns, so Spark's
   ``commits/b`` only ever exists once batch ``b``'s change is durable;
4. the writes applied to RocksDB in one ``WriteBatch``; the scheduler told.

Snapshots run in the background (``blobstate.spark.binding.scheduler``): the local checkpoint (hard links) is taken
under the same lock as step 3-4, so it holds exactly one batch, and committed as a snapshot record with that batch id.
On open the engine recovers the store's journal, aligns with Spark's checkpoint location
(``blobstate.spark.committed.alignment``) and restores the chain (``blobstate.restoring.chain``) into ``state_dir``.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blobstate.commit.backup import BackupResult, StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.opening import open_store
from blobstate.config.options import redact
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, RepositoryNotFound
from blobstate.model import changelog
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.restoring import chain as replay
from blobstate.spark.binding.scheduler import SnapshotScheduler
from blobstate.spark.committed.alignment import AlignmentPlan, plan_alignment, spark_done
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.errors import SparkAlignmentError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from rocksdict import Rdict

log = logging.getLogger(__name__)

KEEP_STATS = 10_000  # batches whose statistics are kept (the newest)

BatchFunction = Callable[["DataFrame", int, changelog.StagedWrites], None]


@dataclass
class EngineConfig:
    """Everything the engine needs, picklable: the repository (``repo``, ``log_url``, ``storage_options``), the
    store (``key``, ``state_dir``, ``work_dir``), Spark's ``checkpoint_location``, the retention ``retain``
    (snapshots, >= 2), the blob TTL ``ttl_ms``, a snapshot every ``snapshot_every`` batches, ``fn``, and the
    ``settings`` the engine runs with."""

    repo: str
    checkpoint_location: str
    state_dir: str
    key: StoreKey
    fn: BatchFunction | None = None
    log_url: str | None = None
    work_dir: str | None = None
    storage_options: dict[str, Any] | None = None
    retain: int = 3
    ttl_ms: int = DEFAULT_TTL_MS
    snapshot_every: int = 1
    committer_options: dict[str, Any] = field(default_factory=dict)
    settings: Settings = field(default_factory=Settings)


def open_repository(config: EngineConfig, *, create: bool, query_id: str | None,
                    last_committed: int | None) -> Repository:
    """The repository of ``config``; an empty location becomes one only with ``create`` (Spark committed nothing
    yet): otherwise ``SparkAlignmentError`` (nothing is created)."""
    try:
        return Repository.open(config.repo, log=config.log_url, storage_options=config.storage_options,
                               create=create, settings=config.settings)
    except RepositoryNotFound:  # Spark committed batches whose state this location never held
        plan_alignment([], config.key, last_committed=last_committed, query_id=query_id,
                       location=config.checkpoint_location, repo_url=config.repo)
        raise


@dataclass
class BatchStats:
    """Per committed batch: the delta commit (ms), the apply (ms), bytes, and the snapshot lag after it."""

    batch_id: int
    delta_ms: float
    apply_ms: float
    changelog_bytes: int
    snapshot_lag: int


class BatchEngine:
    """The store, its committers and its snapshot scheduler, in the process that runs the batches.

    ``open(spark)`` raises ``SparkAlignmentError`` (nothing changed), or what recovery and restore raise; a batch
    raises the user function's error (nothing applied), the delta commit's (``StorageError``, ``FencedError``),
    a ``SnapshotCommitError`` from the background, or ``SparkAlignmentError`` when Spark runs a batch the store is
    not at.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.query_id: str | None = None
        self._reset()

    def _reset(self) -> None:
        self.plan: AlignmentPlan | None = None
        self.restore_ms = 0.0
        self.applied: int | None = None
        self.stats: deque[BatchStats] = deque(maxlen=KEEP_STATS)
        self._lock = threading.Lock()  # one batch's commit+apply, or one snapshot's local checkpoint
        self._repo: Repository | None = None
        self._committer: StoreCommitter | None = None
        self._delta: DeltaCommitter | None = None
        self._db: Rdict | None = None
        self.scheduler: SnapshotScheduler[BackupResult] | None = None
        self._broken: BaseException | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"config": self.config, "query_id": self.query_id}  # configuration only: it opens where it runs

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.config = state["config"]
        self.query_id = state["query_id"]
        self._reset()

    @property
    def broken(self) -> BaseException | None:
        """The failure that stopped this engine (``FencedError``: another writer took the store key), or None."""
        return self._broken

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def db(self) -> Rdict:
        if self._db is None:
            raise ConfigurationError("the blobstate engine is not open in this process")
        return self._db

    # -- open ------------------------------------------------------------------------------------------------
    def open(self, spark: Any) -> AlignmentPlan:
        """Recover, align with Spark's checkpoint location, restore ``state_dir``, open the store."""
        c = self.config
        t0 = time.perf_counter()
        location = CheckpointLocation(spark, c.checkpoint_location)
        self.query_id = location.query_id()
        last, planned = location.last_committed(), location.last_planned()
        self._repo = open_repository(c, create=spark_done(last, planned) is None, query_id=self.query_id,
                                     last_committed=last)
        try:
            # the Open door: the journal recovered, the view pinned, then the plan from exactly that view: a later
            # append by another writer (a second query on the key) fences this one's first append (issue 27, case
            # 10; issue 39, case 5)
            align = functools.partial(plan_alignment, key=c.key, last_committed=last, query_id=self.query_id,
                                      location=c.checkpoint_location, repo_url=c.repo, last_planned=planned)
            opened = open_store(c.key, self._repo, align, committer=lambda: StoreCommitter(
                c.key, self._repo, store_type="rocksdb", work_dir=c.work_dir, retain=c.retain, ttl_ms=c.ttl_ms,
                **c.committer_options))
            self._committer, plan = opened.committer, opened.plan
            self._committer.commit_point.fields["lineage_id"] = plan.lineage_id  # this run's records
            log.info("%s: %s", c.key, plan.describe())
            if plan.chain is not None:
                replay.restore_chain(self._repo, plan.chain, c.state_dir,
                                     local_store=open_local_store("rocksdb", settings=c.settings),
                                     store_type="rocksdb", work_dir=self._committer.work_dir, force=True)
            else:
                shutil.rmtree(c.state_dir, ignore_errors=True)
                os.makedirs(c.state_dir)
            from rocksdict import Rdict

            self._db = Rdict(c.state_dir)
        except BaseException:
            self.close(drain=False)
            raise
        self.restore_ms = (time.perf_counter() - t0) * 1000
        self.plan = plan
        self.applied = plan.restored_batch
        self._delta = DeltaCommitter(self._committer)
        self.scheduler = SnapshotScheduler(self._snapshot, batch_of=lambda r: r.checkpoint.batch_id or 0,
                                           every=c.snapshot_every, name=f"blobstate-snapshot-{c.key.store}",
                                           describe_error=self._describe_failure)
        self.scheduler.start_from(plan.snapshot_batch if plan.snapshot_batch is not None else None)
        if self.applied is not None:
            self.scheduler.applied(self.applied)
            self.scheduler.committed(self.applied)
        return plan

    # -- a micro-batch ---------------------------------------------------------------------------------------
    def run_batch(self, df: DataFrame, batch_id: int) -> None:
        """The ``foreachBatch`` function: steps 1-4 of the module docstring."""
        if self._broken is not None:
            raise ConfigurationError(f"the blobstate engine of {self.config.key} stopped after an earlier failure "
                                     f"({type(self._broken).__name__}); restart the query") from self._broken
        if not self.is_open:
            self.open(df.sparkSession)  # Spark Connect: the first batch in the server's Python worker
        assert self.scheduler is not None and self._delta is not None and self.config.fn is not None
        if batch_id > 0:
            self.scheduler.committed(batch_id - 1)
        self.scheduler.raise_if_failed()
        expected = 0 if self.applied is None else self.applied + 1
        if batch_id != expected:
            raise SparkAlignmentError(f"Spark runs batch {batch_id}, but the store of {self.config.key} holds the "
                                      f"state after batch {self.applied}: refusing to apply it twice or skip one")
        if self.query_id is None:
            self.query_id = CheckpointLocation(df.sparkSession, self.config.checkpoint_location).query_id() or ""
        state = changelog.StagedWrites(self.db)
        self.config.fn(df, batch_id, state)  # raises: nothing staged reaches the store
        ops = state.ops()
        data = changelog.encode(ops)
        with self._lock:
            try:
                result = self._delta.commit_changelog(data, batch_id=batch_id, query_id=self.query_id)
            except BaseException as exc:
                self._broken = exc  # a later batch must not run on a store whose last delta is uncertain
                raise
            t0 = time.perf_counter()
            try:
                changelog.apply_ops(self.db, ops)
            except BaseException as exc:
                self._broken = exc  # committed but not applied: only a restart (restore) is right now
                raise
            self.applied = batch_id
            self.scheduler.applied(batch_id)
        self.stats.append(BatchStats(batch_id, result.duration_ms, (time.perf_counter() - t0) * 1000,
                                     result.bytes_uploaded, self.scheduler.lag))

    def spark_committed(self, batch_id: int) -> None:
        """Spark committed ``batch_id`` (the listener): a snapshot of it may be due."""
        if self.scheduler is not None:
            self.scheduler.committed(batch_id)

    # -- snapshots (the scheduler's thread) ------------------------------------------------------------------
    def _snapshot(self, batch_id: int) -> BackupResult | None:
        assert self._committer is not None
        with self._lock:
            if self.applied != batch_id or self._db is None:
                return None  # a later batch got there first: the next trigger catches up
            local = self._committer.checkpoint(self._db, batch_id=batch_id, query_id=self.query_id or "")
        return self._committer.upload(local)

    def _describe_failure(self, batch_id: int, exc: BaseException) -> str:
        return (f"blobstate could not commit the snapshot of batch {batch_id} of {self.config.key} to "
                f"{redact(self.config.repo)}: {type(exc).__name__}: {redact(str(exc))}. The deltas of every batch "
                "are committed: a restart restores the previous snapshot and the deltas after it.")

    # -- close -----------------------------------------------------------------------------------------------
    def close(self, *, drain: bool = True, timeout_s: float | None = None) -> None:
        """Drain (with ``drain``: the snapshot due for the last committed batch) and release everything. Raises the
        first snapshot failure not raised before."""
        try:
            if self.scheduler is not None:
                self.scheduler.close(drain=drain, timeout_s=timeout_s)
        finally:
            if self._committer is not None:
                self._committer.close()
                self._committer = None
            with self._lock:
                if self._db is not None:
                    self._db.close()
                    self._db = None
            if self._repo is not None:
                self._repo.close()
                self._repo = None
