"""``blobstate backup``: the commit pipeline of one store, every step recorded in the journal.

Samza's blob-store backup (local checkpoint, diff against the previous snapshot index, upload with TTL, index,
checkpoint, then REMOVE_TTL and deferred deletes) with the commit point at the checkpoint log's ``append``:

1. ``CommitStarted``            one commit per store at a time (``StoreSession``'s lock), expected generation
2. ``LocalCheckpointCreated``   consistent local copy (the local store plugin), checkpoint id written into it
3. diff                         ``planner.diff``: unchanged only if name, size and CRC32C match
4. ``UploadsPlanned``, ``BlobUploaded``  new and mutable files, chunked, in parallel, each with a TTL, and beside
5. ``IndexUploaded``            them the snapshot index, with a TTL
6. ``CheckpointWritten``        ``append(checkpoint, expected_generation)``: the commit point, through the one commit
                                engine of every record kind (``blobstate.commit.engine.CommitEngine``; its
                                ``CommitPoint`` shared with the store's delta and group commits)
7. ``TtlRemoved``, ``BlobsDeleted``, ``LocalCheckpointsPruned``, ``CommitCompleted``: ``CleanupExecutor.finish``

A failure before 6 aborts (``CleanupExecutor.abort``: blobs deleted at once); a failure after 6 never loses the
commit: recovery (``blobstate.commit.recover``, run before the first commit and by ``blobstate recover``)
finishes step 7. The rules that keep a snapshot from ever being lost (docs/architecture.md, "Safety"):

- the commit point is never reached once the protection of the commit's uploads may have lapsed: a commit older
  than half its TTL aborts instead (``commit_point.check_ttl_budget``); a commit point reached late anyway (the
  process paused in between) is detected right after the append and healed (``healing.heal_committed``);
- an append whose outcome is unknown is resolved by re-appending the same record until the log answers for
  certain; until then the commit stays open (``CheckpointAppending`` in the journal) and nothing it wrote is
  deleted;
- a snapshot never references a blob the store lacks: a walk of the store's ``blobs/`` prefix, and a missing
  reused blob is uploaded again from the local checkpoint (``healing.plan_heal``; ``healing.HealWalks`` says when
  a commit may skip the walk);
- an unreadable previous index never wedges the store: the commit uploads everything, under the next generation;
- the first commit from a host that did not write the latest one runs restore's init cleanup first (its blobs
  may still carry the TTL a native lifecycle rule would expire them by).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from blobstate.commit import healing, planner
from blobstate.commit.cleanup import CleanupExecutor
from blobstate.commit.context import StoreCommitContext
from blobstate.commit.engine import CommitEngine, landed_late
from blobstate.commit.point import CommitPoint
from blobstate.commit.recover import recover
from blobstate.commit.session import StoreSession
from blobstate.commit.staging import SnapshotSpec, StageSteps, stage_snapshot
from blobstate.config.options import redact
from blobstate.config.settings import Settings
from blobstate.errors import FencedError, IntegrityError
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.journal.projection import CommitPhase
from blobstate.journal.recovery import RecoveryAction
from blobstate.local import workdir
from blobstate.local.checksum import ChecksumCache
from blobstate.local.object_cache import ObjectCache
from blobstate.model.chain import latest_snapshot
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_RETAIN,
    DEFAULT_TTL_MS,
    new_checkpoint_id,
    now_ms,
)
from blobstate.model.progress import NoProgress, Progress
from blobstate.model.records import SNAPSHOT, Checkpoint, StoreKey
from blobstate.model.retention import KEEP_ALL, RetentionPolicy, read_ahead, recorded_policy
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository import host
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)

#: Seconds an unknown append outcome is resolved by re-appending before the commit is left open for recovery
#: (``BLOBSTATE_APPEND_RESOLVE_S`` overrides).
APPEND_RESOLVE_S = 30.0
#: snapshot indexes a committer keeps read (its own, the previous, the retained ones retention reads)
INDEXES_KEPT = 8


@dataclass(frozen=True)
class LocalCheckpoint:
    """A local checkpoint taken (step 2) and not uploaded yet; times in ms."""

    commit_id: str
    path: str
    batch_id: int | None
    expected_generation: int
    created_ms: int
    checkpoint_ms: float
    query_id: str = ""


@dataclass(frozen=True)
class BackupResult:
    """A committed snapshot: the checkpoint record and what the commit cost (bytes, files, ms)."""

    checkpoint: Checkpoint
    files_total: int
    files_uploaded: int
    bytes_total: int
    bytes_uploaded: int
    checkpoint_ms: float
    upload_ms: float
    duration_ms: float
    blobs_deleted: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            **self.checkpoint.summary_json(),
            "filesTotal": self.files_total,
            "filesUploaded": self.files_uploaded,
            "bytesTotal": self.bytes_total,
            "bytesUploaded": self.bytes_uploaded,
            "checkpointMs": round(self.checkpoint_ms, 3),
            "uploadMs": round(self.upload_ms, 3),
            "durationMs": round(self.duration_ms, 3),
            "blobsDeleted": self.blobs_deleted,
        }


class StoreCommitter:
    """Commits of one store to one repository, journaled, one at a time (a lock file in the work directory).

    Usage::

        with StoreCommitter(StoreKey("job", "0", "counts"), "file:///backups") as committer:
            result = committer.backup("/data/counts")          # or checkpoint() now, upload() later

    ``ttl_ms``: TTL of new blobs until their commit completes. ``retain``: newest checkpoints kept (>= 1);
    ``retention``: a ``RetentionPolicy`` instead (restic's rules, ``blobstate.model.retention``), recorded in each
    index so that gc and restore's init cleanup apply the same (``use_recorded_retention`` takes the one the
    store's latest snapshot records).
    ``chunk_size``: bytes per blob. ``append_resolve_s``: seconds an unknown append outcome is resolved by
    re-appending before the commit is left open for recovery (default: the settings'). ``settings``: what the
    committer runs with (default: those of ``repo`` when it is an open ``Repository``, else the environment's, with
    which ``repo`` is opened). Construction runs recovery of unfinished commits found in the journal.
    Raises ``CommitInProgressError`` when another process commits this store from the same work directory.
    """

    def __init__(self, key: StoreKey, repo: str | Repository, *, log: str | None = None,
                 store_type: str = "rocksdb", work_dir: str | None = None, ttl_ms: int = DEFAULT_TTL_MS,
                 retain: int = DEFAULT_RETAIN, chunk_size: int = DEFAULT_CHUNK_SIZE, max_concurrency: int = 8,
                 storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 progress: Progress | None = None, writer_id: str | None = None,
                 expected_generation: int | None = None, recover: bool = True,
                 append_resolve_s: float | None = None, retention: RetentionPolicy | None = None,
                 settings: Settings | None = None) -> None:
        if retain < 1:
            raise ValueError("retain must be >= 1")
        self.policy = retention or RetentionPolicy(last=retain)
        self.key = key
        self.repo = repo if isinstance(repo, Repository) else Repository.open(
            repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency,
            settings=settings)
        self.settings = settings if settings is not None else self.repo.settings
        self.local_store = open_local_store(store_type, settings=self.settings)
        self.store_type = store_type
        self.work_dir = work_dir or host.work_dir(self.repo, key)  # keyed by the repository's id (issue 39)
        if self.settings.object_cache:  # rule 9
            self.repo.use_object_cache(ObjectCache.for_writer(host.host_key(self.repo), key, self.work_dir))
        self.ttl_ms = ttl_ms
        self.chunk_size = max(1, chunk_size)
        self.progress: Progress = progress or NoProgress()
        self.writer_id = writer_id or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.session = StoreSession(key, self.work_dir, repository_id=host.repository_id(self.repo))
        self.append_resolve_s = (append_resolve_s if append_resolve_s is not None
                                 else self.settings.append_resolve_s)
        self.commit_point = CommitPoint(self.session, self.repo, append_resolve_s=self.append_resolve_s,
                                        generation=expected_generation)
        self.cleanup = CleanupExecutor(self.session, self.repo, retain=self.policy, commit_point=self.commit_point)
        self.engine = CommitEngine(self.cleanup, self.commit_point, ttl_ms=ttl_ms,
                                   on_unsettled=self.mark_needs_recovery)
        #: what this store's delta and group committers are composed from (``blobstate.commit.context``); its
        #: ``retain`` is journaled (a count): a policy's fallback prunes nothing
        self.context = StoreCommitContext(key, self.repo, self.session, self.commit_point, self.cleanup, self.engine,
                                          self.work_dir, self.writer_id, ttl_ms, self.policy.only_last or KEEP_ALL)
        self.cache = ChecksumCache(os.path.join(self.work_dir, workdir.CRC_CACHE))
        self.walks = healing.HealWalks(self.repo, key)
        self._indexes = ExitStack()  # the indexes this committer read or wrote, kept while it lives
        self._indexes.enter_context(self.repo.reading_indexes_once(limit=INDEXES_KEPT))
        self._prev: tuple[Checkpoint, SnapshotIndex | None] | None = None
        self._opened: list[Checkpoint] | None = None  # the log as it opened on it, until its first snapshot
        self.recovered: list[tuple[RecoveryAction, str]] = []
        self._needs_recovery = False  # a cleanup failed or an append was ambiguous: recover before the next commit
        try:
            if recover:
                self.recovered = self.recover()
            if expected_generation is None:  # the whole log, not only its latest: retention's reads go first
                self._opened = self.repo.log.history(key)
                self.commit_point.pin(self._opened)
            self.commit_point.generation()  # this writer's view, pinned: another writer's append after it fences us
        except BaseException:
            self.close()  # release the lock: a retry in this process must not see "another process"
            raise

    @property
    def journal(self) -> Journal:
        return self.session.journal

    def __enter__(self) -> StoreCommitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the waiting marks of committed deltas, save the checksum cache, close the journal, unlock."""
        self.cleanup.flush_deferred()
        self._save_cache()
        self._indexes.close()
        self.session.close()

    def _save_cache(self) -> None:
        """Save the checksum cache; it is an optimisation, so a failure (a full disk) is only a warning."""
        try:
            self.cache.save()
        except OSError as exc:
            log.warning("the checksum cache of %s was not saved: %s", self.key, exc)

    def recover(self, **kwargs: Any) -> list[tuple[RecoveryAction, str]]:
        """Recover this store's open commits (``blobstate.commit.recover.recover``). Never while another commit
        of this store is in flight in this process: recovery would abort it."""
        results = recover(self.session, self.repo, retain=self.policy, **kwargs)
        if results:
            self.commit_point.invalidate()  # recovery may have appended
            self._prev = None
            self.walks.forget()
        return results

    def use_recorded_retention(self) -> RetentionPolicy:
        """Apply the retention policy the store's latest snapshot records (its writer's: ``--keep-*`` given once
        stay until given again), or keep this committer's when it records none or does not read. Returns it."""
        prev = self._previous()
        recorded = recorded_policy(prev[1]) if prev is not None and prev[1] is not None else None
        if recorded is not None:
            self.policy = recorded
            self.context.retain = recorded.only_last or KEEP_ALL
            self.cleanup.retain = recorded
        return self.policy

    @property
    def needs_recovery(self) -> bool:
        """True after a cleanup failed or an append stayed ambiguous: the next ``checkpoint()`` recovers first."""
        return self._needs_recovery

    def mark_needs_recovery(self) -> None:
        """A commit of this store (a delta's) failed after its append was sent, or its cleanup failed: the next
        ``checkpoint()`` recovers first."""
        self._needs_recovery = True
        self._prev = None
        self.walks.forget()

    # -- step 1-2: local checkpoint --------------------------------------------------------------------------
    def checkpoint(self, source: object, *, batch_id: int | None = None, query_id: str = "") -> LocalCheckpoint:
        """Take the consistent local copy (synchronous; milliseconds for RocksDB). Journaled. ``query_id``: the
        streaming query the snapshot belongs to (recorded in its checkpoint record)."""
        t0 = time.perf_counter()
        if self._needs_recovery:
            self.recover()
            self._needs_recovery = False
        self.take_over()
        expected = self.commit_point.generation()
        commit_id = new_checkpoint_id()
        record = self.session.record
        path = os.path.join(workdir.checkpoints_dir(self.work_dir), commit_id)
        try:  # from its first event: an interrupt anywhere here (one Ctrl-C) aborts the commit, as later on
            self.context.start(commit_id, batch_id, kind=SNAPSHOT, sync=True)
            self.local_store.create_checkpoint(source, path)  # its name is the checkpoint id: no marker inside
            record(ev.LocalCheckpointCreated(commit_id, now_ms(), path), sync=True)
            return LocalCheckpoint(commit_id, path, batch_id, expected, now_ms(),
                                   (time.perf_counter() - t0) * 1000, query_id)
        except BaseException as exc:
            shutil.rmtree(path, ignore_errors=True)  # a copy half taken is not yet in the journal
            self.engine.abort(commit_id, exc, keep_view=True)
            raise

    @property
    def retain(self) -> int:
        """The newest checkpoints kept, as journaled (``KEEP_ALL`` for a policy that is not a count)."""
        return self.context.retain

    def take_over(self) -> None:
        """Before this store's first commit (snapshot, delta or group): ``StoreCommitContext.take_over``."""
        self.context.take_over()

    def _previous(self) -> tuple[Checkpoint, SnapshotIndex | None] | None:
        """The checkpoint and index the next commit diffs against (the log's latest snapshot; cached after our
        commits). An index that is missing or damaged is ``None`` (with a warning naming it): the commit then
        uploads every file, under the next generation, instead of wedging the store."""
        if self._prev is None:
            latest = self.commit_point.latest()  # the writer's view: read once with its pinned generation
            ahead, self._opened = read_ahead(opened := self._opened or [], self.policy), None  # retention's, later
            if latest is not None and latest.is_delta:
                latest = latest_snapshot(self.repo.log.history(self.key))
            if latest is not None:
                snapshot = latest
                try:  # the walk of the store the next commit makes goes beside this read (``HealWalks.prefetch``;
                    index: SnapshotIndex | None = self.walks.prefetch(  # its indexes checked), retention's reads too
                        latest.checkpoint_id, lambda: self.repo.prefetch_indexes([snapshot, *ahead]) or
                        self.repo.read_index(snapshot), stored=[snapshot, *opened])
                except IntegrityError as exc:
                    log.warning("the latest snapshot index of %s (%s, checkpoint %s) is unreadable: %s; this commit "
                                "uploads every file", self.key, latest.index_blob_id, latest.checkpoint_id,
                                redact(str(exc)))
                    index = None
                self._prev = (latest, index)
        return self._prev

    # -- steps 3-7 -------------------------------------------------------------------------------------------
    def upload(self, local: LocalCheckpoint) -> BackupResult:
        """Diff, upload, write the index, append the checkpoint (commit point), then post-commit cleanup.

        Raises ``FencedError`` when another writer advanced the generation (the commit is aborted), and
        ``StorageError`` when the store fails for good (aborted too, unless the append may have happened: then
        the commit stays open in the journal for recovery).
        """
        t0 = time.perf_counter()
        commit_id = local.commit_id
        try:
            prev = self._previous()
            if prev is not None and prev[0].generation != local.expected_generation and not \
                    self.commit_point.ours_since(local.expected_generation, prev[0].generation):
                raise FencedError(
                    f"fenced: {self.key} is at generation {prev[0].generation}, this writer expected "
                    f"{local.expected_generation}", expected=local.expected_generation, actual=prev[0].generation)
            spec = SnapshotSpec(commit_id, local.created_ms, local.batch_id, self.writer_id, self.store_type,
                                self.ttl_ms, self.chunk_size, self.policy)
            staged = stage_snapshot(self.repo, self.key, local.path, spec, previous=prev[0] if prev else None,
                                    previous_index=prev[1] if prev else None, walks=self.walks, cache=self.cache,
                                    is_mutable=self.local_store.is_mutable, steps=_JournaledSteps(self, commit_id),
                                    progress=self.progress)
            index, data, index_id, crc = staged.index, staged.data, staged.index_id, staged.crc32c
            record = Checkpoint(self.key, commit_id, 0, index_id, crc, len(data), local.created_ms,
                                local.batch_id, self.writer_id, query_id=local.query_id)
            self.repo.remember_index(record, index, data)  # retention reads it from here, not from the store
        except BaseException as exc:
            self.engine.abort(commit_id, exc)  # certain: this commit is not and never will be in the log
            if not isinstance(exc, FencedError):
                self._prev = None
            raise
        checkpoint = self.engine.append(record)  # the TTL budget, the commit point; aborts or leaves it open
        self.repo.cache_written_index(checkpoint, data)  # landed: the next process on this host reads it from there
        self._prev = (checkpoint, index)
        upload_ms = (time.perf_counter() - t0) * 1000
        late = landed_late(local.created_ms, self.ttl_ms)
        deleted = self.engine.finish_quietly(commit_id, checkpoint, late=late)
        self.walks.done(commit_id, walked=staged.walked, whole=not late and not self._needs_recovery
                        and now_ms() - local.created_ms <= self.ttl_ms // 2)
        self.cache.retain([f.path for f in planner.scan_directory(local.path, self.cache)])
        self._save_cache()
        return BackupResult(
            checkpoint=checkpoint, files_total=len(staged.files), files_uploaded=staged.files_uploaded,
            bytes_total=sum(f.size_in_bytes for f in staged.files.values()), bytes_uploaded=staged.bytes_planned,
            checkpoint_ms=local.checkpoint_ms, upload_ms=upload_ms,
            duration_ms=local.checkpoint_ms + (time.perf_counter() - t0) * 1000, blobs_deleted=deleted,
        )

    def backup(self, source: object, *, batch_id: int | None = None) -> BackupResult:
        """``checkpoint()`` then ``upload()``; an interrupt between the two aborts the commit as one inside either
        does (nothing was uploaded yet)."""
        local = self.checkpoint(source, batch_id=batch_id)
        try:
            return self.upload(local)
        except BaseException as exc:
            state = self.session.states().get(local.commit_id)
            if state is not None and state.phase == CommitPhase.LOCAL_CHECKPOINT:  # upload's own steps not begun
                self.engine.abort(local.commit_id, exc, keep_view=True)
            raise


class _JournaledSteps(StageSteps):
    """A snapshot commit's staging steps in its journal: ``UploadsPlanned`` (the index kept in the work directory
    for healing), ``BlobUploaded`` per blob, ``IndexUploaded``."""

    def __init__(self, committer: StoreCommitter, commit_id: str) -> None:
        self.committer = committer
        self.commit_id = commit_id

    def planned(self, index_id: str, puts: list[PutRequest], bytes_planned: int, index_data: bytes) -> None:
        self.committer.session.record(ev.UploadsPlanned(self.commit_id, now_ms(), tuple(r.blob_id for r in puts),
                                                        index_id, bytes_planned), sync=True)
        healing.save_index_copy(self.committer.work_dir, self.commit_id, index_data)

    def uploaded(self, request: PutRequest) -> None:
        self.committer.session.record(ev.BlobUploaded(self.commit_id, now_ms(), request.blob_id, request.size))

    def indexed(self, index_id: str, crc32c: int, size: int) -> None:
        self.committer.journal.sync()
        self.committer.session.record(ev.IndexUploaded(self.commit_id, now_ms(), index_id, crc32c, size), sync=True)
