"""The read-only verbs of the public API (re-exported by ``blobstate.api``): list, describe, ``ls``, ``diff``,
``stats``, the state as data, and this host's journals. None of them writes to a repository, a log or a work
directory; each builds its settings (``Settings.for_call``), names its store and opens the repository through the
entry room (``blobstate.entry``) without creating it (``RepositoryNotFound``, exit 6, for a location that is not
one).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from blobstate.config.settings import Settings
from blobstate.config.units import Duration, Options, Size  # the API's argument types, re-exported
from blobstate.entry import check_store, engine_log, find_store, name_store, open_repository, warn_unconfirmed
from blobstate.errors import NothingToRestore
from blobstate.journal.file import Journal, JournalRead
from blobstate.journal.projection import CommitState, project
from blobstate.local import workdir
from blobstate.model.chain import partition_history, plan_chain
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.selection import select_checkpoint
from blobstate.repository.host import located_work_dir
from blobstate.repository.repo import Repository

if TYPE_CHECKING:  # the catalog, gc and the state reader are imported by the verbs that use them: a backup opens
    # none of them
    from blobstate.maintenance.catalog import CheckpointSummary, Listing, SnapshotDiff, StoreStats
    from blobstate.restoring.entries import Value
    from blobstate.restoring.state import Change, StatePlan

__all__ = ["Duration", "Options", "Size", "choose_snapshot", "describe_checkpoints", "diff", "journal_events",
           "list_checkpoints", "list_stores", "ls", "read_changes", "read_state", "require_store", "select_stores",
           "stats", "unfinished_commits"]


def select_stores(repository: Repository, job: str | None, task: str | None, store: str | None,
                  key: StoreKey | None = None, *, require: bool = False) -> list[StoreKey]:
    """One store (``store`` or ``key``), or every store of the repository whose job and task match the filters.
    ``require``: the one store named must have a checkpoint, found as readers find it (``find_store``)."""
    if key is not None or store is not None:
        return [find_store(repository, job, task, store, key) if require else name_store(job, task, store, key)]
    from blobstate.maintenance.gc import discover_keys

    return [k for k in discover_keys(repository) if (job is None or k.job == job) and (task is None or k.task == task)]


def list_stores(*, repo: str, log: str | None = None, storage_options: Options = None,
                log_options: Options = None, settings: Settings | None = None) -> list[StoreKey]:
    """Every store key the repository (or its checkpoint log) holds, sorted. Raises ``RepositoryNotFound``."""
    from blobstate.maintenance.gc import discover_keys

    settings = Settings.for_call(settings)
    repository = open_repository(repo, log, storage_options, log_options, settings=settings)
    try:
        return discover_keys(repository)
    finally:
        repository.close()


def list_checkpoints(*, repo: str, log: str | None = None, job: str = "default", task: str = "0",
                     store: str | None = None, storage_options: Options = None, log_options: Options = None,
                     key: StoreKey | None = None, settings: Settings | None = None) -> list[Checkpoint]:
    """Retained checkpoints of one store, oldest first (the records only; ``describe_checkpoints`` adds what the
    indexes hold)."""
    settings = Settings.for_call(settings)
    store_key = name_store(job, task, store, key)
    repository = open_repository(repo, log, storage_options, log_options, settings=settings)
    try:
        return repository.log.history(store_key)
    finally:
        repository.close()


def describe_checkpoints(*, repo: str, log: str | None = None, job: str | None = None, task: str | None = None,
                         store: str | None = None, storage_options: Options = None, log_options: Options = None,
                         key: StoreKey | None = None, max_concurrency: int = 8,
                         settings: Settings | None = None) -> list[CheckpointSummary]:
    """Retained checkpoints of one store (``store``), or of every store matching ``job``/``task``, with time,
    host, batch id, file count and data size (bytes) from their indexes; an unreadable index is reported in its
    summary's ``error``, never raised. Every store's records are read at once, the stores' indexes
    ``max_concurrency`` stores at a time (``blobstate.maintenance.stores``)."""
    from blobstate.maintenance.catalog import mark_regroups, summarize
    from blobstate.maintenance.repository_view import (
        RepositoryView,
        calls_summary,
        for_each_store,
        matching,
        own_indexes,
    )

    settings = Settings.for_call(settings)
    started = time.perf_counter()
    with open_repository(repo, log, storage_options, log_options, settings=settings, max_concurrency=max_concurrency,
                         count_calls=True) as repository:
        named = None if key is None and store is None else [find_store(repository, job, task, store, key)]
        view = RepositoryView.take(repository, keys=named, match=matching(job, task), cached=True)

        def one(k: StoreKey) -> list[CheckpointSummary]:
            own = own_indexes(repository)
            with own.reading_indexes_once():
                return mark_regroups([summarize(own, cp)[0] for cp in view.history(k)])

        summaries = [s for found in for_each_store(repository, one, view.keys) for s in found]
        calls_summary("list", repository, len(view.keys), started)
        return summaries


def choose_snapshot(repository: Repository, key: StoreKey, checkpoint: str | int | None = None,
                    partition: int | None = None) -> tuple[Checkpoint, int]:
    """The snapshot ``checkpoint`` names (default: the latest) and how many deltas the state it starts replays on
    top of it. ``partition``: of a partitioned store, that partition's records (``--checkpoint`` a group generation
    or a partition checkpoint id; a delta names the snapshot its chain starts from). Raises ``NothingToRestore``
    (exit 5): no such store or checkpoint, a partitioned store without ``partition`` (or the other way round), a
    partition state that has no snapshot yet."""
    latest = check_store(repository, key)
    if partition is None:
        if latest.is_group:
            raise NothingToRestore(f"{key} is a partitioned store (group checkpoints of {latest.num_partitions} "
                                   f"partitions): name one with --partition (0..{latest.num_partitions - 1})")
        return repository.choose(key, checkpoint=checkpoint), 0
    history = partition_history(repository.log.history(key), partition)
    if not latest.is_group or not history:
        raise NothingToRestore(f"no group checkpoint of {key} commits partition {partition}"
                               + ("" if latest.is_group else f": {key} is not a partitioned store"))
    upto = None
    if checkpoint is not None and checkpoint != "latest":
        upto = select_checkpoint(history, checkpoint, f"{key} partition {partition}").batch_id
    chain = plan_chain(history, upto)
    if chain.snapshot is None:
        raise NothingToRestore(f"partition {partition} of {key} has no snapshot up to batch {chain.upto}, only "
                               f"the deltas of batches {chain.deltas[0].batch_id}..{chain.deltas[-1].batch_id}")
    return chain.snapshot, len(chain.deltas)


def ls(*, repo: str, log: str | None = None, job: str = "default", task: str | None = None,
       store: str | None = None,
       checkpoint: str | int | None = None, prefix: str = "", storage_options: Options = None,
       log_options: Options = None, partition: int | None = None, settings: Settings | None = None) -> Listing:
    """The files of one snapshot (default: the latest; ``partition``: of that partition of a partitioned store)
    whose path starts with ``prefix``: size, CRC32C, blobs.

    Raises ``NothingToRestore`` (exit 5) when there is no such checkpoint, ``IntegrityError`` for a bad index.
    """
    from blobstate.maintenance.catalog import list_files

    settings = Settings.for_call(settings)
    repository = open_repository(repo, log, storage_options, log_options, settings=settings)
    try:
        store_key = find_store(repository, job, task, store)
        snapshot, deltas = choose_snapshot(repository, store_key, checkpoint, partition)
        return list_files(repository, snapshot, prefix, deltas)
    finally:
        repository.close()


def diff(*, repo: str, base: str | int, target: str | int = "latest", log: str | None = None,
         job: str = "default", task: str | None = None, store: str | None = None,
         storage_options: Options = None, log_options: Options = None, partition: int | None = None,
         settings: Settings | None = None) -> SnapshotDiff:
    """What changed between two checkpoints of one store (``base`` and ``target`` as ``--checkpoint`` takes them;
    ``partition``: of that partition of a partitioned store, each its snapshot): files added, removed, changed,
    and blobs shared."""
    from blobstate.maintenance.catalog import diff_snapshots

    settings = Settings.for_call(settings)
    repository = open_repository(repo, log, storage_options, log_options, settings=settings)
    try:
        store_key = find_store(repository, job, task, store)
        return diff_snapshots(repository, choose_snapshot(repository, store_key, base, partition)[0],
                              choose_snapshot(repository, store_key, target, partition)[0])
    finally:
        repository.close()


def stats(*, repo: str, log: str | None = None, job: str | None = None, task: str | None = None,
          store: str | None = None, storage_options: Options = None, log_options: Options = None,
          max_concurrency: int = 8, settings: Settings | None = None) -> list[StoreStats]:
    """Space use per store (one store, or every store matching ``job``/``task``): retained checkpoints, logical
    and stored bytes, referenced blobs, deduplication ratio. The whole repository is listed once, the stores'
    indexes read ``max_concurrency`` stores at a time."""
    from blobstate.maintenance.catalog import store_stats
    from blobstate.maintenance.repository_view import (
        RepositoryView,
        calls_summary,
        for_each_store,
        matching,
        own_indexes,
    )

    settings = Settings.for_call(settings)
    started = time.perf_counter()
    with open_repository(repo, log, storage_options, log_options, settings=settings, max_concurrency=max_concurrency,
                         count_calls=True) as repository:
        if store is not None:
            return [store_stats(repository, find_store(repository, job, task, store))]
        view = RepositoryView.take(repository, objects=True, match=matching(job, task), cached=True)

        def one(k: StoreKey) -> StoreStats:
            own = own_indexes(repository)
            with own.reading_indexes_once():
                return store_stats(own, k, listing=view.listing(k), history=view.history(k))

        result = for_each_store(repository, one, view.keys)
        calls_summary("stats", repository, len(view.keys), started)
        return result


def require_store(*, repo: str, key: StoreKey | None = None, log: str | None = None, job: str | None = None,
                  task: str | None = None, store: str | None = None, storage_options: Options = None,
                  log_options: Options = None, settings: Settings | None = None) -> Checkpoint:
    """The latest record of ``key`` (or of the store ``job``/``task``/``store`` names, found as every reader finds
    it: ``task`` None is ``0`` or ``group``, whichever holds checkpoints, ``blobstate.entry.find_store``) in the
    repository at ``repo``; its ``store_key`` is the store found. Raises ``NothingToRestore`` (exit 5, naming the
    stores that have checkpoints) when there is none, ``ConfigurationError`` (exit 2) when both tasks hold one,
    ``RepositoryNotFound`` (exit 6)."""
    settings = Settings.for_call(settings)
    repository = open_repository(repo, log, storage_options, log_options, settings=settings)
    try:
        return check_store(repository, find_store(repository, job, task, store, key))
    finally:
        repository.close()


def journal_events(*, work_dir: str | None = None, repo: str | None = None, key: StoreKey | None = None,
                   work_base: str | None = None, strict: bool = True, job: str = "default", task: str = "0",
                   store: str | None = None, settings: Settings | None = None) -> JournalRead:
    """The events of a store's journal, read without changing it: from ``work_dir`` (the store's work
    directory), or from the one ``repo`` and ``key`` map to under ``work_base``.

    With ``strict`` a record damaged in the middle raises ``CorruptJournalError`` (exit 3); without, the events
    before the damage are returned and the rest is reported as the torn tail.
    """
    if work_dir is None:
        if key is None and store is not None:
            key = StoreKey(job, task, store)
        if repo is None or key is None:
            raise ValueError("give work_dir, or repo and the store (store=, or key=)")
        work_dir = located_work_dir(repo, key, Settings.for_call(settings, work_base=work_base))
    return Journal(os.path.join(work_dir, workdir.JOURNAL)).read(strict=strict)


def unfinished_commits(*, repo: str, job: str = "default", task: str = "0", store: str | None = None,
                       work_base: str | None = None, work_dir: str | None = None,
                       key: StoreKey | None = None, settings: Settings | None = None) -> list[CommitState]:
    """The commits this host's journal of the store holds open (interrupted, not yet finished or aborted): what
    ``blobstate recover`` or the next backup will finish or abort. Read without the lock, changing nothing."""
    events = journal_events(work_dir=work_dir, repo=repo, key=name_store(job, task, store, key), work_base=work_base,
                            strict=False, settings=settings).events
    return [state for state in project(events).values() if state.is_open]


def read_state(*, repo: str, log: str | None = None, job: str = "default", task: str | None = None,
               store: str | None = None,
               partition: int | None = None, batch_id: int | None = None, checkpoint: str | int | None = None,
               storage_options: Options = None, log_options: Options = None, scratch_dir: str | None = None,
               checkpoint_location: str | None = None,
               settings: Settings | None = None) -> Iterator[tuple[Value, Value]]:
    """The ``(key, value)`` entries of a store exactly as after batch ``batch_id`` (or after the batch of the record
    ``checkpoint`` names; default: the newest state, or with ``checkpoint_location``, the query's Spark checkpoint
    location, the batch Spark committed: a batch after it is ``BatchNotCommitted``), in the store's key order: of
    a driver store, of partition ``partition`` of a partitioned store, or of every partition in turn (``partition``
    None). ``task`` None: ``0`` or ``group``, whichever holds checkpoints (``blobstate.entry.find_store``). The
    newest state of a query's store read without a checkpoint location may be a batch Spark re-runs: a warning says
    so.

    Keys and values come back as the binding wrote them (``str``, ``bytes``, ``int``, ``float``, ``bool``;
    ``Undecoded`` bytes for anything else, never unpickled: ``blobstate.restoring.entries``). Read only: each chain
    (snapshot, then deltas) is restored into a private temporary directory under ``scratch_dir`` (default: the
    system's), removed once read; nothing is written to the repository (no journal, no cleanup). The store and the
    batch are checked at once, the entries read as the iterator is consumed. Raises ``RepositoryNotFound`` (exit 6),
    ``NothingToRestore`` (exit 5, naming the stores there are), ``BatchNotRetained`` (exit 5, naming the oldest
    readable batch), ``IntegrityError`` (exit 3), ``ConfigurationError`` (a partition outside the group, a store of
    files).
    """
    from blobstate.restoring import state as state_reader

    settings = Settings.for_call(settings)
    with open_repository(repo, log, storage_options, log_options, settings=settings) as repository:
        key = find_store(repository, job, task, store)
        plan = state_reader.plan_state(repository, key, partitions=None if partition is None else [partition],
                                       batch_id=batch_id, checkpoint=checkpoint, engine=engine_log(checkpoint_location))
    if batch_id is None and checkpoint in (None, "latest") and plan.unconfirmed_engine_state:
        warn_unconfirmed(key, [cp for chain in plan.chains.values() for cp in chain.records])
    return _state_entries(plan, lambda: open_repository(repo, log, storage_options, log_options, settings=settings),
                          scratch_dir)


def _state_entries(plan: StatePlan, reopen: Callable[[], Repository],
                   scratch_dir: str | None) -> Iterator[tuple[Value, Value]]:
    import tempfile  # with the restore room: a backup, which imports this module, never needs it (issue 31)

    from blobstate.restoring import state as state_reader
    from blobstate.restoring.entries import open_entries

    with reopen() as repository:
        for chain in plan.chains.values():
            with tempfile.TemporaryDirectory(prefix="blobstate-state-", dir=scratch_dir) as base:
                path = state_reader.restore_into(repository, chain, base)
                if path is not None:
                    with open_entries(path, plan.key_groups) as entries:
                        yield from entries


def read_changes(*, repo: str, log: str | None = None, job: str = "default", task: str | None = None,
                 store: str | None = None, from_batch: int | None = None, to_batch: int | None = None,
                 partition: int | None = None, storage_options: Options = None,
                 log_options: Options = None, checkpoint_location: str | None = None,
                 settings: Settings | None = None) -> Iterator[Change]:
    """The writes of batches ``from_batch..to_batch`` (both included; default: every batch whose delta is retained,
    or with ``checkpoint_location`` up to the batch the query's Spark checkpoint location says it committed) as
    ``Change(batch_id, partition, op, key, value)`` rows, from the delta changelogs in the repository: batch by
    batch, each in its writes' order, partition by partition (of a partitioned store: every partition, or
    ``partition``). Applied in order to the state after ``from_batch - 1`` they give the state after ``to_batch``.
    Read only. Raises what ``read_state`` raises; ``BatchNotRetained`` names the oldest batch whose changes are
    still held.
    """
    from blobstate.restoring import state as state_reader

    settings = Settings.for_call(settings)
    with open_repository(repo, log, storage_options, log_options, settings=settings) as repository:
        key = find_store(repository, job, task, store)
        plans = state_reader.change_plans(repository, key, from_batch=from_batch, to_batch=to_batch,
                                          partitions=None if partition is None else [partition],
                                          engine=engine_log(checkpoint_location))
    if checkpoint_location is None and to_batch is None:
        warn_unconfirmed(key, [cp for records in plans.values() for cp in records])
    return _changes(plans, lambda: open_repository(repo, log, storage_options, log_options, settings=settings),
                    getattr(plans, "key_groups", 0))


def _changes(plans: dict[int | None, list[Checkpoint]], reopen: Callable[[], Repository],
             key_groups: int = 0) -> Iterator[Change]:
    from blobstate.restoring import state as state_reader

    with reopen() as repository:
        for batch in sorted({r.batch_id for records in plans.values() for r in records if r.batch_id is not None}):
            for p, records in plans.items():
                yield from state_reader.read_changes(repository, [r for r in records if r.batch_id == batch], p,
                                                     key_groups)
