"""The public Python API: ``backup``, ``restore``, ``list_checkpoints``, ``verify``, ``gc``, ``recover``.

Each opens the repository (blob store + checkpoint log) from URLs through the plugins, does one job, and closes it.
``StoreCommitter`` (``blobstate.commit``) is the long-lived form for a job that commits repeatedly (Spark).
"""

from __future__ import annotations

import os
import time
from typing import Any

from blobstate import workdir
from blobstate.backends import detect_store_type, open_local_store
from blobstate.checksum import ChecksumCache
from blobstate.collecting import GcReport, collect, discover_keys
from blobstate.commit import BackupResult, LocalCheckpoint, Progress, StoreCommitter
from blobstate.model import Checkpoint, StoreKey
from blobstate.repository import DEFAULT_TTL_MS, Repository
from blobstate.restoring import RestoreResult, restore_snapshot
from blobstate.verifying import VerifyReport, raise_for_reports, verify_checkpoint

__all__ = [
    "BackupResult", "GcReport", "LocalCheckpoint", "Repository", "RestoreResult", "StoreCommitter", "VerifyReport",
    "backup", "gc", "list_checkpoints", "recover", "restore", "verify",
]


def _key(job: str, task: str, store: str | None, directory: str) -> StoreKey:
    return StoreKey(job, task, store or os.path.basename(os.path.abspath(directory).rstrip("/")))


def backup(source_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
           store: str | None = None, store_type: str | None = None, batch_id: int | None = None,
           source: object | None = None, **opts: Any) -> BackupResult:
    """Back up the store at ``source_dir`` (or the live handle ``source``) as a new committed snapshot.

    ``opts`` go to ``StoreCommitter`` (``ttl_ms``, ``retain``, ``chunk_size``, ``max_concurrency``,
    ``storage_options``, ``ttl_mode``, ``work_dir``, ``progress``, ``expected_generation``). Raises
    ``FencedError`` (exit 4), ``StorageError``, ``ConfigurationError``.
    """
    key = _key(job, task, store, source_dir)
    store_type = store_type or detect_store_type(source_dir)
    with StoreCommitter(key, repo, log=log, store_type=store_type, **opts) as committer:
        return committer.backup(source if source is not None else source_dir, batch_id=batch_id)


def restore(dest_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
            store: str | None = None, store_type: str | None = None, checkpoint_id: str | None = None,
            max_batch_id: int | None = None, storage_options: dict[str, Any] | None = None,
            ttl_mode: str | None = None, max_concurrency: int = 8, work_dir: str | None = None,
            progress: Progress | None = None, cleanup: bool = True, validate: bool = True) -> RestoreResult:
    """Restore the latest checkpoint (or ``checkpoint_id``, or the newest with ``batch_id <= max_batch_id``)
    into ``dest_dir``, downloading only what is missing or different.

    With ``cleanup`` the init step runs afterwards: recovery of this host's journal, or without one (a new host)
    TTL removal and retention from the index alone. Raises ``NothingToRestore`` (exit 5), ``IntegrityError``
    subclasses (exit 3; the destination is left as it was).
    """
    key = _key(job, task, store, dest_dir)
    repository = Repository.open(repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode,
                                 max_concurrency=max_concurrency)
    try:
        checkpoint = repository.choose(key, checkpoint_id=checkpoint_id, max_batch_id=max_batch_id)
        wd = work_dir or workdir.store_work_dir(repository.url, key)
        index_type = store_type or _recorded_store_type(repository, checkpoint)
        result = restore_snapshot(repository, checkpoint, dest_dir, local_store=open_local_store(index_type),
                                  work_dir=wd, cache=ChecksumCache(os.path.join(wd, workdir.CRC_CACHE)),
                                  progress=progress, validate=validate)
        if cleanup:
            _init_cleanup(repository, key, wd, index_type)
        return result
    finally:
        repository.close()


def _recorded_store_type(repository: Repository, checkpoint: Checkpoint) -> str:
    """The store type the snapshot records (older snapshots: ``rocksdb`` if it has a ``CURRENT`` file)."""
    index = repository.read_index(checkpoint)
    if index.store_type:
        return index.store_type
    return "rocksdb" if "CURRENT" in index.files() else "dir"


def _init_cleanup(repository: Repository, key: StoreKey, wd: str, store_type: str) -> None:
    from blobstate.errors import CommitInProgressError

    try:
        committer = StoreCommitter(key, repository, store_type=store_type, work_dir=wd, recover=True)
    except CommitInProgressError:
        return  # the committing process on this host does its own cleanup
    with committer:
        committer.init_cleanup()


def list_checkpoints(*, repo: str, log: str | None = None, key: StoreKey,
                     storage_options: dict[str, Any] | None = None) -> list[Checkpoint]:
    """Retained checkpoints of ``key``, oldest first."""
    repository = Repository.open(repo, log=log, storage_options=storage_options)
    try:
        return repository.log.history(key)
    finally:
        repository.close()


def verify(*, repo: str, key: StoreKey, log: str | None = None, checkpoint_id: str | None = None,
           all_checkpoints: bool = False, storage_options: dict[str, Any] | None = None,
           max_concurrency: int = 8, raise_on_error: bool = True) -> list[VerifyReport]:
    """Read every blob of the chosen checkpoint(s) and check sizes and CRC32C.

    Raises ``ChecksumMismatch`` (exit 3) naming each damaged file when ``raise_on_error``.
    """
    repository = Repository.open(repo, log=log, storage_options=storage_options, max_concurrency=max_concurrency)
    try:
        if all_checkpoints:
            checkpoints = repository.log.history(key)
            if not checkpoints:
                from blobstate.errors import NothingToRestore

                raise NothingToRestore(f"no checkpoint for {key}")
        else:
            checkpoints = [repository.choose(key, checkpoint_id=checkpoint_id)]
        reports = [verify_checkpoint(repository, cp) for cp in checkpoints]
        if raise_on_error:
            raise_for_reports(reports)
        return reports
    finally:
        repository.close()


def gc(*, repo: str, log: str | None = None, keys: list[StoreKey] | None = None, dry_run: bool = False,
       ttl_ms: int = DEFAULT_TTL_MS, retain: int | None = None, now_ms: int | None = None,
       storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
       work_base: str | None = None) -> list[GcReport]:
    """Delete expired and orphaned blobs of every store (or ``keys``) in the repository.

    ``retain`` defaults to each store's recorded retention (see ``blobstate.collecting.collect``).
    """
    repository = Repository.open(repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode)
    try:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        return [collect(repository, key, now_ms=now, ttl_ms=ttl_ms, retain=retain, dry_run=dry_run,
                        work_base=work_base) for key in (keys or discover_keys(repository))]
    finally:
        repository.close()


def recover(*, repo: str, key: StoreKey, log: str | None = None, work_dir: str | None = None,
            dry_run: bool = False, store_type: str = "dir", storage_options: dict[str, Any] | None = None,
            report: Any = None) -> list[Any]:
    """Replay this host's journal of ``key``: finish committed commits, abort the others."""
    with StoreCommitter(key, repo, log=log, store_type=store_type, work_dir=work_dir, recover=False,
                        storage_options=storage_options) as committer:
        return committer.recover(dry_run=dry_run, report=report)
