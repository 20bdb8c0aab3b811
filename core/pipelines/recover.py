"""``blobstate recover``: the journal replay tool, and restore's init cleanup.

The pure planner (``blobstate.journal.recovery``) turns the journal's open commits and the checkpoint log's
history into actions; the cleanup executor carries them out: a commit the log holds is finished (TTL removed,
deferred deletes, local pruning), any other open commit is aborted. Both are idempotent, so a crash during
recovery is recovered by running it again. Backup runs this before its first commit; restore runs it (and,
without a journal, Samza's init cleanup from the latest index) after it restored.
"""

from __future__ import annotations

from collections.abc import Callable

from blobstate.errors import CommitInProgressError
from blobstate.journal import events as ev
from blobstate.journal.recovery import FinishCommit, RecoveryAction, plan_recovery
from blobstate.layout import DEFAULT_RETAIN, now_ms
from blobstate.model import StoreKey
from blobstate.pipelines.cleanup import CleanupExecutor, init_cleanup
from blobstate.pipelines.session import StoreSession
from blobstate.repository import Repository

Report = Callable[[RecoveryAction, str], None]


def plan(session: StoreSession, repo: Repository) -> list[RecoveryAction]:
    """The recovery actions for the journal's open commits (pure planning after reading the log)."""
    states = session.states()
    if not any(s.is_open for s in states.values()):
        return []
    committed = [cp.checkpoint_id for cp in repo.log.history(session.key)]
    return plan_recovery(states, committed)


def recover(session: StoreSession, repo: Repository, *, retain: int = DEFAULT_RETAIN, dry_run: bool = False,
            report: Report | None = None) -> list[tuple[RecoveryAction, str]]:
    """Plan and (unless ``dry_run``) carry out recovery; returns ``(action, outcome)`` pairs in journal order."""
    executor = CleanupExecutor(session, repo, retain=retain)
    results = []
    for action in plan(session, repo):
        if dry_run:
            outcome = "planned"
        elif isinstance(action, FinishCommit):
            commit_id = action.state.commit_id
            checkpoint = next((cp for cp in repo.log.history(session.key) if cp.checkpoint_id == commit_id), None)
            if action.state.generation is None and checkpoint is not None:
                session.record(ev.CheckpointWritten(commit_id, now_ms(), checkpoint.generation), sync=True)
            deleted = executor.finish(session.states()[commit_id])
            outcome = f"finished: TTL removed, {deleted} blobs deleted by retention"
        else:
            outcome = f"aborted: {len(executor.abort(action.state, action.reason))} blobs deleted"
        results.append((action, outcome))
        if report:
            report(action, outcome)
    return results


def cleanup_after_restore(repo: Repository, key: StoreKey, work_dir: str) -> None:
    """Restore's init step: recover this host's journal of ``key``, then Samza's init cleanup from the latest
    index. Skipped when a committing process on this host holds the store's lock (it does its own cleanup)."""
    try:
        session = StoreSession(key, work_dir)
    except CommitInProgressError:
        return
    with session:
        recover(session, repo)
        init_cleanup(repo, key)
