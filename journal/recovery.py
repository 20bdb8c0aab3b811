"""The recovery planner: a pure function from commit states and the checkpoint log to actions.

Rules:
- A commit is *committed* when the journal has its ``CheckpointWritten``, or when the checkpoint log holds its
  checkpoint id (the crash fell between the log write and the journal append).
- A committed commit that is not completed gets ``FinishCommit``: make sure every blob it references exists
  (healing from the local checkpoint), remove the TTL of its new blobs and index, apply retention (deferred
  deletes), prune local checkpoints, record ``CommitCompleted``.
- A commit that reached ``CheckpointAppending`` but that the log does not show gets ``ResolveAppend``: the append
  may still land (its outcome is unknown), so the executor re-appends the same record until the log answers for
  certain; only a certain "no" (another writer holds that generation) turns it into an abort. Nothing it wrote is
  deleted while the outcome is unknown.
- Any other open commit gets ``AbortCommit``: delete every blob it planned or uploaded and its index (never a blob a
  retained snapshot references: the executor subtracts those), remove its local checkpoint, record
  ``CommitAborted``.
All actions are idempotent, so a crash during recovery is recovered by running recovery again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from blobstate.journal.projection import CommitPhase, CommitState


@dataclass(frozen=True)
class _Action:
    state: CommitState
    reason: str
    name: ClassVar[str] = ""


@dataclass(frozen=True)
class FinishCommit(_Action):
    """Finish the post-commit steps of a committed commit."""

    name: ClassVar[str] = "finish"


@dataclass(frozen=True)
class ResolveAppend(_Action):
    """Learn for certain whether an append whose outcome is unknown landed (re-append the same record)."""

    name: ClassVar[str] = "resolve"


@dataclass(frozen=True)
class AbortCommit(_Action):
    """Abort an uncommitted commit: delete its blobs, index and local checkpoint."""

    name: ClassVar[str] = "abort"


RecoveryAction = FinishCommit | ResolveAppend | AbortCommit


def plan_recovery(states: Mapping[str, CommitState], committed_ids: Iterable[str]) -> list[RecoveryAction]:
    """Actions for every open commit in ``states``; ``committed_ids`` are the checkpoint ids in the log."""
    in_log = set(committed_ids)
    actions: list[RecoveryAction] = []
    for state in states.values():
        if not state.is_open:
            continue
        if state.phase >= CommitPhase.COMMITTED:
            actions.append(FinishCommit(state, f"committed at generation {state.generation}; cleanup unfinished"))
        elif state.commit_id in in_log:
            actions.append(FinishCommit(state, "the checkpoint log has it (crash after the commit point)"))
        elif state.phase == CommitPhase.APPENDING:
            actions.append(ResolveAppend(state, "its append was sent and the log does not show it yet"))
        else:
            actions.append(AbortCommit(state, f"not committed (reached {state.phase.name})"))
    return actions
