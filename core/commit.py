"""The commit (backup) pipeline of one store, every step recorded in the journal.

Samza's blob-store backup (local checkpoint, diff against the previous snapshot index, upload with TTL, index,
checkpoint, then REMOVE_TTL and deferred deletes) with the commit point at the checkpoint log's ``append``:

1. ``CommitStarted``            one commit per store at a time (a file lock), expected generation
2. ``LocalCheckpointCreated``   consistent local copy, checkpoint id written into it
3. diff                         unchanged only if name, size and CRC32C match (CRC32C cached by inode)
4. ``UploadsPlanned``, ``BlobUploaded``  new and mutable files, chunked, in parallel, each with a TTL
5. ``IndexUploaded``            the snapshot index, with a TTL
6. ``CheckpointWritten``        ``append(checkpoint, expected_generation)``: the commit point
7. ``TtlRemoved``, ``BlobsDeleted``, ``LocalCheckpointsPruned``, ``CommitCompleted``

A failure before 6 aborts (``CommitAborted``, blobs deleted at once); a failure after 6 never loses the commit:
recovery (``recover()``, run before the first commit and by ``blobstate recover``) finishes step 7.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from blobstate import workdir
from blobstate.backends import open_local_store
from blobstate.checksum import ChecksumCache
from blobstate.errors import BlobstateError, CommitInProgressError, FencedError, StorageError
from blobstate.interfaces import FileRange, PutRequest
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.journal.projection import CommitState, project
from blobstate.journal.recovery import FinishCommit, RecoveryAction, plan_recovery
from blobstate.manager import get_plugin_manager
from blobstate.model import Checkpoint, DirIndex, FileBlob, FileIndex, SnapshotIndex, StoreKey
from blobstate.repository import DEFAULT_RETAIN, DEFAULT_TTL_MS, Repository, new_blob_id, new_index_id
from blobstate.storage_options import redact

log = logging.getLogger(__name__)

DEFAULT_CHUNK_SIZE = 64 << 20  # bytes per blob; larger files are split


def now_ms() -> int:
    return int(time.time() * 1000)


def new_checkpoint_id() -> str:
    """``<ms since epoch>-<8 hex>``: unique, and sorts by creation time."""
    return f"{now_ms():013d}-{uuid.uuid4().hex[:8]}"


class Progress(Protocol):
    """Progress reporting (the CLI draws rich bars on stderr); sizes in bytes."""

    def start(self, label: str, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int, nfiles: int = 0) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        pass

    def advance(self, nbytes: int, nfiles: int = 0) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class LocalCheckpoint:
    """A local checkpoint taken (step 2) and not uploaded yet."""

    commit_id: str
    path: str
    batch_id: int | None
    expected_generation: int
    created_ms: int
    checkpoint_ms: float


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
            "checkpointId": self.checkpoint.checkpoint_id,
            "generation": self.checkpoint.generation,
            "batchId": self.checkpoint.batch_id,
            "filesTotal": self.files_total,
            "filesUploaded": self.files_uploaded,
            "bytesTotal": self.bytes_total,
            "bytesUploaded": self.bytes_uploaded,
            "checkpointMs": round(self.checkpoint_ms, 3),
            "uploadMs": round(self.upload_ms, 3),
            "durationMs": round(self.duration_ms, 3),
            "blobsDeleted": self.blobs_deleted,
        }


@dataclass(frozen=True)
class ScannedFile:
    relpath: str
    path: str
    size: int
    crc32c: int
    mtime: int
    ctime: int


@dataclass
class _Plan:
    files: dict[str, FileIndex] = field(default_factory=dict)
    removed: dict[str, FileIndex] = field(default_factory=dict)
    puts: list[PutRequest] = field(default_factory=list)
    files_uploaded: int = 0


def scan_directory(root: str, cache: ChecksumCache, *, workers: int = 4,
                   is_mutable: Callable[[str], bool] = lambda rel: False) -> list[ScannedFile]:
    """Every regular file under ``root`` (symlinks and the checkpoint marker skipped), with size and CRC32C.

    The CRC32C of an immutable file may come from the checksum cache; a mutable file's is always computed, since
    a file rewritten in place can keep its inode, size and (coarse) mtime.
    """
    paths: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == workdir.MARKER or os.path.islink(full) or not os.path.isfile(full):
                continue
            paths.append((rel, full))

    def one(item: tuple[str, str]) -> ScannedFile:
        rel, full = item
        size, crc = cache.crc32c(full, trust_cache=not is_mutable(rel))
        st = os.stat(full)
        return ScannedFile(rel, full, size, crc, st.st_mtime_ns // 1_000_000, st.st_ctime_ns // 1_000_000)

    if len(paths) <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, paths))


def build_dir_index(present: dict[str, FileIndex], removed: dict[str, FileIndex]) -> DirIndex:
    """The ``DirIndex`` tree of flat ``relative path -> file`` maps (files present and files dropped)."""
    tree: dict[str, Any] = {"files": {}, "removed": {}, "dirs": {}}

    def node_for(rel: str) -> tuple[dict[str, Any], str]:
        parts = rel.split("/")
        node = tree
        for part in parts[:-1]:
            node = node["dirs"].setdefault(part, {"files": {}, "removed": {}, "dirs": {}})
        return node, parts[-1]

    for rel, f in present.items():
        node, name = node_for(rel)
        node["files"][name] = f
    for rel, f in removed.items():
        node, name = node_for(rel)
        node["removed"][name] = f

    def has_present(node: dict[str, Any]) -> bool:
        return bool(node["files"]) or any(has_present(c) for c in node["dirs"].values())

    def removed_tree(name: str, node: dict[str, Any]) -> DirIndex:
        return DirIndex(name, files_present=tuple(node["removed"][k] for k in sorted(node["removed"])),
                        sub_dirs_present=tuple(removed_tree(k, node["dirs"][k]) for k in sorted(node["dirs"])))

    def convert(name: str, node: dict[str, Any]) -> DirIndex:
        dirs = sorted(node["dirs"])
        return DirIndex(
            name,
            files_present=tuple(node["files"][k] for k in sorted(node["files"])),
            files_removed=tuple(node["removed"][k] for k in sorted(node["removed"])),
            sub_dirs_present=tuple(convert(k, node["dirs"][k]) for k in dirs if has_present(node["dirs"][k])),
            sub_dirs_removed=tuple(removed_tree(k, node["dirs"][k]) for k in dirs
                                   if not has_present(node["dirs"][k])),
        )

    return convert("", tree)


class StoreCommitter:
    """Commits of one store to one repository, journaled, one at a time (a lock file in the work directory).

    Usage::

        with StoreCommitter(StoreKey("job", "0", "counts"), "file:///backups") as committer:
            result = committer.backup("/data/counts")          # or checkpoint() now, upload() later

    ``ttl_ms``: TTL of new blobs until their commit completes. ``retain``: newest checkpoints kept (>= 1).
    ``chunk_size``: bytes per blob. Construction runs recovery of unfinished commits found in the journal.
    Raises ``CommitInProgressError`` when another process commits this store from the same work directory.
    """

    def __init__(self, key: StoreKey, repo: str | Repository, *, log: str | None = None,
                 store_type: str = "rocksdb", work_dir: str | None = None, ttl_ms: int = DEFAULT_TTL_MS,
                 retain: int = DEFAULT_RETAIN, chunk_size: int = DEFAULT_CHUNK_SIZE, max_concurrency: int = 8,
                 storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 progress: Progress | None = None, writer_id: str | None = None,
                 expected_generation: int | None = None, recover: bool = True) -> None:
        if retain < 1:
            raise ValueError("retain must be >= 1")
        self.key = key
        self.repo = repo if isinstance(repo, Repository) else Repository.open(
            repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency)
        self.local_store = open_local_store(store_type)
        self.store_type = store_type
        self.work_dir = work_dir or workdir.store_work_dir(self.repo.url, key)
        self.ttl_ms = ttl_ms
        self.retain = retain
        self.chunk_size = max(1, chunk_size)
        self.progress: Progress = progress or NoProgress()
        self.writer_id = writer_id or f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._hooks = get_plugin_manager()
        os.makedirs(workdir.checkpoints_dir(self.work_dir), exist_ok=True)
        self._lock_fd = os.open(os.path.join(self.work_dir, workdir.LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise CommitInProgressError(f"another process is committing {key} (work dir {self.work_dir})") from None
        self.journal = Journal(os.path.join(self.work_dir, workdir.JOURNAL))
        self.journal.open()
        self.cache = ChecksumCache(os.path.join(self.work_dir, workdir.CRC_CACHE))
        self._generation: int | None = expected_generation
        self._prev: tuple[Checkpoint, SnapshotIndex] | None = None
        self.recovered: list[tuple[RecoveryAction, str]] = []
        self._needs_recovery = False  # a cleanup failed or an append was ambiguous: recover before the next commit
        if recover:
            try:
                self.recovered = self.recover()
            except BaseException:
                self.close()  # release the lock: a retry in this process must not see "another process"
                raise

    # -- context manager -------------------------------------------------------------------------------------
    def __enter__(self) -> StoreCommitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Save the checksum cache, close the journal and release the lock."""
        self.cache.save()
        self.journal.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None  # type: ignore[assignment]

    # -- journal ---------------------------------------------------------------------------------------------
    def _record(self, event: ev.Event, *, sync: bool = False) -> None:
        self.journal.append(event, sync=sync)
        self._hooks.emit("blobstate_journal_event", event=event, store_key=self.key)

    # -- step 1-2: local checkpoint --------------------------------------------------------------------------
    def checkpoint(self, source: object, *, batch_id: int | None = None) -> LocalCheckpoint:
        """Take the consistent local copy (synchronous; milliseconds for RocksDB). Journaled."""
        t0 = time.perf_counter()
        if self._needs_recovery:
            self.recover()
            self._needs_recovery = False
        expected = self._expected_generation()
        commit_id = new_checkpoint_id()
        self._record(ev.CommitStarted(commit_id, now_ms(), str(self.key), expected, batch_id, self.retain), sync=True)
        path = os.path.join(workdir.checkpoints_dir(self.work_dir), commit_id)
        try:
            self.local_store.create_checkpoint(source, path)
            with open(os.path.join(path, workdir.MARKER), "w", encoding="utf-8") as fh:
                json.dump({"checkpointId": commit_id, "storeKey": str(self.key), "batchId": batch_id}, fh)
        except Exception as exc:
            shutil.rmtree(path, ignore_errors=True)
            self._record(ev.CommitAborted(commit_id, now_ms(), f"local checkpoint failed: {exc}"), sync=True)
            self._compact()
            raise
        self._record(ev.LocalCheckpointCreated(commit_id, now_ms(), path), sync=True)
        return LocalCheckpoint(commit_id, path, batch_id, expected, now_ms(), (time.perf_counter() - t0) * 1000)

    def _expected_generation(self) -> int:
        if self._generation is None:
            latest = self.repo.log.latest(self.key)
            self._generation = latest.generation if latest else 0
        return self._generation

    def _previous(self) -> tuple[Checkpoint, SnapshotIndex] | None:
        """The checkpoint and index the next commit diffs against (the log's latest; cached after our commits)."""
        if self._prev is None:
            latest = self.repo.log.latest(self.key)
            if latest is not None:
                self._prev = (latest, self.repo.read_index(latest))
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
        committed = False
        try:
            prev = self._previous()
            if prev is not None and prev[0].generation != local.expected_generation:
                raise FencedError(
                    f"fenced: {self.key} is at generation {prev[0].generation}, this writer expected "
                    f"{local.expected_generation}", expected=local.expected_generation, actual=prev[0].generation)
            scanned = scan_directory(local.path, self.cache, is_mutable=self.local_store.is_mutable)
            plan = self._diff(scanned, prev[1] if prev else None)
            index_id = new_index_id(self.key)
            planned = tuple(r.blob_id for r in plan.puts)
            bytes_planned = sum(r.size for r in plan.puts)
            self._record(ev.UploadsPlanned(commit_id, now_ms(), planned, index_id, bytes_planned), sync=True)
            self._upload_blobs(commit_id, plan.puts, bytes_planned)
            self.journal.sync()
            self._check_ttl_budget(local)
            index = SnapshotIndex(
                checkpoint_id=commit_id, created_time_ms=local.created_ms, job_name=self.key.job,
                job_instance=self.writer_id, task_name=self.key.task, store_name=self.key.store,
                dir_index=build_dir_index(plan.files, plan.removed),
                prev_snapshot_index_blob_id=prev[0].index_blob_id if prev else None, batch_id=local.batch_id,
                store_type=self.store_type, retain=self.retain,
            )
            data = index.to_bytes()
            from blobstate.checksum import crc32c_bytes

            crc = crc32c_bytes(data)
            self.repo.store.put(PutRequest(index_id, data, self.ttl_ms))
            self._record(ev.IndexUploaded(commit_id, now_ms(), index_id, crc, len(data)), sync=True)
            record = Checkpoint(self.key, commit_id, 0, index_id, crc, len(data), local.created_ms,
                                local.batch_id, self.writer_id)
            checkpoint = self._append(record, local.expected_generation, commit_id)
            committed = True
            self._record(ev.CheckpointWritten(commit_id, now_ms(), checkpoint.generation), sync=True)
        except BaseException as exc:
            if not committed and not getattr(exc, "_blobstate_ambiguous", False):
                self._abort_quietly(commit_id, exc)
            else:  # the commit may or may not be in the log: forget what we cached, recover before the next one
                self._generation = None
                self._prev = None
                self._needs_recovery = True
            raise
        self._generation = checkpoint.generation
        self._prev = (checkpoint, index)
        upload_ms = (time.perf_counter() - t0) * 1000
        deleted = 0
        try:
            state = project(self.journal.read().events).get(commit_id)
            if state is not None:
                deleted = self._finish(state, checkpoint)
        except Exception as exc:  # noqa: BLE001 - the commit stands; recovery finishes the cleanup
            self._needs_recovery = True
            log.warning("commit %s of %s is committed, but its cleanup failed (recovery before the next commit "
                        "finishes it): %s", commit_id, self.key, redact(str(exc)))
        self.cache.retain([f.path for f in scan_directory(local.path, self.cache)])
        self.cache.save()
        return BackupResult(
            checkpoint=checkpoint, files_total=len(plan.files), files_uploaded=plan.files_uploaded,
            bytes_total=sum(f.size_in_bytes for f in plan.files.values()), bytes_uploaded=bytes_planned,
            checkpoint_ms=local.checkpoint_ms, upload_ms=upload_ms,
            duration_ms=local.checkpoint_ms + (time.perf_counter() - t0) * 1000, blobs_deleted=deleted,
        )

    def backup(self, source: object, *, batch_id: int | None = None) -> BackupResult:
        """``checkpoint()`` then ``upload()``."""
        return self.upload(self.checkpoint(source, batch_id=batch_id))

    def _diff(self, scanned: list[ScannedFile], prev: SnapshotIndex | None) -> _Plan:
        prev_files = prev.files() if prev else {}
        plan = _Plan()
        for f in scanned:
            old = prev_files.get(f.relpath)
            name = f.relpath.rsplit("/", 1)[-1]
            if old is not None and old.same_content(f.size, f.crc32c):
                plan.files[f.relpath] = old
                continue
            blobs = []
            for offset in range(0, f.size, self.chunk_size):
                length = min(self.chunk_size, f.size - offset)
                blob_id = new_blob_id(self.key)
                blobs.append(FileBlob(blob_id, offset))
                plan.puts.append(PutRequest(blob_id, FileRange(f.path, offset, length), self.ttl_ms))
            plan.files[f.relpath] = FileIndex(name, tuple(blobs), f.size, f.crc32c, f.mtime, f.ctime)
            plan.files_uploaded += 1
            if old is not None:
                plan.removed[f.relpath] = old
        for rel, old in prev_files.items():
            if rel not in plan.files:
                plan.removed[rel] = old
        return plan

    def _upload_blobs(self, commit_id: str, puts: list[PutRequest], total: int) -> None:
        self.progress.start(f"upload {self.key}", total, len(puts))

        def one(request: PutRequest) -> None:
            self.repo.store.put(request)
            self._record(ev.BlobUploaded(commit_id, now_ms(), request.blob_id, request.size))
            self.progress.advance(request.size, 1)

        try:
            self.repo.store.map_concurrent(one, sorted(puts, key=lambda r: -r.size))
        finally:
            self.progress.finish()

    def _check_ttl_budget(self, local: LocalCheckpoint) -> None:
        age = now_ms() - local.created_ms
        if age > self.ttl_ms // 2:
            raise StorageError(f"commit {local.commit_id} took {age} ms, more than half the blob TTL "
                               f"({self.ttl_ms} ms): its blobs could expire before it completes; raise --ttl")

    def _append(self, record: Checkpoint, expected: int, commit_id: str) -> Checkpoint:
        try:
            return self.repo.log.append(record, expected)
        except FencedError:
            raise
        except Exception as exc:
            # The append may have reached the log before the failure: look before aborting.
            try:
                history = self.repo.log.history(self.key)
            except Exception:  # noqa: BLE001
                exc._blobstate_ambiguous = True  # type: ignore[attr-defined]
                raise exc from None
            for cp in history:
                if cp.checkpoint_id == commit_id:
                    return cp
            raise

    # -- post-commit and abort (shared with recovery) --------------------------------------------------------
    def _finish(self, state: CommitState, checkpoint: Checkpoint | None = None) -> int:
        """Step 7 for a committed commit: remove TTL, apply retention, prune local checkpoints. Idempotent."""
        commit_id = state.commit_id
        new_ids = sorted(state.blob_ids - state.ttl_removed)
        if new_ids:
            self.repo.store.remove_ttl_many(new_ids)
        self._record(ev.TtlRemoved(commit_id, now_ms(), tuple(new_ids)), sync=True)
        deleted, pruned = self.apply_retention(state.retain or self.retain)
        self._record(ev.BlobsDeleted(commit_id, now_ms(), tuple(deleted), tuple(pruned)), sync=True)
        removed = self._prune_local(keep=state.local_path)
        self._record(ev.LocalCheckpointsPruned(commit_id, now_ms(), tuple(removed)), sync=True)
        self._record(ev.CommitCompleted(commit_id, now_ms()), sync=True)
        self._compact()
        return len(deleted)

    def apply_retention(self, retain: int | None = None) -> tuple[list[str], list[str]]:
        """Keep the newest ``retain`` (default: the committer's) checkpoints; delete the blobs only older ones
        reference, then their records.

        Returns ``(deleted blob ids, pruned checkpoint ids)``. Blobs are deleted before the records, so a crash in
        between is finished by running it again.
        """
        retain = max(1, retain or self.retain)
        history = self.repo.log.history(self.key)
        if len(history) <= retain:
            return [], []
        expiring, retained = history[:-retain], history[-retain:]
        keep = self.repo.retained_references(retained)
        doomed: set[str] = set()
        for cp in expiring:
            doomed.add(cp.index_blob_id)
            try:
                doomed |= self.repo.read_index(cp).referenced_blob_ids()
            except BlobstateError as exc:
                log.warning("checkpoint %s leaves retention with an unreadable index (%s); the orphan sweep of "
                            "`blobstate gc` reclaims its blobs", cp.checkpoint_id, redact(str(exc)))
        to_delete = sorted(doomed - keep)
        self.repo.store.delete_many(to_delete)
        pruned = self.repo.log.prune(self.key, retain)
        return to_delete, [cp.checkpoint_id for cp in pruned]

    def _prune_local(self, keep: str | None) -> list[str]:
        removed = []
        for path in workdir.local_checkpoint_dirs(self.work_dir):
            if keep is not None and os.path.abspath(path) == os.path.abspath(keep):
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        return removed

    def _abort(self, state: CommitState, reason: str) -> list[str]:
        """Delete what an uncommitted commit created (never a blob a retained snapshot references). Idempotent."""
        candidates = state.blob_ids
        if candidates:
            history = self.repo.log.history(self.key)
            if any(cp.checkpoint_id == state.commit_id for cp in history):
                raise StorageError(f"refusing to abort {state.commit_id}: the checkpoint log has it")
            candidates = candidates - self.repo.retained_references(history)
        to_delete = sorted(candidates)
        self.repo.store.delete_many(to_delete)
        self._record(ev.BlobsDeleted(state.commit_id, now_ms(), tuple(to_delete)), sync=True)
        removed = []
        if state.local_path and os.path.isdir(state.local_path):
            shutil.rmtree(state.local_path, ignore_errors=True)
            removed.append(state.local_path)
        self._record(ev.LocalCheckpointsPruned(state.commit_id, now_ms(), tuple(removed)), sync=True)
        self._record(ev.CommitAborted(state.commit_id, now_ms(), reason[:500]), sync=True)
        self._compact()
        return to_delete

    def _abort_quietly(self, commit_id: str, exc: BaseException) -> None:
        try:
            state = project(self.journal.read().events).get(commit_id)
            if state is not None and state.is_open:
                self._abort(state, f"{type(exc).__name__}: {exc}")
        except Exception as cleanup_exc:  # noqa: BLE001 - the original error matters more
            self._needs_recovery = True
            log.warning("abort of commit %s is unfinished (recovery or TTL will finish it): %s", commit_id,
                        redact(str(cleanup_exc)))
        if not isinstance(exc, FencedError):
            self._generation = None  # re-read on the next commit
            self._prev = None

    def _compact(self) -> None:
        states = project(self.journal.read().events)
        open_events = [e for s in states.values() if s.is_open for e in s.events]
        self.journal.compact(open_events)

    # -- recovery --------------------------------------------------------------------------------------------
    def plan(self) -> list[RecoveryAction]:
        """The recovery actions for the journal's open commits (pure planning after reading the log)."""
        states = project(self.journal.read().events)
        if not any(s.is_open for s in states.values()):
            return []
        committed = [cp.checkpoint_id for cp in self.repo.log.history(self.key)]
        return plan_recovery(states, committed)

    def recover(self, *, dry_run: bool = False,
                report: Callable[[RecoveryAction, str], None] | None = None) -> list[tuple[RecoveryAction, str]]:
        """Plan and (unless ``dry_run``) execute recovery; returns ``(action, outcome)`` pairs."""
        results = []
        for action in self.plan():
            if dry_run:
                outcome = "planned"
            elif isinstance(action, FinishCommit):
                checkpoint = next((cp for cp in self.repo.log.history(self.key)
                                   if cp.checkpoint_id == action.state.commit_id), None)
                if action.state.generation is None and checkpoint is not None:
                    self._record(ev.CheckpointWritten(action.state.commit_id, now_ms(), checkpoint.generation),
                                 sync=True)
                state = project(self.journal.read().events)[action.state.commit_id]
                deleted = self._finish(state, checkpoint)
                outcome = f"finished: TTL removed, {deleted} blobs deleted by retention"
            else:
                deleted_ids = self._abort(action.state, action.reason)
                outcome = f"aborted: {len(deleted_ids)} blobs deleted"
            results.append((action, outcome))
            if report:
                report(action, outcome)
        return results

    def init_cleanup(self) -> None:
        """Samza's restore-time init without a journal (a new host): remove the TTL of everything the latest
        checkpoint references and apply the retention its writer recorded (the deferred deletes: with a
        retention of 1, exactly the blobs its ``filesRemoved`` lists). A snapshot that records no retention
        (an older writer) is not pruned at all."""
        latest = self.repo.log.latest(self.key)
        if latest is None:
            return
        index = self.repo.read_index(latest)
        self.repo.store.remove_ttl_many(sorted(index.referenced_blob_ids() | {latest.index_blob_id}))
        if index.retain is not None:
            self.apply_retention(index.retain)
