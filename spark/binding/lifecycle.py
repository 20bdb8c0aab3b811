"""The Spark lifecycle of a binding: register, start one query, listen, close. The batches run in the engine.

``register(spark, repo=..., checkpoint_location=..., state_dir=...)`` builds a ``StateBinding``; ``binding.start(writer,
fn)`` starts exactly one query with ``foreachBatch`` running ``fn(df, batch_id, state)`` through the engine
(``blobstate.spark.binding.engine``: every batch's writes are a committed delta before ``foreachBatch`` returns);
``binding.close()`` drains the background snapshot and releases everything.

Classic PySpark: the engine lives in this (the driver) process; ``register`` opens it at once (recovery, alignment with
Spark's checkpoint location, restore: errors surface before the query starts), and a ``StreamingQueryListener``
(``blobstate.spark.committed.listener``) turns Spark's batch completions of this query's run into snapshot commits in
the background.

Spark Connect (``SparkSession.builder.remote(...)``): ``foreachBatch`` runs in a Python worker of the Connect server,
so the engine is pickled there as configuration and opens on the first batch, in that process (``state_dir`` and
``work_dir`` are paths on the server's host: the same host for a local server). ``register`` checks the alignment
from the client first (nothing restored here). The client-side listener cannot reach that worker, so under Connect
the snapshot of batch ``b`` is triggered when batch ``b + 1`` starts (Spark committed ``b`` before planning it),
and what the worker holds is not visible here: ``db``, ``wait_snapshot``, ``pause_snapshots`` and the statistics
refuse with ``ConfigurationError``, and ``close`` cannot drain the worker's snapshot (deltas are committed anyway;
the next start recovers the cut snapshot commit).
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from blobstate.commit.backup import BackupResult
from blobstate.config.settings import Settings
from blobstate.config.units import parse_duration_ms
from blobstate.errors import ConfigurationError
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import StoreKey
from blobstate.spark.binding.engine import BatchEngine, BatchFunction, BatchStats, EngineConfig, open_repository
from blobstate.spark.committed.alignment import AlignmentPlan, plan_alignment, spark_done
from blobstate.spark.committed.location import CheckpointLocation, is_connect
from blobstate.spark.errors import SnapshotCommitError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
    from rocksdict import Rdict

    from blobstate.config.units import Duration

log = logging.getLogger(__name__)


class StateBinding:
    """One Spark query's RocksDB store, every micro-batch committed to ``repo`` (see the module docstring).

    ``checkpoint_location``: the query's Spark checkpoint location (as given to Spark: any Hadoop path);
    ``state_dir``: the local RocksDB directory (restored on open); ``key``: the store key (default
    ``job/task/store``); ``log``: a checkpoint log other than the repository's; ``work_dir``: blobstate's journal
    and local checkpoints (default under ``BLOBSTATE_WORK_DIR``); ``retain``: snapshots kept (>= 2), with the deltas
    after the oldest of them; ``snapshot_every``: a snapshot every K batches (default 1); ``ttl``: TTL of blobs
    until their commit completes (ms, a ``timedelta`` or a string such as ``"12h"``); ``committer_options``:
    ``StoreCommitter``'s tuning keywords; ``settings``: what the binding runs with (default: the environment's,
    ``blobstate.config.settings.Settings.for_call``). Raises ``ConfigurationError`` for a bad value.
    """

    def __init__(self, spark: SparkSession, *, repo: str, checkpoint_location: str, state_dir: str,
                 job: str = "default", task: str = "0", store: str = "state", key: StoreKey | None = None,
                 log: str | None = None, work_dir: str | None = None,
                 storage_options: dict[str, Any] | None = None, retain: int = 3, ttl: Duration = DEFAULT_TTL_MS,
                 snapshot_every: int = 1, committer_options: dict[str, Any] | None = None,
                 settings: Settings | None = None) -> None:
        if retain < 2:
            raise ConfigurationError("retain must be >= 2: a restart may need the snapshot before the newest")
        if snapshot_every < 1:
            raise ConfigurationError("snapshot_every must be >= 1")
        self.spark = spark
        self.connect = is_connect(spark)
        key = key or StoreKey(job, task, store)
        self.config = EngineConfig(repo=repo, checkpoint_location=checkpoint_location,
                                   state_dir=os.path.abspath(state_dir), key=key, log_url=log,
                                   work_dir=work_dir, storage_options=storage_options, retain=retain,
                                   ttl_ms=parse_duration_ms(ttl),
                                   snapshot_every=snapshot_every, committer_options=dict(committer_options or {}),
                                   settings=Settings.for_call(settings))
        self.engine = BatchEngine(self.config)
        self.plan: AlignmentPlan | None = None
        self._listener: Any = None
        self._query: StreamingQuery | None = None
        self._run_id: str | None = None

    @property
    def key(self) -> StoreKey:
        return self.config.key

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def open(self) -> AlignmentPlan:
        """Classic: recover, align, restore and open the store, add the listener. Connect: check the alignment.

        Raises ``SparkAlignmentError`` (nothing changed), ``IntegrityError`` / ``StorageError`` from the restore.
        """
        if self.connect:
            self.plan = self._check_alignment()
            return self.plan
        from blobstate.spark.committed.listener import CommitListener

        self.plan = self.engine.open(self.spark)
        self._listener = CommitListener(self)
        self.spark.streams.addListener(self._listener)
        return self.plan

    def _check_alignment(self) -> AlignmentPlan:
        c = self.config
        location = CheckpointLocation(self.spark, c.checkpoint_location)
        query_id, last, planned = location.query_id(), location.last_committed(), location.last_planned()
        repo = open_repository(c, create=spark_done(last, planned) is None, query_id=query_id, last_committed=last)
        try:
            return plan_alignment(repo.log.history(c.key), c.key, last_committed=last, query_id=query_id,
                                  location=c.checkpoint_location, repo_url=c.repo, last_planned=planned)
        finally:
            repo.close()

    def foreach_batch(self, fn: BatchFunction) -> Any:
        """The ``foreachBatch`` function that runs ``fn(df, batch_id, state)`` through the engine; once."""
        if self.config.fn is not None:
            raise ConfigurationError(f"the binding of {self.key} runs one query: create another binding (another "
                                     "store key) for another query")
        self.config.fn = fn
        return self.engine.run_batch

    def start(self, writer: DataStreamWriter, fn: BatchFunction, *, query_name: str | None = None) -> StreamingQuery:
        """Start ``writer`` with ``foreachBatch`` on this binding's checkpoint location and bind the query.

        Raises ``ConfigurationError`` when this binding already runs a query (one query per binding).
        """
        run = self.foreach_batch(fn)
        writer = writer.foreachBatch(run).option("checkpointLocation", self.config.checkpoint_location)
        if query_name:
            writer = writer.queryName(query_name)
        query = writer.start()
        self.bind_query(query)
        return query

    def bind_query(self, query: StreamingQuery) -> None:
        """Only progress events of ``query``'s current run trigger snapshots."""
        if self._query is not None and str(self._query.id) != str(query.id):
            raise ConfigurationError(f"the binding of {self.key} is bound to query {self._query.id} already")
        self._query = query
        self._run_id = str(query.runId)
        if not self.connect and self.engine.query_id is None:
            self.engine.query_id = str(query.id)

    # -- listener target ---------------------------------------------------------------------------------------
    def on_batch_committed(self, run_id: str, batch_id: int) -> None:
        """Spark completed ``batch_id`` of run ``run_id`` (listener thread): another run's events are ignored."""
        if self._run_id is not None and run_id == self._run_id:
            self.engine.spark_committed(batch_id)

    def on_listener_error(self, exc: BaseException) -> None:
        log.error("blobstate's Spark listener failed: %s", exc)

    # -- what the engine holds (classic only) ------------------------------------------------------------------
    def _local(self, what: str) -> BatchEngine:
        if self.connect:
            raise ConfigurationError(f"{what} is not available under Spark Connect: the store lives in the "
                                     "server's Python worker, not in this process")
        return self.engine

    @property
    def db(self) -> Rdict:
        """The open RocksDB store (read it; write through ``fn``'s ``state``)."""
        return self._local("the store").db

    @property
    def restore_ms(self) -> float:
        return self._local("restore_ms").restore_ms

    @property
    def batch_stats(self) -> list[BatchStats]:
        """Per batch: delta commit and apply times (ms), changelog bytes, snapshot lag."""
        return list(self._local("batch_stats").stats)

    @property
    def snapshots(self) -> list[BackupResult]:
        """The snapshots this binding committed, in order."""
        scheduler = self._local("snapshots").scheduler
        return list(scheduler.results) if scheduler is not None else []

    def snapshot_batches(self) -> list[int | None]:
        return [r.checkpoint.batch_id for r in self.snapshots]

    def wait_snapshot(self, batch_id: int, timeout_s: float = 600.0) -> BackupResult:
        """Block until a snapshot covering ``batch_id`` or later is committed. Raises ``SnapshotCommitError``,
        ``TimeoutError``."""
        scheduler = self._local("wait_snapshot").scheduler
        if scheduler is None:
            raise ConfigurationError("the binding is not open")
        scheduler.committed(batch_id)  # Spark did, if the caller waits for it; the listener may be late
        return scheduler.wait_for(batch_id, timeout_s)

    def pause_snapshots(self) -> None:
        """Hold snapshot commits (a lagging listener); deltas go on. ``resume_snapshots`` undoes it."""
        scheduler = self._local("pause_snapshots").scheduler
        if scheduler is not None:
            scheduler.pause()

    def resume_snapshots(self) -> None:
        scheduler = self._local("resume_snapshots").scheduler
        if scheduler is not None:
            scheduler.resume()

    def raise_if_failed(self) -> None:
        """Raise a background snapshot failure (``SnapshotCommitError``), once it happened."""
        scheduler = self._local("raise_if_failed").scheduler
        if scheduler is not None:
            scheduler.raise_if_failed()

    # -- shutdown ----------------------------------------------------------------------------------------------
    def close(self, *, drain: bool = True, timeout_s: float | None = 600.0) -> None:
        """Stop the bound query if it is active, snapshot the last batch Spark committed (``drain``), remove the
        listener, close the store. Raises a snapshot failure not raised before, or ``TimeoutError``."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        try:
            if drain and not self.connect and self.engine.is_open:
                last = CheckpointLocation(self.spark, self.config.checkpoint_location).last_committed()
                if last is not None:
                    self.engine.spark_committed(last)
            if not self.connect:
                self.engine.close(drain=drain, timeout_s=timeout_s)
        finally:
            self._release_listener()

    def abandon(self) -> None:
        """Stop as a crashed driver would, in this process: the query stopped, no further snapshot (one in flight
        finishes: threads cannot be killed), everything released. Tests and demos; a real crash is a SIGKILL."""
        if self._query is not None and self._query.isActive:
            self._query.stop()
        try:
            if not self.connect:
                if self.engine.scheduler is not None:
                    self.engine.scheduler.pause()
                try:
                    self.engine.close(drain=False)
                except SnapshotCommitError as exc:  # a crash reports nothing either; the deltas are committed
                    log.warning("abandoned with a failed snapshot: %s", exc)
        finally:
            self._release_listener()

    def _release_listener(self) -> None:
        if self._listener is not None:
            try:
                self.spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001 - the session may be gone already
                log.debug("removeListener failed", exc_info=True)
            self._listener = None

    def __enter__(self) -> StateBinding:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register(spark: SparkSession, *, repo: str, checkpoint_location: str, state_dir: str, job: str = "default",
             task: str = "0", store: str = "state", key: StoreKey | None = None, log: str | None = None,
             work_dir: str | None = None, storage_options: dict[str, Any] | None = None, retain: int = 3,
             ttl: Duration = DEFAULT_TTL_MS, snapshot_every: int = 1,
             committer_options: dict[str, Any] | None = None, settings: Settings | None = None) -> StateBinding:
    """Align with Spark's checkpoint, restore the store, and hook blobstate into ``spark``; returns the binding.

    Example::

        binding = blobstate.spark.register(spark, repo="file:///backups", checkpoint_location="/ck/q1",
                                           state_dir="/state/q1", job="flights", store="stats")
        query = binding.start(stream.writeStream, update)   # update(df, batch_id, state)
        query.awaitTermination()
        binding.close()                                      # the last snapshot; raises snapshot errors

    The keywords are ``StateBinding``'s. Raises ``SparkAlignmentError`` when the repository cannot give the state
    after Spark's newest commit (nothing changed), ``FencedError`` from a batch when another writer took the key.
    """
    binding = StateBinding(spark, repo=repo, checkpoint_location=checkpoint_location, state_dir=state_dir, job=job,
                           task=task, store=store, key=key, log=log, work_dir=work_dir,
                           storage_options=storage_options, retain=retain, ttl=ttl, snapshot_every=snapshot_every,
                           committer_options=committer_options, settings=settings)
    try:
        binding.open()
    except BaseException:
        binding.engine.close(drain=False)
        raise
    return binding


__all__ = ["StateBinding", "register"]
