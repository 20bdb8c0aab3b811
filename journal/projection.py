"""The projection: a pure fold of journal events into one state per commit."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from blobstate.journal import events as ev


class CommitPhase(enum.IntEnum):
    """How far a commit got; ordered, so ``phase >= COMMITTED`` means the checkpoint log has it."""

    STARTED = 1
    LOCAL_CHECKPOINT = 2
    UPLOADING = 3
    INDEX_UPLOADED = 4
    APPENDING = 5  # the append may land at any moment: never aborted on the log's silence alone
    COMMITTED = 6
    COMPLETED = 7
    ABORTED = 8


@dataclass(frozen=True)
class CommitState:
    """Everything the journal knows about one commit."""

    commit_id: str
    phase: CommitPhase = CommitPhase.STARTED
    store_key: str = ""
    expected_generation: int = 0
    batch_id: int | None = None
    retain: int | None = None
    local_path: str | None = None
    planned_blob_ids: frozenset[str] = frozenset()
    uploaded_blob_ids: frozenset[str] = frozenset()
    index_blob_id: str | None = None
    index_crc32c: int | None = None
    index_size: int | None = None
    generation: int | None = None
    record: str | None = None  # the checkpoint record being appended (``CheckpointAppending``), JSON text
    repo_url: str = ""
    log_url: str = ""
    repository_id: str = ""  # the id of the repository the commit was written against ("": an older journal)
    ttl_removed: frozenset[str] = frozenset()
    deleted: frozenset[str] = frozenset()
    started_ms: int = 0
    kind: str = "snapshot"  # or "delta", "group"
    ttl_ms: int = 0  # the TTL of its uploads (0: not journaled)
    events: tuple[ev.Event, ...] = field(default=(), repr=False)

    @property
    def is_open(self) -> bool:
        return self.phase not in (CommitPhase.COMPLETED, CommitPhase.ABORTED)

    @property
    def is_delta(self) -> bool:
        return self.kind == "delta"

    @property
    def blob_ids(self) -> frozenset[str]:
        """Every blob this commit may have created (planned or uploaded), its index included."""
        ids = self.planned_blob_ids | self.uploaded_blob_ids
        return ids | {self.index_blob_id} if self.index_blob_id else ids


def apply(state: CommitState, event: ev.Event) -> CommitState:
    """The state after ``event`` (pure)."""
    s = replace(state, events=state.events + (event,))
    if isinstance(event, ev.CommitStarted):
        return replace(s, store_key=event.store_key, expected_generation=event.expected_generation,
                       batch_id=event.batch_id, retain=event.retain, started_ms=event.time_ms,
                       repo_url=event.repo_url, log_url=event.log_url, kind=event.kind,
                       ttl_ms=event.ttl_ms, repository_id=event.repository_id)
    if isinstance(event, ev.LocalCheckpointCreated):
        return replace(s, phase=max(s.phase, CommitPhase.LOCAL_CHECKPOINT), local_path=event.path)
    if isinstance(event, ev.UploadsPlanned):
        return replace(s, phase=max(s.phase, CommitPhase.UPLOADING), planned_blob_ids=frozenset(event.blob_ids),
                       index_blob_id=event.index_blob_id)
    if isinstance(event, ev.BlobUploaded):
        return replace(s, uploaded_blob_ids=s.uploaded_blob_ids | {event.blob_id})
    if isinstance(event, ev.IndexUploaded):
        return replace(s, phase=max(s.phase, CommitPhase.INDEX_UPLOADED), index_blob_id=event.index_blob_id,
                       index_crc32c=event.index_crc32c, index_size=event.index_size)
    if isinstance(event, ev.CheckpointAppending):
        return replace(s, phase=max(s.phase, CommitPhase.APPENDING), record=event.record,
                       expected_generation=event.expected_generation)  # the append's own, not the start's
    if isinstance(event, ev.CheckpointWritten):
        return replace(s, phase=max(s.phase, CommitPhase.COMMITTED), generation=event.generation)
    if isinstance(event, ev.TtlRemoved):
        return replace(s, ttl_removed=s.ttl_removed | set(event.blob_ids))
    if isinstance(event, ev.BlobsDeleted):
        return replace(s, deleted=s.deleted | set(event.blob_ids))
    if isinstance(event, ev.CommitCompleted):
        return replace(s, phase=CommitPhase.COMPLETED)
    if isinstance(event, ev.CommitAborted):
        return replace(s, phase=CommitPhase.ABORTED)
    return s


def project(events: Iterable[ev.Event]) -> dict[str, CommitState]:
    """Fold ``events`` into ``{commit_id: CommitState}``, in the order commits started."""
    states: dict[str, CommitState] = {}
    for event in events:
        current = states.get(event.commit_id) or CommitState(event.commit_id)
        states[event.commit_id] = apply(current, event)
    return states
