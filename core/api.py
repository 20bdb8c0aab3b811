"""The public Python API: one function per verb, each opening the repository from URLs, doing one job, closing it.

``backup``, ``restore``, ``list_stores``, ``list_checkpoints``, ``verify``, ``gc``, ``recover``,
``journal_events``, ``lifecycle_rule``. ``StoreCommitter`` (``blobstate.pipelines.backup``) is the long-lived form
for a job that commits repeatedly (Spark). The CLI calls only these functions.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from blobstate import layout, workdir
from blobstate.backends import detect_store_type, normalize_url, open_blob_store, open_local_store
from blobstate.checksum import ChecksumCache
from blobstate.errors import NothingToRestore
from blobstate.journal.file import Journal, JournalRead
from blobstate.layout import DEFAULT_CHUNK_SIZE, DEFAULT_TTL_MS
from blobstate.model import Checkpoint, StoreKey
from blobstate.pipelines import planner
from blobstate.pipelines.backup import BackupResult, LocalCheckpoint, StoreCommitter
from blobstate.pipelines.gc import GcReport, collect, collect_temporaries, discover_keys
from blobstate.pipelines.planner import BackupPreview
from blobstate.pipelines.recover import Report, cleanup_after_restore
from blobstate.pipelines.recover import recover as replay_journal
from blobstate.pipelines.restore import RestoreResult, restore_snapshot
from blobstate.pipelines.session import StoreSession
from blobstate.pipelines.verify import VerifyReport, raise_for_reports, verify_checkpoint
from blobstate.progress import Progress
from blobstate.repository import Repository

__all__ = [
    "BackupPreview", "BackupResult", "GcReport", "LocalCheckpoint", "Repository", "RestoreResult", "StoreCommitter",
    "VerifyReport",
    "backup", "gc", "journal_events", "lifecycle_rule", "list_checkpoints", "list_stores", "preview_backup",
    "raise_for_reports", "recover", "restore", "verify",
]


def backup(source_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
           store: str | None = None, store_type: str | None = None, batch_id: int | None = None,
           source: object | None = None, dry_run: bool = False, **opts: Any) -> BackupResult | BackupPreview:
    """Back up the store at ``source_dir`` (or the live handle ``source``) as a new committed snapshot.

    ``opts`` go to ``StoreCommitter`` (``ttl_ms``, ``retain``, ``chunk_size``, ``max_concurrency``,
    ``storage_options``, ``ttl_mode``, ``work_dir``, ``progress``, ``expected_generation``). Raises
    ``FencedError`` (exit 4), ``StorageError``, ``ConfigurationError``.

    With ``dry_run`` nothing is committed: a ``BackupPreview`` of what would be uploaded and dropped against the
    latest snapshot (see ``preview_backup``).
    """
    key = StoreKey.for_directory(source_dir, job=job, task=task, store=store)
    store_type = store_type or detect_store_type(source_dir)
    if dry_run:
        return preview_backup(source if source is not None else source_dir, key=key, repo=repo, log=log,
                              store_type=store_type, **opts)
    with StoreCommitter(key, repo, log=log, store_type=store_type, **opts) as committer:
        return committer.backup(source if source is not None else source_dir, batch_id=batch_id)


def restore(dest_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
            store: str | None = None, store_type: str | None = None, checkpoint_id: str | None = None,
            max_batch_id: int | None = None, storage_options: dict[str, Any] | None = None,
            ttl_mode: str | None = None, max_concurrency: int = 8, work_dir: str | None = None,
            progress: Progress | None = None, cleanup: bool = True, validate: bool = True, force: bool = False,
            dry_run: bool = False) -> RestoreResult:
    """Restore the latest checkpoint (or ``checkpoint_id``, or the newest with ``batch_id <= max_batch_id``)
    into ``dest_dir``, downloading only what is missing or different; afterwards ``dest_dir`` holds exactly the
    snapshot's entries.

    A non-empty ``dest_dir`` that no restore of this store made is refused unless ``force``; one a live process
    holds open always is. With ``dry_run`` the result lists the changes and nothing is written (no cleanup
    either). With ``cleanup`` the init step runs afterwards: recovery of this host's journal, then TTL removal and
    retention from the index alone (Samza's init on a new host). Raises ``NothingToRestore`` (exit 5),
    ``IntegrityError`` subclasses (exit 3), ``RestoreRefused`` (exit 2), ``LocalStoreError``: in every case the
    destination is left as it was.
    """
    key = StoreKey.for_directory(dest_dir, job=job, task=task, store=store)
    repository = Repository.open(repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode,
                                 max_concurrency=max_concurrency)
    try:
        checkpoint = repository.choose(key, checkpoint_id=checkpoint_id, max_batch_id=max_batch_id)
        wd = work_dir or workdir.store_work_dir(repository.url, key)
        index_type = store_type or _recorded_store_type(repository, checkpoint)
        result = restore_snapshot(repository, checkpoint, dest_dir, local_store=open_local_store(index_type),
                                  work_dir=wd, cache=ChecksumCache(os.path.join(wd, workdir.CRC_CACHE)),
                                  progress=progress, validate=validate, force=force, dry_run=dry_run)
        if cleanup and not dry_run:
            cleanup_after_restore(repository, key, wd)
        return result
    finally:
        repository.close()


def preview_backup(source: object, *, key: StoreKey, repo: str, log: str | None = None, store_type: str = "rocksdb",
                   chunk_size: int = DEFAULT_CHUNK_SIZE, storage_options: dict[str, Any] | None = None,
                   work_dir: str | None = None, **_ignored: Any) -> BackupPreview:
    """What a backup of ``source`` would upload and drop against the latest snapshot, committing nothing: no
    commit lock, no journal, nothing written to the repository. The local checkpoint is taken in a temporary
    directory (beside the store's local checkpoints when they exist, for hard links) and removed again."""
    repository = Repository.open(repo, log=log, storage_options=storage_options)
    try:
        latest = repository.log.latest(key)
        prev = repository.read_index(latest) if latest is not None else None
        local_store = open_local_store(store_type)
        wd = work_dir or workdir.store_work_dir(repository.url, key)
        parent = workdir.checkpoints_dir(wd)
        tmp = tempfile.mkdtemp(prefix=".dry-run-", dir=parent if os.path.isdir(parent) else None)
        try:
            target = os.path.join(tmp, "checkpoint")
            local_store.create_checkpoint(source, target)
            scanned = planner.scan_directory(target, ChecksumCache(os.path.join(wd, workdir.CRC_CACHE)),
                                             is_mutable=local_store.is_mutable)
            plan = planner.diff(scanned, prev, key=key, chunk_size=chunk_size, ttl_ms=DEFAULT_TTL_MS)
            return planner.BackupPreview.of(plan, prev)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        repository.close()


def _recorded_store_type(repository: Repository, checkpoint: Checkpoint) -> str:
    """The store type the snapshot records (older snapshots: ``rocksdb`` if it has a ``CURRENT`` file)."""
    index = repository.read_index(checkpoint)
    if index.store_type:
        return index.store_type
    return "rocksdb" if "CURRENT" in index.files() else "dir"


def list_stores(*, repo: str, log: str | None = None, storage_options: dict[str, Any] | None = None
                ) -> list[StoreKey]:
    """Every store key the repository (or its checkpoint log) holds, sorted."""
    repository = Repository.open(repo, log=log, storage_options=storage_options)
    try:
        return discover_keys(repository)
    finally:
        repository.close()


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

    Raises ``ChecksumMismatch`` (exit 3) naming each damaged file when ``raise_on_error``, ``NothingToRestore``
    (exit 5) when the store has no checkpoint.
    """
    repository = Repository.open(repo, log=log, storage_options=storage_options, max_concurrency=max_concurrency)
    try:
        if all_checkpoints:
            checkpoints = repository.log.history(key)
            if not checkpoints:
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

    ``retain`` defaults to each store's recorded retention (see ``blobstate.pipelines.gc.collect``).
    """
    repository = Repository.open(repo, log=log, storage_options=storage_options, ttl_mode=ttl_mode)
    try:
        now = now_ms if now_ms is not None else layout.now_ms()
        reports = [collect(repository, key, now_ms=now, ttl_ms=ttl_ms, retain=retain, dry_run=dry_run,
                           work_base=work_base) for key in (keys or discover_keys(repository))]
        if keys is None:
            temporaries = collect_temporaries(repository, now_ms=now, ttl_ms=ttl_ms, dry_run=dry_run)
            if temporaries.temporaries_deleted:
                reports.append(temporaries)
        return reports
    finally:
        repository.close()


def lifecycle_rule(*, repo: str, ttl_ms: int = DEFAULT_TTL_MS, storage_options: dict[str, Any] | None = None,
                   install: bool = False) -> tuple[str | None, bool]:
    """The cloud lifecycle rule that expires TTL-tagged blobs (native TTL), and whether it was installed.

    Returns ``(None, False)`` for a store without native TTL (leases, swept by ``gc``), ``(rule, False)`` when the
    rule must be installed by hand (or ``install`` is false), ``(rule, True)`` once installed.
    """
    from blobstate.errors import ConfigurationError

    try:
        store = open_blob_store(repo, storage_options=storage_options, ttl_mode="native")
    except ConfigurationError:
        return None, False  # no native TTL here
    try:
        rule = store.lifecycle_rule(ttl_ms)
        return rule, bool(rule is not None and install and store.install_lifecycle(ttl_ms))
    finally:
        store.close()


def recover(*, repo: str, key: StoreKey, log: str | None = None, work_dir: str | None = None,
            dry_run: bool = False, storage_options: dict[str, Any] | None = None,
            report: Report | None = None) -> list[Any]:
    """Replay this host's journal of ``key``: finish committed commits, abort the others.

    Returns ``(action, outcome)`` pairs; ``report`` is called with each as it completes.
    """
    repository = Repository.open(repo, log=log, storage_options=storage_options)
    try:
        with StoreSession(key, work_dir or workdir.store_work_dir(repository.url, key)) as session:
            return replay_journal(session, repository, dry_run=dry_run, report=report)
    finally:
        repository.close()


def journal_events(*, work_dir: str | None = None, repo: str | None = None, key: StoreKey | None = None,
                   work_base: str | None = None, strict: bool = True) -> JournalRead:
    """The events of a store's journal, read without changing it: from ``work_dir`` (the store's work
    directory), or from the one ``repo`` and ``key`` map to under ``work_base``.

    With ``strict`` a record damaged in the middle raises ``CorruptJournalError`` (exit 3); without, the events
    before the damage are returned and the rest is reported as the torn tail.
    """
    if work_dir is None:
        if repo is None or key is None:
            raise ValueError("give work_dir, or repo and key")
        work_dir = workdir.store_work_dir(normalize_url(repo), key, work_base)
    return Journal(os.path.join(work_dir, workdir.JOURNAL)).read(strict=strict)
