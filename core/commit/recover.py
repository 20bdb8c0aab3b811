"""``blobstate recover``: the journal replay tool, and restore's init cleanup.

The pure planner (``blobstate.journal.recovery``) turns the journal's open commits and the checkpoint log's
history into actions; the cleanup executor carries them out: a commit the log holds is finished (its blobs checked
and healed, TTL removed, deferred deletes, local pruning), a commit whose append outcome is unknown is resolved by
the commit engine (``engine.recover_append``: re-appended inside its TTL budget, else aborted), any other open
commit is aborted. All are idempotent, so a crash during recovery is
recovered by running it again. Backup runs this before its first commit; restore runs it (and, without a journal,
Samza's init cleanup from the latest index) after it restored.

A journal is input like any other. Recovery refuses (``ConfigurationError``, nothing changed) a journal of another
store, a journal written against another repository or checkpoint log than the one given, and a log that holds no
checkpoint of the store while the repository holds its indexes (the wrong or a forgotten ``--log``: aborting there
would delete committed blobs). It finishes a commit only when the log shows it, and takes the retention it applies
from the committed index, not from the journal.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blobstate.commit.cleanup import CleanupExecutor, init_cleanup
from blobstate.commit.engine import recover_append
from blobstate.commit.session import StoreSession
from blobstate.config.options import display_url
from blobstate.config.settings import Settings
from blobstate.errors import (
    AppendOutcomeUnknown,
    CommitInProgressError,
    ConfigurationError,
)
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.journal.projection import CommitState, project
from blobstate.journal.recovery import FinishCommit, RecoveryAction, ResolveAppend, plan_recovery
from blobstate.local import workdir
from blobstate.model import layout
from blobstate.model.layout import DEFAULT_RETAIN, now_ms
from blobstate.model.records import StoreKey
from blobstate.model.retention import RetentionPolicy
from blobstate.plugin.interfaces import BlobStore
from blobstate.repository.backends import normalize_url
from blobstate.repository.host import journaled_record
from blobstate.repository.repo import Repository

Report = Callable[[RecoveryAction, str], None]


def plan(session: StoreSession, repo: Repository) -> list[RecoveryAction]:
    """The recovery actions for the journal's open commits (pure planning after reading the log).

    Raises ``ConfigurationError`` (nothing changed) for a journal of another store, repository or log, and for a
    log that holds no checkpoint of the store while the repository has an index of it that a commit completed
    (``_completed_indexes``: so a store's first group, killed before its append, is aborted, not taken for a wrong
    ``--log``, even beside the staged leftovers of earlier killed attempts).
    """
    states = session.states()
    open_states = [s for s in states.values() if s.is_open]
    if not open_states:
        return []
    for state in open_states:
        _check_belongs(state, session.key, repo)
    history = repo.log.history(session.key)
    if not history and _completed_indexes(repo, session.key, open_states):
        raise ConfigurationError(
            f"the checkpoint log {display_url(repo.log.url or repo.url)} holds no checkpoint of {session.key}, but "
            "the repository has its snapshot indexes: is --log right? recovery changed nothing")
    return plan_recovery(states, [cp.checkpoint_id for cp in history])


def _completed_indexes(repo: Repository, key: StoreKey, open_states: list[CommitState]) -> bool:
    """True when ``key`` holds a snapshot index that no open commit planned and that carries no TTL: one a commit
    completed, so its record is in some log. Indexes the open commits planned (a commit's own, a group's partition
    snapshots) and the TTL-protected leftovers of killed attempts (never referenced) are no such evidence."""
    ours = frozenset().union(*(s.blob_ids for s in open_states))
    return any(i.blob_id not in ours and not repo.store.has_ttl(i.blob_id)
               for i in repo.store.list(layout.indexes_prefix(key)))


def _check_belongs(state: CommitState, key: StoreKey, repo: Repository) -> None:
    """Refuse a commit of another store, repository or log: the repository by the id its marker records (two
    repositories one URL reaches differ by it, issue 39 case 8) and by its URL (a byte copy of a repository elsewhere
    has its id)."""
    if state.store_key and state.store_key != str(key):
        raise ConfigurationError(f"the journal's commit {state.commit_id} belongs to store {state.store_key!r}, not "
                                 f"{key}: recovery changed nothing")
    ours = repo.info.repository_id if repo.info is not None else ""
    if state.repository_id and ours and state.repository_id != ours:
        raise ConfigurationError(f"the journal's commit {state.commit_id} was written against repository "
                                 f"{state.repository_id} ({state.repo_url}), not {ours} at {display_url(repo.url)}: "
                                 "recovery changed nothing")
    if state.repo_url and state.repo_url != display_url(repo.url):
        raise ConfigurationError(f"the journal's commit {state.commit_id} was written against repository "
                                 f"{state.repo_url}, not {display_url(repo.url)}: recovery changed nothing")
    log_url = display_url(repo.log.url or repo.url)
    if state.log_url and state.log_url != log_url:
        raise ConfigurationError(f"the journal's commit {state.commit_id} was written against checkpoint log "
                                 f"{state.log_url}, not {log_url} (is --log right?): recovery changed nothing")


def recover(session: StoreSession, repo: Repository, *, retain: int | RetentionPolicy = DEFAULT_RETAIN,
            dry_run: bool = False, report: Report | None = None) -> list[tuple[RecoveryAction, str]]:
    """Plan and (unless ``dry_run``) carry out recovery; returns ``(action, outcome)`` pairs in journal order.

    A commit whose append outcome stays unknown is left open (outcome ``unresolved``; nothing it wrote deleted).
    """
    executor = CleanupExecutor(session, repo, retain=retain)
    results = []
    for action in plan(session, repo):
        if dry_run:
            outcome = "planned"
        elif isinstance(action, ResolveAppend):
            outcome = _resolve(session, repo, executor, action.state)
        elif isinstance(action, FinishCommit):
            outcome = _finish(session, repo, executor, action.state.commit_id)
        else:
            outcome = f"aborted: {len(executor.abort(action.state, action.reason))} blobs deleted"
        results.append((action, outcome))
        if report:
            report(action, outcome)
    return results


def _finish(session: StoreSession, repo: Repository, executor: CleanupExecutor, commit_id: str) -> str:
    checkpoint = next((cp for cp in repo.log.history(session.key) if cp.checkpoint_id == commit_id), None)
    state = session.states()[commit_id]
    if state.generation is None and checkpoint is not None:
        session.record(ev.CheckpointWritten(commit_id, now_ms(), checkpoint.generation), sync=True)
        state = session.states()[commit_id]
    return executor.finished(commit_id, executor.finish(state, checkpoint, heal=True))


def _resolve(session: StoreSession, repo: Repository, executor: CleanupExecutor, state: CommitState) -> str:
    """A commit whose append outcome is unknown: a commit of the engine like any other (``engine.recover_append``:
    finished when the log holds it, re-appended inside its TTL budget with its objects present, else aborted)."""
    record = journaled_record(repo, session.key, state)
    try:
        return recover_append(executor, state, record)
    except AppendOutcomeUnknown as exc:
        return f"unresolved: the append's outcome is still unknown ({exc}); nothing deleted, run recover again"


def cleanup_after_restore(repo: Repository, key: StoreKey, work_dir: str) -> None:
    """Restore's init step: recover this host's journal of ``key``, then Samza's init cleanup from the latest
    index. Skipped when a committing process on this host holds the store's lock (it does its own cleanup)."""
    try:
        session = StoreSession(key, work_dir)
    except CommitInProgressError:
        return
    with session:
        recover(session, repo)
        init_cleanup(repo, key, work_dir)


@dataclass(frozen=True)
class OpenJournal:
    """A store's work directory whose journal holds open commits, and the repository and log those commits were
    written against (as the journal records them: no credentials, no query; None for an older journal)."""

    work_dir: str
    key: StoreKey
    repo_url: str | None
    log_url: str | None


def open_journals(work_base: str) -> list[OpenJournal]:
    """Every store work directory under ``work_base`` (``<base>/<repo hash>/<job>/<task>/<store>/``) whose journal
    holds an open commit. Read without locks, changing nothing; a journal damaged in the middle is listed too
    (recovering it reports the damage)."""
    found = []
    for path in sorted(glob.glob(os.path.join(glob.escape(work_base), "*", "*", "*", "*", workdir.JOURNAL))):
        work_dir = os.path.dirname(path)
        job, task, store = work_dir.split(os.sep)[-3:]
        try:
            key = StoreKey(job, task, store)
        except ConfigurationError:
            continue  # not a store's work directory
        states = [s for s in project(Journal(path).read(strict=False).events).values() if s.is_open]
        if states:
            first = next((s for s in states if s.repo_url), None)
            found.append(OpenJournal(work_dir, key, first.repo_url if first else None,
                                     first.log_url if first else None))
    return found


def recover_work_base(settings: Settings, *, repo: str | None = None, log: str | None = None,
                      storage_options: dict[str, Any] | None = None, keys: Callable[[StoreKey], bool] = bool,
                      dry_run: bool = False,
                      report: Callable[[StoreKey, RecoveryAction, str], None] | None = None) -> list[OpenJournal]:
    """Recover every store of ``settings.work_base`` with an open commit (``blobstate recover`` with no options):
    each against the repository and log its journal records (opened with ``settings``; credentials from the
    environment and fsspec's configuration, as for every command), or only those of ``repo`` when given. ``keys``
    filters the stores.
    Returns the journals it recovered. Raises ``ConfigurationError`` for an older journal that records no
    repository (name it with ``--repo``)."""
    wanted = display_url(normalize_url(repo)) if repo else None
    done = []
    for journal in open_journals(settings.work_base):
        if not keys(journal.key) or (wanted is not None and journal.repo_url not in (None, wanted)):
            continue
        repo_url = repo or journal.repo_url
        if repo_url is None:
            raise ConfigurationError(f"the journal in {journal.work_dir} does not record its repository: run "
                                     f"`blobstate recover --repo URL --store {journal.key.store}`")
        log_url = log or (journal.log_url if journal.log_url and journal.log_url != journal.repo_url else None)
        repository = Repository.open(repo_url, log=log_url, storage_options=storage_options, create=False,
                                     settings=settings)
        try:
            with StoreSession(journal.key, journal.work_dir) as session:
                recover(session, repository, dry_run=dry_run,
                        report=(lambda a, o, k=journal.key: report(k, a, o)) if report else None)
        finally:
            repository.close()
        done.append(journal)
    return done


def objects_left(store: BlobStore, key: StoreKey, state: CommitState) -> list[str]:
    """The objects that open commit ``state`` of ``key`` may have created (planned, uploaded, its index) and that
    ``store`` holds now, sorted: exactly what an interrupted commit or abort leaves in the repository (issue 27
    case 6), from one listing of ``key``'s prefix. Raises ``StorageError`` when the store does not answer."""
    present = {info.blob_id for info in store.list(key.prefix)}
    return sorted(state.blob_ids & present)
