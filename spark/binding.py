"""The ``foreachBatch`` binding: a RocksDB store per query, a local checkpoint per micro-batch, background uploads.

Per micro-batch ``b`` (on Spark's ``foreachBatch`` thread):

1. raise any earlier upload failure (so it reaches the user within one batch);
2. the previous local checkpoint (``b - 1``) is committed by Spark now (Spark writes ``commits/<b-1>`` before it
   plans ``b``): start its upload if the listener has not done so yet;
3. run the user's function with the store open;
4. backpressure: wait until the previous upload finished (at most ``max_wait_s`` seconds, else
   ``BackpressureTimeout``), and raise its failure if it failed;
5. take the local checkpoint (RocksDB checkpoint, hard links, milliseconds), tagged with ``batch_id = b``.

The upload of ``b`` starts when the ``CommitListener`` reports batch ``b`` (``onQueryProgress``) or when batch
``b + 1`` starts, whichever comes first; one upload runs at a time (one commit in flight per store). ``close()``
drains: it uploads the last local checkpoint if Spark committed its batch, and waits.

On ``open()`` the store is aligned with Spark's checkpoint location (``blobstate.spark.alignment``): the newest
snapshot whose batch id is ``<=`` Spark's last commit is restored into ``state_dir`` before the query starts.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from blobstate.errors import BlobstateError, ConfigurationError, StorageError
from blobstate.layout import DEFAULT_TTL_MS
from blobstate.model import StoreKey
from blobstate.pipelines.backup import BackupResult, LocalCheckpoint, StoreCommitter
from blobstate.repository import Repository
from blobstate.spark.alignment import AlignmentPlan, last_committed_batch, plan_alignment, rewind_commit

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
    from rocksdict import Rdict

log = logging.getLogger(__name__)

BatchFunction = Callable[["DataFrame", int, "Rdict"], None]


class SnapshotCommitError(StorageError):
    """The commit of a micro-batch's snapshot failed; ``batch_id`` names the batch, ``__cause__`` the reason.

    Snapshots committed before stay committed; the exit code is the cause's (4 when fenced, 3 for integrity).
    """

    def __init__(self, message: str, *, batch_id: int | None, cause: BaseException) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.exit_code = getattr(cause, "exit_code", StorageError.exit_code)


class BackpressureTimeout(StorageError):
    """The previous micro-batch's upload did not finish within ``max_wait_s`` seconds."""


def redact_url(url: str) -> str:
    """``url`` without user info (``s3://key:secret@bucket`` -> ``s3://***@bucket``), for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


class StateBinding:
    """One Spark query's RocksDB store, committed to ``repo`` after every micro-batch.

    ``checkpoint_location``: the query's Spark checkpoint location (path or fsspec URL); ``state_dir``: the local
    RocksDB directory (restored on ``open()``); ``key``: the store key (default ``job/task/store``); ``work_dir``:
    blobstate's journal and local checkpoints for the store (default under ``BLOBSTATE_WORK_DIR``);
    ``max_wait_s``: bound of the backpressure wait, seconds; ``retain``: snapshots kept (>= 2 for alignment);
    ``on_commit``: called with each ``BackupResult`` on the upload thread; ``allow_rewind``: permit deleting Spark's
    newest commit when its snapshot never got uploaded (see ``alignment``).
    """

    def __init__(self, spark: SparkSession, *, repo: str, checkpoint_location: str, state_dir: str,
                 job: str = "default", task: str = "0", store: str = "state", key: StoreKey | None = None,
                 log_url: str | None = None, work_dir: str | None = None,
                 storage_options: dict[str, Any] | None = None, retain: int = 3, ttl_ms: int = DEFAULT_TTL_MS,
                 max_wait_s: float = 600.0, allow_rewind: bool = True,
                 on_commit: Callable[[BackupResult], None] | None = None,
                 committer_options: dict[str, Any] | None = None) -> None:
        if retain < 2:
            raise ConfigurationError("retain must be >= 2: alignment with Spark may need the previous snapshot")
        if max_wait_s <= 0:
            raise ConfigurationError("max_wait_s must be > 0")
        self.spark = spark
        self.repo_url = repo
        self.checkpoint_location = checkpoint_location
        self.state_dir = os.path.abspath(state_dir)
        self.key = key or StoreKey(job, task, store)
        self.log_url = log_url
        self.work_dir = work_dir
        self.storage_options = storage_options
        self.retain = retain
        self.ttl_ms = ttl_ms
        self.max_wait_s = max_wait_s
        self.allow_rewind = allow_rewind
        self.on_commit = on_commit
        self.committer_options = committer_options or {}
        self.results: list[BackupResult] = []
        self.plan: AlignmentPlan | None = None
        self.restore_ms: float = 0.0
        self._repo: Repository | None = None
        self._committer: StoreCommitter | None = None
        self._db: Rdict | None = None
        self._listener: Any = None
        self._query_id: str | None = None
        self._query: StreamingQuery | None = None
        self._cond = threading.Condition()
        self._pending: LocalCheckpoint | None = None
        self._inflight: Future[BackupResult] | None = None
        self._inflight_batch: int | None = None
        self._spark_committed = -1
        self._error: SnapshotCommitError | None = None
        self._error_reported = False
        self._closed = False
        self._paused = False
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"blobstate-upload-{self.key.store}")

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def open(self) -> AlignmentPlan:
        """Align with Spark's checkpoint location, restore ``state_dir``, open the store, add the listener.

        Raises ``SparkAlignmentError`` (nothing changed), ``IntegrityError`` / ``StorageError`` from the restore.
        """
        from rocksdict import Rdict

        from blobstate import api, workdir
        from blobstate.spark.listener import CommitListener

        t0 = time.perf_counter()
        self._repo = Repository.open(self.repo_url, log=self.log_url, storage_options=self.storage_options)
        self.work_dir = self.work_dir or workdir.store_work_dir(self._repo.url, self.key)
        plan = plan_alignment(self._repo, self.key, self.checkpoint_location, allow_rewind=self.allow_rewind)
        log.info("%s: %s", self.key, plan.describe())
        if plan.checkpoint is not None:
            api.restore(self.state_dir, repo=self.repo_url, log=self.log_url, job=self.key.job, task=self.key.task,
                        store=self.key.store, store_type="rocksdb", checkpoint_id=plan.checkpoint.checkpoint_id,
                        storage_options=self.storage_options, work_dir=self.work_dir, force=True)  # ours
        else:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            os.makedirs(self.state_dir)
        if plan.rewind is not None:
            rewind_commit(self.checkpoint_location, plan.rewind)
        self.restore_ms = (time.perf_counter() - t0) * 1000
        self._committer = StoreCommitter(self.key, self._repo, store_type="rocksdb", work_dir=self.work_dir,
                                         retain=self.retain, ttl_ms=self.ttl_ms, **self.committer_options)
        self._db = Rdict(self.state_dir)
        self._listener = CommitListener(self)
        self.spark.streams.addListener(self._listener)
        self.plan = plan
        return plan

    @property
    def db(self) -> Rdict:
        """The open RocksDB store (``rocksdict.Rdict``); raises ``ConfigurationError`` before ``open()``."""
        if self._db is None:
            raise ConfigurationError("the binding is not open: call blobstate.spark.register() or open() first")
        return self._db

    def foreach_batch(self, fn: BatchFunction) -> Callable[[DataFrame, int], None]:
        """Wrap ``fn(df, batch_id, db)`` for ``DataStreamWriter.foreachBatch``."""

        def run(df: DataFrame, batch_id: int) -> None:
            self._before_batch(batch_id)
            fn(df, batch_id, self.db)
            self._after_batch(batch_id)

        return run

    def start(self, writer: DataStreamWriter, fn: BatchFunction, *, query_name: str | None = None) -> StreamingQuery:
        """Start ``writer`` with ``foreachBatch(fn)`` on this binding's checkpoint location; binds the query."""
        writer = writer.foreachBatch(self.foreach_batch(fn)).option("checkpointLocation", self.checkpoint_location)
        if query_name:
            writer = writer.queryName(query_name)
        query = writer.start()
        self.bind_query(query)
        return query

    def bind_query(self, query: StreamingQuery) -> None:
        """Only progress events of ``query`` trigger uploads (unbound: every query of the session)."""
        self._query = query
        self._query_id = str(query.id)

    # -- the micro-batch ---------------------------------------------------------------------------------------
    def _before_batch(self, batch_id: int) -> None:
        self.raise_if_failed()
        with self._cond:
            if self._closed:
                raise ConfigurationError(f"the blobstate binding of {self.key} is closed")
            if self._pending is not None and self._pending.batch_id is not None and self._pending.batch_id < batch_id:
                self._submit_locked()  # Spark committed the previous batch before planning this one

    def _after_batch(self, batch_id: int) -> None:
        self.wait_for_upload(self.max_wait_s, include_pending=True)
        self.raise_if_failed()
        with self._cond:
            if self._closed:
                raise ConfigurationError(f"the blobstate binding of {self.key} was closed during batch {batch_id}")
            committer = self._committer
            assert committer is not None
            local = committer.checkpoint(self.db, batch_id=batch_id)  # milliseconds; under the lock vs close()
            self._pending = local
            if self._spark_committed >= batch_id:
                self._submit_locked()

    def _submit_locked(self, *, force: bool = False) -> None:
        local = self._pending
        if local is None or self._inflight is not None or (not force and (self._paused or self._closed)):
            return
        self._pending = None
        self._inflight_batch = local.batch_id
        self._inflight = self._executor.submit(self._upload, local)

    def _upload(self, local: LocalCheckpoint) -> BackupResult:
        assert self._committer is not None
        try:
            result = self._committer.upload(local)
        except BaseException as exc:
            committed = [r.checkpoint.batch_id for r in self.results]
            error = SnapshotCommitError(
                f"blobstate could not commit the snapshot of batch {local.batch_id} of {self.key} to "
                f"{redact_url(self.repo_url)}: {type(exc).__name__}: {exc}. Snapshots committed before are intact "
                f"(this run: batches {committed[-3:] if committed else 'none'}); on restart the store is restored "
                "to the newest one and Spark re-runs the batches after it.",
                batch_id=local.batch_id, cause=exc)
            error.__cause__ = exc
            with self._cond:
                self._error = self._error or error
                self._inflight = None
                self._cond.notify_all()
            log.error("%s", error)
            raise
        with self._cond:
            self.results.append(result)
            self._inflight = None
            if self._pending is not None and self._spark_committed >= (self._pending.batch_id or 0):
                self._submit_locked()
            self._cond.notify_all()
        if self.on_commit is not None:
            try:
                self.on_commit(result)
            except Exception:  # noqa: BLE001 - a progress callback must not fail a committed commit
                log.warning("on_commit callback failed", exc_info=True)
        return result

    # -- listener target ---------------------------------------------------------------------------------------
    def on_batch_committed(self, query_id: str, batch_id: int) -> None:
        """Spark completed ``batch_id`` of ``query_id`` (listener thread): start that batch's upload."""
        if self._query_id is not None and query_id != self._query_id:
            return
        with self._cond:
            self._spark_committed = max(self._spark_committed, batch_id)
            if self._pending is not None and (self._pending.batch_id or 0) <= batch_id and not self._closed:
                self._submit_locked()

    def on_listener_error(self, exc: BaseException) -> None:
        with self._cond:
            if self._error is None:
                self._error = SnapshotCommitError(f"blobstate's Spark listener failed: {exc}", batch_id=None,
                                                  cause=exc)

    # -- waiting and errors ------------------------------------------------------------------------------------
    def wait_for_upload(self, timeout_s: float | None = None, *, include_pending: bool = False,
                        raise_error: bool = True) -> None:
        """Block until no upload is in flight (and, with ``include_pending``, no local checkpoint waits for one).

        Raises ``BackpressureTimeout`` after ``timeout_s`` seconds, ``ConfigurationError`` when the binding is
        closed meanwhile (``include_pending`` only), and the upload's failure (``SnapshotCommitError``).
        """
        with self._cond:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while self._inflight is not None or (include_pending and self._pending is not None):
                if include_pending and self._closed:
                    raise ConfigurationError(f"the blobstate binding of {self.key} was closed during a batch")
                if self._error is not None:
                    break
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    batch = self._inflight_batch if self._inflight is not None else self._pending.batch_id
                    raise BackpressureTimeout(
                        f"the upload of batch {batch} of {self.key} did not finish within {timeout_s:.0f} s "
                        f"(max_wait_s){' (uploads are paused)' if self._paused else ''}; the repository "
                        f"{redact_url(self.repo_url)} is too slow or unreachable")
                self._cond.wait(left)
        if raise_error:
            self.raise_if_failed()

    def wait_committed(self, batch_id: int, timeout_s: float = 600.0) -> BackupResult:
        """Block until the snapshot of ``batch_id`` (or a later batch) is committed; returns its ``BackupResult``.

        Raises the upload failure (``SnapshotCommitError``), or ``TimeoutError`` after ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                done = [r for r in self.results if (r.checkpoint.batch_id or 0) >= batch_id]
                if done:
                    return done[0]
                if self._error is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"the snapshot of batch {batch_id} of {self.key} was not committed within "
                                       f"{timeout_s:.0f} s (pending: {self.pending_batch_locked()})")
                self._cond.wait(left)
        self.raise_if_failed()
        raise AssertionError("unreachable")

    def pending_batch_locked(self) -> int | None:
        return self._pending.batch_id if self._pending is not None else None

    def raise_if_failed(self) -> None:
        """Raise the first upload failure (``SnapshotCommitError``), once it happened."""
        with self._cond:
            error = self._error
            if error is not None:
                self._error_reported = True
        if error is not None:
            raise error

    def pause_uploads(self) -> None:
        """Hold uploads (local checkpoints still happen; the next batch then waits, bounded by ``max_wait_s``)."""
        with self._cond:
            self._paused = True

    def resume_uploads(self) -> None:
        """Undo ``pause_uploads``; a local checkpoint Spark already committed starts uploading."""
        with self._cond:
            self._paused = False
            if self._pending is not None and (self._pending.batch_id or 0) <= self._spark_committed:
                self._submit_locked()

    @property
    def pending_batch(self) -> int | None:
        """Batch id of the local checkpoint that waits for Spark's commit, if any."""
        with self._cond:
            return self._pending.batch_id if self._pending is not None else None

    def committed_batches(self) -> list[int | None]:
        """Batch ids of the snapshots this binding committed, in order."""
        with self._cond:
            return [r.checkpoint.batch_id for r in self.results]

    # -- shutdown ----------------------------------------------------------------------------------------------
    def close(self, *, drain: bool = True, timeout_s: float | None = None) -> None:
        """Stop the bound query if active, drain pending commits, remove the listener, close store and journal.

        Draining uploads the last local checkpoint when Spark committed its batch (``commits/`` is read, the
        listener may be late); a local checkpoint Spark did not commit is left for recovery to abort (Spark re-runs
        that batch). Raises the first upload failure not raised before, or ``BackpressureTimeout``.
        """
        with self._cond:
            self._closed = True  # a batch still waiting for an upload gives up now (stop() could not end it)
            self._cond.notify_all()
        if self._query is not None and self._query.isActive:
            self._query.stop()
        try:
            if drain and self._committer is not None:
                with self._cond:
                    pending = self._pending
                if pending is not None and pending.batch_id is not None and self._error is None:
                    last = last_committed_batch(self.checkpoint_location)
                    with self._cond:
                        if last is not None and last >= pending.batch_id:
                            self._spark_committed = max(self._spark_committed, last)
                            self._submit_locked(force=True)
                        else:
                            log.info("local checkpoint of batch %s was not committed by Spark; not uploaded "
                                     "(recovery aborts it, Spark re-runs the batch)", pending.batch_id)
            with self._cond:
                self._pending = None
            self.wait_for_upload(timeout_s, raise_error=False)
        finally:
            self._release()
        with self._cond:
            error, reported = self._error, self._error_reported
        if error is not None and not reported:
            self._error_reported = True
            raise error

    def abandon(self) -> None:
        """Stop as a crashed process would: no further uploads (a pending local checkpoint is never uploaded; an
        upload already running is let finish, as threads cannot be killed), then release everything."""
        with self._cond:
            self._closed = True
            self._pending = None
            self._cond.notify_all()
        if self._query is not None and self._query.isActive:
            self._query.stop()
        try:
            with self._cond:
                while self._inflight is not None:
                    self._cond.wait()
        finally:
            self._release()

    def _release(self) -> None:
        self._executor.shutdown(wait=True)
        if self._listener is not None:
            try:
                self.spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001 - the session may be gone already
                log.debug("removeListener failed", exc_info=True)
            self._listener = None
        if self._committer is not None:
            self._committer.close()
            self._committer = None
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def __enter__(self) -> StateBinding:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register(spark: SparkSession, *, repo: str, checkpoint_location: str, state_dir: str,
             **options: Any) -> StateBinding:
    """Align with Spark's checkpoint, restore the store, and hook blobstate into ``spark``; returns the binding.

    Example::

        binding = blobstate.spark.register(spark, repo="file:///backups", checkpoint_location="/ck/q1",
                                           state_dir="/state/q1", job="flights", store="stats")
        query = binding.start(stream.writeStream, update)   # update(df, batch_id, db)
        query.awaitTermination()
        binding.close()                                      # drains pending commits, raises upload errors

    ``options`` are ``StateBinding``'s. Raises ``SparkAlignmentError`` when no snapshot matches Spark's commits.
    """
    binding = StateBinding(spark, repo=repo, checkpoint_location=checkpoint_location, state_dir=state_dir,
                           **options)
    try:
        binding.open()
    except BaseException:
        binding._release()
        raise
    return binding


__all__ = ["BackpressureTimeout", "BlobstateError", "SnapshotCommitError", "StateBinding", "redact_url", "register"]
