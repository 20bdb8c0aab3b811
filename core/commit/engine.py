"""The one commit engine: every commit of every record kind (snapshot, delta, group) goes through the same steps.

The three kinds differ only in what they stage (``blobstate.commit.backup``: files diffed and an index;
``blobstate.commit.delta``: one changelog blob; ``blobstate.commit.group``: the parts partition writers staged) and
how their record names it. From the record on, the engine is the same for all of them and for recovery:

1. ``check_ttl_budget``: a commit older than half the TTL of its uploads never reaches its commit point (rule 4);
2. ``CommitPoint.append`` (``CheckpointAppending``, the append, ``CheckpointWritten``): the commit point (rules 1,
   6); a certain "no" (``FencedError``) or a failure before the append was sent aborts (``abort``: what the commit
   created is deleted, never a blob a retained record references); an unknown outcome leaves the commit open for
   recovery;
3. ``finish``: the TTLs of the commit's uploads removed, then, when the append landed late (more than TTL/2 after
   the commit began: its protection may have lapsed, rule 5) or from recovery, every object the record references
   is checked and what gc took is put back (``heal_record``: a snapshot's index and blobs, a delta's changelog,
   every part of a group), then retention (``cleanup.apply_retention``) on the log **as re-read after the append**:
   records are pruned by generation, never by a count from a cached generation, and a writer after whose append
   another writer appended leaves retention to that writer (it lost the race for the store).

Recovery's re-append of a commit whose append outcome is unknown (``recover_append``) is a commit like any other:
a record the log already holds is finished with its heal check; one it does not hold is re-appended at once inside
its TTL budget, and past it only when every object it references is present or put back from this host first,
else aborted (gc may have deleted its expired uploads); either way a landed record is healed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from blobstate.commit.cleanup import CleanupExecutor
from blobstate.commit.healing import HealSources, heal_record
from blobstate.commit.point import AppendAttempt, CommitPoint, check_ttl_budget
from blobstate.config.options import redact
from blobstate.errors import FencedError, GroupVoidedError, StorageError
from blobstate.journal import events as ev
from blobstate.journal.projection import CommitState
from blobstate.model.layout import DEFAULT_TTL_MS, now_ms
from blobstate.model.records import Checkpoint

log = logging.getLogger(__name__)


def landed_late(created_ms: int, ttl_ms: int) -> bool:
    """True when a commit begun at ``created_ms`` (ms) reached its commit point more than half its uploads' TTL
    ``ttl_ms`` later: gc may have taken what it uploaded, so it is healed (rule 5)."""
    return now_ms() - created_ms > ttl_ms // 2


class CommitEngine:
    """Steps 1-3 of the module docstring for the commits of one store in this process.

    ``cleanup``: the store's cleanup executor (abort, TTL removal, retention); ``commit_point``: its commit point;
    ``ttl_ms``: the TTL of the commits' uploads (ms); ``on_unsettled``: called when a commit may or may not have
    landed, or landed and its cleanup failed (the committer then recovers before its next commit).
    """

    def __init__(self, cleanup: CleanupExecutor, commit_point: CommitPoint, *, ttl_ms: int,
                 on_unsettled: Callable[[], None]) -> None:
        self.cleanup = cleanup
        self.commit_point = commit_point
        self.session = cleanup.session
        self.repo = cleanup.repo
        self.key = cleanup.key
        self.ttl_ms = ttl_ms
        self.on_unsettled = on_unsettled

    def commit(self, record: Checkpoint, *, sources: HealSources | None = None) -> Checkpoint:
        """``append`` then ``finish_quietly`` (healed from ``sources`` and the work directory's copies when it
        landed late): a whole commit of ``record``, whose ``CommitStarted`` and ``UploadsPlanned`` are journaled
        and whose uploads are done. Raises as ``append``, and ``GroupVoidedError`` when the finish voided the group
        (its changelogs gone, nobody holding them: ``blobstate.commit.parts.void_group``)."""
        checkpoint = self.append(record)
        self.finish_quietly(record.checkpoint_id, checkpoint, late=landed_late(record.created_time_ms, self.ttl_ms),
                            sources=sources)
        void = self.cleanup.voided.pop(record.checkpoint_id, None)
        if void is not None:  # landed late with parts gone that nobody holds: voided, the batch must run again
            raise GroupVoidedError(
                f"the group record of batch {record.batch_id} of {self.key} landed after gc took parts of it that "
                f"nobody can put back; it is voided (record {void.checkpoint_id}, generation {void.generation}), so "
                "the batch counts for no partition: run it again (a Spark query: restart it)")
        return checkpoint

    def append(self, record: Checkpoint, *, budget_checked: bool = False) -> Checkpoint:
        """Check the TTL budget (from ``record.created_time_ms``; not again with ``budget_checked``: a snapshot
        checks it before it uploads its index), then append ``record`` at the commit point.

        Raises ``FencedError`` or ``StorageError`` (aborted: what it staged is deleted), ``AppendOutcomeUnknown``
        or any failure after the append was sent (left open for recovery, ``on_unsettled`` called)."""
        commit_id = record.checkpoint_id
        attempt = AppendAttempt()
        try:
            if not budget_checked:
                check_ttl_budget(commit_id, record.created_time_ms, self.ttl_ms)
            return self.commit_point.append(commit_id, record, attempt=attempt)
        except BaseException as exc:
            if not attempt.sent or isinstance(exc, FencedError):
                self.abort(commit_id, exc)
            else:
                self.on_unsettled()
            raise

    def finish_quietly(self, commit_id: str, checkpoint: Checkpoint, *, late: bool,
                       sources: HealSources | None = None) -> int:
        """``CleanupExecutor.finish`` of committed ``checkpoint``; a failure is logged and left to recovery.
        Returns the blobs retention deleted."""
        try:
            state = self.session.states().get(commit_id)
            if state is None:
                return 0
            return self.cleanup.finish(state, checkpoint, heal=late, sources=sources)
        except Exception as exc:  # noqa: BLE001 - the commit stands; recovery finishes the cleanup
            self.on_unsettled()
            log.warning("%s %s of %s is committed, but its cleanup failed (recovery before the next commit "
                        "finishes it): %s", checkpoint.kind, commit_id, self.key, redact(str(exc)))
            return 0

    def abort(self, commit_id: str, exc: BaseException) -> None:
        """Abort open commit ``commit_id`` because of ``exc`` (``CleanupExecutor.abort``); a failing abort is
        logged and left to recovery (the blobs keep their TTL meanwhile). Forgets the cached generation unless
        ``exc`` is a fence (the pinned view stays: the writer is fenced for good)."""
        try:
            state = self.session.states().get(commit_id)
            if state is not None and state.is_open:
                self.cleanup.abort(state, f"{type(exc).__name__}: {exc}")
        except BaseException as cleanup_exc:  # noqa: BLE001 - the original error matters more
            self.on_unsettled()
            log.warning("abort of %s is unfinished (recovery or the TTL finishes it): %s", commit_id,
                        redact(str(cleanup_exc)))
            if not isinstance(cleanup_exc, Exception):
                raise
        if not isinstance(exc, FencedError):
            self.commit_point.invalidate()


def recover_append(cleanup: CleanupExecutor, state: CommitState, record: Checkpoint) -> str:
    """Recovery of a commit whose append outcome is unknown, as a commit of the engine: a record the log holds is
    finished with its heal check. One it does not hold is re-appended at once while inside the TTL budget its
    commit journaled (``CommitStarted.ttl_ms``; an older journal: the default TTL). Past the budget (an outage
    longer than half the TTL: gc may have taken its expired uploads) it is re-appended only when every object it
    references is present or put back from this host first (``healing.heal_record``: a snapshot from its local
    checkpoint and kept index, a delta from its kept changelog; a group's parts live on other hosts), and aborted
    otherwise: a record whose objects are gone is never committed. Either way the append is healed after it lands
    (``CleanupExecutor.finish``), as every late commit is. Returns the outcome in words. Raises
    ``AppendOutcomeUnknown`` (still unknown: nothing deleted), ``StorageError``."""
    repo, key = cleanup.repo, cleanup.key
    landed = next((cp for cp in repo.log.history(key) if cp.checkpoint_id == record.checkpoint_id), None)
    if landed is None:
        try:
            check_ttl_budget(record.checkpoint_id, record.created_time_ms, state.ttl_ms or DEFAULT_TTL_MS)
        except StorageError:
            missing = heal_record(repo, record, cleanup.journal_sources(state, record))
            if missing:
                deleted = cleanup.abort(state, f"its append never landed, its TTL budget is spent and {len(missing)} "
                                               "of its objects are gone")
                return (f"aborted (not in the log, past half its TTL, {len(missing)} objects gone): {len(deleted)} "
                        "blobs deleted")
        try:
            landed = repo.log.append(record, state.expected_generation)
        except FencedError as exc:
            deleted = cleanup.abort(state, f"its append did not land: {exc}")
            return (f"aborted (the log holds another record at generation {state.expected_generation + 1}): "
                    f"{len(deleted)} blobs deleted")
    if state.generation is None:
        cleanup.session.record(ev.CheckpointWritten(state.commit_id, now_ms(), landed.generation), sync=True)
    state = cleanup.session.states()[state.commit_id]
    return cleanup.finished(state.commit_id, cleanup.finish(state, landed, heal=True,
                                                             sources=cleanup.journal_sources(state, landed)))
