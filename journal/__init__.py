"""The event-sourced commit journal: events, the framed append-only file, the projection, recovery planning.

May import: ``blobstate.errors``, ``blobstate.local`` (checksums and durable directory writes).
"""

from blobstate.journal.events import EVENT_TYPES, Event, event_from_dict, event_to_dict
from blobstate.journal.file import Journal, JournalRead, TornTail
from blobstate.journal.projection import CommitPhase, CommitState, project
from blobstate.journal.recovery import AbortCommit, FinishCommit, RecoveryAction, ResolveAppend, plan_recovery

__all__ = [
    "EVENT_TYPES", "AbortCommit", "CommitPhase", "CommitState", "Event", "FinishCommit", "Journal", "JournalRead",
    "RecoveryAction", "ResolveAppend", "TornTail", "event_from_dict", "event_to_dict", "plan_recovery", "project",
]
