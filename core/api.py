"""The public Python API: one function per verb, each opening the repository from URLs, doing one job, closing it.

The verbs are ``__all__``'s functions (``read_state`` and ``read_changes``: a store's keys and values as data;
``copy``: replicate a repository; ``rotate_key``: re-wrap an encrypted repository's data key);
``StoreCommitter`` (``blobstate.commit.backup``) is the long-lived form for a job that commits repeatedly (Spark).
The CLI calls only these functions.

One naming scheme across the API, the CLI and JSON: a store is named by ``job``, ``task``, ``store`` (``--job``,
``--task``, ``--store``; JSON ``store: "job/task/store"``); a checkpoint by ``checkpoint`` (``--checkpoint``:
``latest``, an id, a unique prefix or a generation; JSON ``checkpointId``, ``generation``); durations by ``ttl``
(``--ttl 1d``; an int is milliseconds) and sizes by ``chunk_size`` (``--chunk-size 64MiB``; an int is bytes);
``work_base`` is the work directory base (``--work-dir``, ``BLOBSTATE_WORK_DIR``), ``work_dir`` one store's own.
A reader given no ``task`` finds its store under ``0`` (a store on the driver) or ``group`` (a partitioned store),
whichever holds checkpoints (``blobstate.entry.find_store``, as ``blobstate.spark.read_state`` does); a writer's
``task`` defaults to ``0``.
Every verb opens its repository with ``with`` (``Repository`` is a context manager).

Every verb takes ``settings`` (a ``blobstate.config.settings.Settings``: the CLI hands its command's in), builds
what it runs with from them, or from the environment, and its own setting keywords (``Settings.for_call``:
``work_base``, ``append_only``, ``limit_upload``, ``limit_download``), and hands them down: through the entry room
(``blobstate.entry``, where it names its store and opens its repository) to everything below.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blobstate.config.settings import Settings
from blobstate.config.units import Duration, Options, Size
from blobstate.entry import engine_log, find_store, name_store, open_repository, warn_unconfirmed
from blobstate.maintenance.queries import (  # the read-only verbs, re-exported
    describe_checkpoints,
    diff,
    journal_events,
    list_checkpoints,
    list_stores,
    ls,
    read_changes,
    read_state,
    require_store,
    stats,
    unfinished_commits,
)
from blobstate.model.layout import DEFAULT_CHUNK_SIZE, DEFAULT_RETAIN, DEFAULT_TTL_MS
from blobstate.repository.admin import init, lifecycle_rule, rotate_key  # the repository's own verbs, re-exported

# Each verb imports the rooms it needs when it runs (``blobstate backup`` never imports restore, maintenance or
# rich: ``python -X importtime -m blobstate.cli backup ...``); the names re-exported here resolve on first use
# (``__getattr__`` below, PEP 562), and type checkers see them through these imports.
if TYPE_CHECKING:
    from blobstate.commit.backup import BackupResult, LocalCheckpoint, StoreCommitter
    from blobstate.commit.copy import CopyReport
    from blobstate.commit.preview import BackupPreview
    from blobstate.commit.recover import Report
    from blobstate.journal.projection import CommitState
    from blobstate.maintenance.catalog import CheckpointSummary, Listing, SnapshotDiff, StoreStats
    from blobstate.maintenance.gc import GcReport
    from blobstate.maintenance.verify import DataSubset, VerifyReport, raise_for_reports
    from blobstate.model.progress import Progress
    from blobstate.model.records import StoreKey
    from blobstate.model.retention import RetentionPolicy
    from blobstate.repository.marker import RepositoryInfo
    from blobstate.repository.repo import Repository
    from blobstate.restoring.entries import Undecoded
    from blobstate.restoring.group import GroupRestoreResult
    from blobstate.restoring.snapshot import RestoreResult
    from blobstate.restoring.state import Change

_logger = logging.getLogger(__name__)

__all__ = [
    "BackupPreview", "BackupResult", "CheckpointSummary", "CommitState", "Duration", "GcReport", "Listing",
    "LocalCheckpoint", "Repository", "RepositoryInfo", "RestoreResult", "Size", "SnapshotDiff", "StoreCommitter",
    "StoreStats", "VerifyReport", "backup", "describe_checkpoints", "diff", "gc", "init", "journal_events",
    "lifecycle_rule", "list_checkpoints", "list_stores", "ls", "preview_backup", "raise_for_reports", "recover",
    "recover_all", "require_store", "restore", "rotate_key", "stats", "unfinished_commits", "verify",
    "Change", "Undecoded", "read_changes", "read_state", "GroupRestoreResult", "restore_partitions",
    "CopyReport", "DataSubset", "RetentionPolicy", "copy",  # issue 33: copy, sampled verify, retention policies
]

#: The names this module re-exports, by the module that defines them (imported on first use).
_REEXPORTED: dict[str, str] = {name: f"blobstate.{module}" for module, names in (
    ("commit.backup", "BackupResult LocalCheckpoint StoreCommitter"), ("commit.preview", "BackupPreview"),
    ("journal.projection", "CommitState"), ("maintenance.catalog", "CheckpointSummary Listing SnapshotDiff StoreStats"),
    ("maintenance.gc", "GcReport"), ("maintenance.verify", "DataSubset VerifyReport raise_for_reports"),
    ("commit.copy", "CopyReport"), ("model.retention", "RetentionPolicy"),
    ("repository.marker", "RepositoryInfo"), ("repository.repo", "Repository"), ("restoring.snapshot", "RestoreResult"),
    ("restoring.group", "GroupRestoreResult"), ("restoring.state", "Change"), ("restoring.entries", "Undecoded"),
) for name in names.split()}


def __getattr__(name: str) -> Any:
    module = _REEXPORTED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_REEXPORTED))


def backup(source_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
           store: str | None = None, store_type: str | None = None, batch_id: int | None = None,
           source: object | None = None, ttl: Duration = DEFAULT_TTL_MS, retain: int | None = None,
           retention: RetentionPolicy | str | None = None, chunk_size: Size = DEFAULT_CHUNK_SIZE,
           max_concurrency: int = 8, storage_options: Options = None, log_options: Options = None,
           ttl_mode: str | None = None, work_base: str | None = None, work_dir: str | None = None,
           progress: Progress | None = None, expected_generation: int | None = None, create: bool = True,
           on_create: Callable[[str], None] | None = None, append_only: bool | None = None,
           limit_upload: Size | None = None, limit_download: Size | None = None,
           settings: Settings | None = None) -> BackupResult:
    """Back up the store at ``source_dir`` (or the live handle ``source``) as a new committed snapshot.

    ``ttl``: how long new blobs live unless their commit completes; ``retain``: newest checkpoints kept, or
    ``retention``: a ``RetentionPolicy`` (restic's ``forget`` rules, or their text ``"last=3,daily=7"``); neither:
    the policy the store's latest snapshot records (default: the newest ``DEFAULT_RETAIN``). ``append_only``: delete
    nothing (retention and aborts are left to ``gc``); ``limit_upload``/``limit_download``: bytes per second
    (``10MiB``), for every transfer of the call; ``settings``: what the call runs with (module docstring).
    ``chunk_size``: bytes per blob; ``expected_generation``: fence against it instead of the log's latest. The
    first backup into an empty location creates the repository (``preview_backup`` says what a backup would do,
    committing nothing); with ``create=False`` a location without a repository is refused (``RepositoryNotFound``)
    instead, and ``on_create(url)`` (redacted URL) is called when this backup created the repository. Raises
    ``FencedError`` (exit 4), ``RepositoryNotFound`` (exit 6, a location holding other objects),
    ``StorageError``, ``ConfigurationError``.
    """
    from blobstate.commit.backup import StoreCommitter
    from blobstate.config.options import redact
    from blobstate.config.units import parse_duration_ms, parse_size
    from blobstate.model.retention import RetentionPolicy
    from blobstate.repository import host
    from blobstate.repository.backends import detect_store_type

    settings = Settings.for_call(settings, work_base=work_base, append_only=append_only, limit_upload=limit_upload,
                                 limit_download=limit_download)
    key = name_store(job, task, store, directory=source_dir)
    store_type = store_type or detect_store_type(source_dir, settings=settings)
    policy = RetentionPolicy.of(retention) if retention is not None else (
        RetentionPolicy(last=retain) if retain is not None else None)
    with open_repository(repo, log, storage_options, log_options, settings=settings, create=create,
                         ttl_mode=ttl_mode, max_concurrency=max_concurrency) as repository:
        if on_create is not None and repository.info is not None and repository.info.created:
            on_create(str(redact(repository.url)))
        with StoreCommitter(key, repository, store_type=store_type, work_dir=work_dir or host.work_dir(repository, key),
                            ttl_ms=parse_duration_ms(ttl), retention=policy or RetentionPolicy(last=DEFAULT_RETAIN),
                            chunk_size=parse_size(chunk_size), max_concurrency=max_concurrency, progress=progress,
                            expected_generation=expected_generation) as committer:
            if policy is None:
                committer.use_recorded_retention()
            return committer.backup(source if source is not None else source_dir, batch_id=batch_id)


def preview_backup(source_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str = "0",
                   store: str | None = None, store_type: str | None = None, source: object | None = None,
                   chunk_size: Size = DEFAULT_CHUNK_SIZE, storage_options: Options = None,
                   log_options: Options = None, work_base: str | None = None, work_dir: str | None = None,
                   settings: Settings | None = None) -> BackupPreview:
    """``backup --dry-run``: what a backup of ``source_dir`` would upload and drop against the latest snapshot,
    committing nothing (no lock, no journal, nothing written to the repository). Raises ``RepositoryNotFound``."""
    from blobstate.commit.preview import preview_backup as run_preview
    from blobstate.config.units import parse_size
    from blobstate.repository import host
    from blobstate.repository.backends import detect_store_type

    settings = Settings.for_call(settings, work_base=work_base)
    key = name_store(job, task, store, directory=source_dir)
    with open_repository(repo, log, storage_options, log_options, settings=settings) as repository:
        return run_preview(repository, source if source is not None else source_dir, key=key,
                           store_type=store_type or detect_store_type(source_dir, settings=settings),
                           chunk_size=parse_size(chunk_size), work_dir=work_dir or host.work_dir(repository, key))


def restore(dest_dir: str, *, repo: str, log: str | None = None, job: str = "default", task: str | None = None,
            store: str | None = None, store_type: str | None = None, checkpoint: str | int | None = None,
            max_batch_id: int | None = None, storage_options: Options = None, log_options: Options = None,
            ttl_mode: str | None = None, max_concurrency: int = 8, work_base: str | None = None,
            work_dir: str | None = None, progress: Progress | None = None, cleanup: bool = True,
            validate: bool = True, force: bool = False, dry_run: bool = False,
            partition: int | None = None, verify_kept: str = "cache", append_only: bool | None = None,
            limit_download: Size | None = None, limit_upload: Size | None = None,
            checkpoint_location: str | None = None, settings: Settings | None = None) -> RestoreResult:
    """Restore the latest state (or ``checkpoint``: ``latest``, an id, a unique prefix or a generation; or the
    state after batch ``max_batch_id``; or, with ``checkpoint_location``, the state after the batch the query's
    Spark checkpoint location says it committed) into ``dest_dir``, downloading only what is missing or different; a
    store with delta records gets its snapshot, then the deltas after it (``blobstate.restoring.chain``). Without a
    checkpoint location, the newest state of a query's store may be of a batch Spark re-runs: a warning says so.

    Afterwards ``dest_dir`` holds exactly the snapshot's entries. A non-empty ``dest_dir`` that no restore of this
    store made is refused unless ``force``; one a live process holds open always is, and so is one that is,
    holds or lies inside the repository, the log or the work directory (``UnsafeDestination``, exit 2: a restore
    never deletes them, ``blobstate.restoring.guard``). With ``dry_run`` the result
    lists the changes and nothing is written (no cleanup either). With ``cleanup`` the init step runs afterwards:
    recovery of this host's journal, then TTL removal and retention from the index alone (Samza's init on a new
    host; with ``append_only`` it deletes nothing). Each snapshot index is read once
    (``Repository.reading_indexes_once``): the store type, the restore and the init cleanup share it.
    ``verify_kept``: how a file already in ``dest`` is known to be the snapshot's: ``cache`` (read unless this
    host's checksums, keyed with ctime, vouch for it), ``identity`` (an immutable file by its size and nanosecond
    mtime, unread) or ``full`` (read; ``blobstate.restoring.plan``). ``limit_download``/``limit_upload``: bytes
    per second, as in ``backup``. Raises ``RepositoryNotFound`` (exit 6), ``NothingToRestore`` (exit 5),
    ``IntegrityError`` subclasses (exit 3), ``RestoreRefused`` (exit 2), ``LocalStoreError``: in every case the
    destination is left as it was.
    """
    from blobstate.commit.recover import cleanup_after_restore
    from blobstate.local import workdir
    from blobstate.local.checksum import ChecksumCache
    from blobstate.repository import host
    from blobstate.repository.backends import open_local_store
    from blobstate.restoring import chain as replay
    from blobstate.restoring import guard
    from blobstate.restoring.snapshot import recorded_store_type

    settings = Settings.for_call(settings, work_base=work_base, append_only=append_only, limit_upload=limit_upload,
                                 limit_download=limit_download)
    with open_repository(repo, log, storage_options, log_options, settings=settings, ttl_mode=ttl_mode,
                         max_concurrency=max_concurrency) as repository, repository.reading_indexes_once():
        key = find_store(repository, job, task, store, directory=dest_dir)
        chain = replay.plan(repository, key, checkpoint=checkpoint, max_batch_id=max_batch_id, partition=partition,
                            engine=engine_log(checkpoint_location))
        _logger.info("restoring %s: %s", key, chain.describe())
        if checkpoint_location is None and checkpoint in (None, "latest") and max_batch_id is None:
            warn_unconfirmed(key, chain.records)
        wd = work_dir or host.work_dir(repository, key)
        guard.check_restore_destination(dest_dir, repo_url=repository.url, log_url=log, work_dir=wd,
                                        work_base=settings.work_base)
        index_type = store_type or (recorded_store_type(repository, chain.snapshot) if chain.snapshot else "rocksdb")
        result = replay.restore_chain(repository, chain, dest_dir,
                                      local_store=open_local_store(index_type, settings=settings),
                                      store_type=index_type, work_dir=wd, progress=progress, validate=validate,
                                      cache=ChecksumCache(os.path.join(wd, workdir.CRC_CACHE)), force=force,
                                      dry_run=dry_run, verify_kept=verify_kept)
        if cleanup and not dry_run:
            _logger.info("init cleanup of %s (journal recovery, TTL removal, retention)", key)
            cleanup_after_restore(repository, key, wd)
        return result


def restore_partitions(dest_dir: str, *, repo: str, log: str | None = None, job: str = "default",
                       task: str | None = None, store: str, partitions: list[int] | None = None,
                       max_batch_id: int | None = None,
                       storage_options: Options = None, log_options: Options = None, max_concurrency: int = 8,
                       work_base: str | None = None, cleanup: bool = True, force: bool = False, dry_run: bool = False,
                       verify_kept: str = "cache", append_only: bool | None = None,
                       limit_download: Size | None = None, limit_upload: Size | None = None,
                       checkpoint_location: str | None = None,
                       settings: Settings | None = None) -> GroupRestoreResult:
    """Restore every partition of a partitioned store (or ``partitions``) into ``dest_dir/<p>/`` in this process,
    ``max_concurrency`` partitions at a time (``blobstate.restoring.group``); each partition as ``restore(...,
    partition=p)`` restores it (``append_only``, ``limit_download``, ``limit_upload`` too). The result has each
    partition's and the group's throughput; ``checkpoint_location`` as for ``restore``. Raises what ``restore``
    raises, ``NothingToRestore`` for a store that is not partitioned."""
    from blobstate.commit.recover import cleanup_after_restore
    from blobstate.repository import host
    from blobstate.repository.backends import open_local_store
    from blobstate.restoring import guard
    from blobstate.restoring.group import restore_partitions as restore_group

    settings = Settings.for_call(settings, work_base=work_base, append_only=append_only, limit_upload=limit_upload,
                                 limit_download=limit_download)
    with open_repository(repo, log, storage_options, log_options, settings=settings,
                         max_concurrency=max_concurrency) as repository:
        key = find_store(repository, job, task, store)
        wd = host.work_dir(repository, key)
        guard.check_restore_destination(dest_dir, repo_url=repository.url, log_url=log, work_dir=wd,
                                        work_base=settings.work_base)
        result = restore_group(repository, key, dest_dir, local_store=open_local_store("rocksdb", settings=settings),
                               partitions=partitions, max_batch_id=max_batch_id, work_dir=wd,
                               max_concurrency=max_concurrency, force=force, dry_run=dry_run, verify_kept=verify_kept,
                               engine=engine_log(checkpoint_location))
        if checkpoint_location is None and max_batch_id is None:
            warn_unconfirmed(key, [r.checkpoint for r in result.partitions.values()])
        if cleanup and not dry_run:
            cleanup_after_restore(repository, key, wd)
        return result


def verify(*, repo: str, log: str | None = None, job: str | None = None, task: str | None = None,
           store: str | None = None, checkpoint: str | int | None = None, all_checkpoints: bool = False,
           storage_options: Options = None, log_options: Options = None, max_concurrency: int = 8,
           raise_on_error: bool = True, read_data_subset: str | DataSubset | None = None,
           seed: int | None = None, limit_download: Size | None = None,
           settings: Settings | None = None) -> list[VerifyReport]:
    """Read every blob of the chosen checkpoint(s) and check sizes and CRC32C: of one store (``store``), or of every
    store of the repository matching ``job``/``task`` (the latest checkpoint of each, or all with
    ``all_checkpoints``), ``max_concurrency`` stores at a time (``blobstate.maintenance.stores``). The latest of a
    partitioned store is every partition's latest state (its snapshot and the deltas after it), one report per
    partition. ``read_data_subset`` (``1/7``, ``5%``, a ``DataSubset``; ``seed`` fixes a random sample) reads only
    part of the data, restic's way; metadata is always checked.

    Raises ``ChecksumMismatch`` (exit 3) naming each damaged file when ``raise_on_error``, ``NothingToRestore``
    (exit 5) when there is no checkpoint to verify.
    """
    from blobstate.maintenance.stores import verify_repository
    from blobstate.maintenance.verify import DataSubset, raise_for_reports

    settings = Settings.for_call(settings, limit_download=limit_download)
    subset = (read_data_subset if isinstance(read_data_subset, DataSubset) or read_data_subset is None
              else DataSubset.parse(read_data_subset, seed=seed))
    with open_repository(repo, log, storage_options, log_options, settings=settings, max_concurrency=max_concurrency,
                         count_calls=True) as repository:
        reports = verify_repository(repository, keys=None if store is None else [find_store(repository, job, task,
                                                                                             store)],
                                    job=job, task=task, checkpoint=checkpoint, all_checkpoints=all_checkpoints,
                                    subset=subset)
        if raise_on_error:
            raise_for_reports(reports)
        return reports


def gc(*, repo: str, log: str | None = None, job: str | None = None, task: str | None = None,
       store: str | None = None, dry_run: bool = False, ttl: Duration = DEFAULT_TTL_MS, retain: int | None = None,
       retention: RetentionPolicy | str | None = None, now_ms: int | None = None, storage_options: Options = None,
       log_options: Options = None, ttl_mode: str | None = None, work_base: str | None = None,
       keys: list[StoreKey] | None = None, max_concurrency: int = 8,
       settings: Settings | None = None) -> list[GcReport]:
    """Delete expired and orphaned blobs of every store (or the one ``store``, or those matching ``job``/``task``),
    and prune the checkpoints retention drops; each report lists the checkpoints kept and the rule keeping each.
    ``max_concurrency`` stores at a time; the whole repository is listed once (``blobstate.maintenance.stores``).

    ``retain`` (a count) or ``retention`` (a ``RetentionPolicy`` or its text) default to each store's recorded
    retention (see ``blobstate.maintenance.gc.collect``); ``now_ms`` (ms since the epoch) is for tests.
    """
    from blobstate.config.units import parse_duration_ms
    from blobstate.maintenance.stores import gc_repository
    from blobstate.model import layout
    from blobstate.model.retention import RetentionPolicy

    settings = Settings.for_call(settings, work_base=work_base)
    policy = RetentionPolicy.of(retention) if retention is not None else retain
    with open_repository(repo, log, storage_options, log_options, settings=settings, ttl_mode=ttl_mode,
                         max_concurrency=max_concurrency, count_calls=True) as repository:
        return gc_repository(repository, keys=keys or (None if store is None else [name_store(job, task, store)]),
                             job=job, task=task, now_ms=now_ms if now_ms is not None else layout.now_ms(),
                             ttl_ms=parse_duration_ms(ttl), retain=policy, dry_run=dry_run,
                             work_base=settings.work_base)


def copy(*, source: str, target: str, source_log: str | None = None, target_log: str | None = None,
         job: str | None = None, task: str | None = None, store: str | None = None,
         checkpoint: str | int | None = None, source_options: Options = None, target_options: Options = None,
         source_log_options: Options = None, target_log_options: Options = None, ttl: Duration = DEFAULT_TTL_MS,
         ttl_mode: str | None = None, max_concurrency: int = 8, work_base: str | None = None,
         append_only: bool | None = None, limit_upload: Size | None = None,
         limit_download: Size | None = None, source_key_file: str | None = None,
         target_key_file: str | None = None, settings: Settings | None = None) -> list[CopyReport]:
    """Replicate the checkpoints of every store of ``source`` (or those ``job``/``task``/``store`` name; with
    ``checkpoint``, one store's records up to and including that one) into the repository ``target`` (created if
    empty, with its own marker and log), uploading only the objects the target lacks, each verified against its
    record's or index's CRC32C; records keep their checkpoint and batch ids (``blobstate.commit.copy``). Resumable
    and idempotent: a rerun after a kill finishes the job, a rerun with nothing new uploads nothing.

    ``ttl``: the TTL of the uploads until each record lands; ``append_only``, ``limit_upload``,
    ``limit_download``: as in ``backup``. ``source_key_file``, ``target_key_file``: each side's key file when it is
    encrypted (default for both: ``BLOBSTATE_KEY_FILE``): every object is opened with the source's key and sealed
    with the target's (an empty target is created encrypted when it has a key). Raises ``NothingToRestore`` (exit
    5) for a ``store`` without checkpoints, ``IntegrityError`` (exit 3) for a source object that does not match its
    record (that record is not copied; those before it are), ``FencedError`` (exit 4) when another writer appends
    at the target, ``DivergedTargetError`` (exit 4) when a target store took records of its own (a fail-over: the
    copy only fast-forwards), ``EncryptionKeyError`` (exit 3) for a key that does not open its side.
    """
    from blobstate.codec.keys import KeyConfig
    from blobstate.commit.copy import copy_stores
    from blobstate.config.units import parse_duration_ms
    from blobstate.maintenance.queries import select_stores

    settings = Settings.for_call(settings, work_base=work_base, append_only=append_only, limit_upload=limit_upload,
                                 limit_download=limit_download)
    with open_repository(source, source_log, source_options, source_log_options, settings=settings,
                         max_concurrency=max_concurrency,
                         key_config=KeyConfig.of(settings, key_file=source_key_file)) as src, \
            open_repository(target, target_log, target_options, target_log_options, settings=settings, create=True,
                            ttl_mode=ttl_mode, max_concurrency=max_concurrency,
                            key_config=KeyConfig.of(settings, key_file=target_key_file)) as dst:
        keys = select_stores(src, job, task, store, require=store is not None)
        return copy_stores(src, dst, keys, checkpoint=checkpoint, ttl_ms=parse_duration_ms(ttl),
                           max_concurrency=max_concurrency, work_base=settings.work_base)


def recover(*, repo: str, job: str = "default", task: str = "0", store: str | None = None,
            log: str | None = None, work_dir: str | None = None, dry_run: bool = False,
            storage_options: Options = None, report: Report | None = None,
            settings: Settings | None = None) -> list[Any]:
    """Replay this host's journal of the store ``job``/``task``/``store``: finish committed commits, abort the
    others (``recover_all`` does every store of the work directory).

    Returns ``(action, outcome)`` pairs; ``report`` is called with each as it completes. Raises ``TypeError``
    without ``store``, ``RepositoryNotFound`` (exit 6).
    """
    from blobstate.commit.recover import recover as replay_journal
    from blobstate.commit.session import StoreSession
    from blobstate.repository import host

    settings = Settings.for_call(settings)
    key = name_store(job, task, store)
    with open_repository(repo, log, storage_options, settings=settings) as repository:
        with StoreSession(key, work_dir or host.work_dir(repository, key),
                          repository_id=host.repository_id(repository)) as session:
            return replay_journal(session, repository, dry_run=dry_run, report=report)


def recover_all(*, work_base: str | None = None, repo: str | None = None, log: str | None = None,
                job: str | None = None, task: str | None = None, store: str | None = None,
                storage_options: Options = None, dry_run: bool = False,
                report: Callable[[StoreKey, Any, str], None] | None = None,
                settings: Settings | None = None) -> list[StoreKey]:
    """``blobstate recover`` with no options: every store of this host's work directory (``work_base``, default
    ``BLOBSTATE_WORK_DIR`` or the platform's) with an open commit, each against the repository and log its journal
    records; ``repo``, ``job``/``task``/``store`` narrow it. Returns the store keys recovered; ``report(key, action,
    outcome)`` is called as each action completes."""
    from blobstate.commit.recover import recover_work_base

    def matches(key: StoreKey) -> bool:
        wanted = ((job, key.job), (task, key.task), (store, key.store))
        return all(want is None or want == have for want, have in wanted)

    settings = Settings.for_call(settings, work_base=work_base)
    if repo is not None:  # a mistyped --repo is an error (exit 6), never "nothing to recover"
        open_repository(repo, log, storage_options, settings=settings).close()
    journals = recover_work_base(settings, repo=repo, log=log, storage_options=storage_options, keys=matches,
                                 dry_run=dry_run, report=report)
    return [j.key for j in journals]
