"""Commit events: frozen dataclasses with a type name and a schema version (upcast on read).

One commit (identified by its checkpoint id, ``commit_id``) goes through, in order: ``CommitStarted``,
``LocalCheckpointCreated``, ``UploadsPlanned``, ``BlobUploaded`` (per blob), ``IndexUploaded``,
``CheckpointAppending``, ``CheckpointWritten`` (the commit point), ``TtlRemoved``, ``BlobsDeleted``,
``LocalCheckpointsPruned``, ``CommitCompleted``; or ``CommitAborted`` at any point before ``CheckpointWritten``.

A commit is a snapshot commit or a delta commit (``CommitStarted.kind``): a delta commit uploads one changelog
blob (``UploadsPlanned`` with it as the only blob and no index), appends a delta record and completes without a
local checkpoint or retention.

Two events are not in the original design. ``UploadsPlanned`` records every blob id (and the index blob id)
*before* the first byte is uploaded, so an abort deletes even a blob whose upload was cut off by a crash, with no
wait for its TTL. ``CheckpointAppending`` records the exact checkpoint record before the append is sent: from then
on the append may land at any moment, so recovery never aborts such a commit on the log's silence alone; it
re-appends the same record until the log answers for certain (``CheckpointLog.append`` is idempotent for it).

Every field is type-checked when an event is read back (``event_from_dict``): a journal is input like any other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from blobstate.errors import CorruptJournalError


@dataclass(frozen=True)
class Event:
    """Base of all events: the commit it belongs to and when it happened (ms since the epoch)."""

    commit_id: str
    time_ms: int

    type_name: ClassVar[str] = "Event"
    version: ClassVar[int] = 1


@dataclass(frozen=True)
class CommitStarted(Event):
    """A commit began; ``expected_generation`` is the checkpoint log generation it will append after, ``retain``
    the number of checkpoints its post-commit step keeps. ``repo_url`` and ``log_url`` (without credentials or
    query) name the repository and checkpoint log the commit belongs to: recovery refuses another pair, and
    ``blobstate recover`` with no options reopens them. ``kind``: ``snapshot``, ``delta`` or ``group``.
    ``ttl_ms``: the TTL of its uploads (0: not recorded, an older journal), from which recovery counts its TTL
    budget."""

    store_key: str
    expected_generation: int
    batch_id: int | None = None
    retain: int = 3
    repo_url: str = ""
    log_url: str = ""
    kind: str = "snapshot"
    ttl_ms: int = 0
    type_name: ClassVar[str] = "CommitStarted"


@dataclass(frozen=True)
class LocalCheckpointCreated(Event):
    """The consistent local copy exists at ``path`` (the local checkpoint directory)."""

    path: str
    type_name: ClassVar[str] = "LocalCheckpointCreated"


@dataclass(frozen=True)
class UploadsPlanned(Event):
    """Every blob id this commit may create, and its index blob id (a delta commit: ``""``), recorded before any
    upload."""

    blob_ids: tuple[str, ...]
    index_blob_id: str
    bytes_planned: int = 0
    type_name: ClassVar[str] = "UploadsPlanned"


@dataclass(frozen=True)
class BlobUploaded(Event):
    """One blob is in the store (with its TTL); ``size`` in bytes."""

    blob_id: str
    size: int
    type_name: ClassVar[str] = "BlobUploaded"


@dataclass(frozen=True)
class IndexUploaded(Event):
    """The snapshot index is in the store (with its TTL); size in bytes and CRC32C of its bytes."""

    index_blob_id: str
    index_crc32c: int
    index_size: int
    type_name: ClassVar[str] = "IndexUploaded"


@dataclass(frozen=True)
class CheckpointAppending(Event):
    """The append of ``record`` (the checkpoint record's JSON text) after ``expected_generation`` is about to be
    sent: from here the commit may land at any moment."""

    expected_generation: int
    record: str
    type_name: ClassVar[str] = "CheckpointAppending"


@dataclass(frozen=True)
class CheckpointWritten(Event):
    """The checkpoint log accepted the checkpoint at ``generation``: the commit point."""

    generation: int
    type_name: ClassVar[str] = "CheckpointWritten"


@dataclass(frozen=True)
class TtlRemoved(Event):
    """These blobs (the commit's new blobs and its index) are permanent now."""

    blob_ids: tuple[str, ...]
    type_name: ClassVar[str] = "TtlRemoved"


@dataclass(frozen=True)
class BlobsDeleted(Event):
    """Deferred deletes: blobs no retained snapshot references, and the checkpoints that left retention."""

    blob_ids: tuple[str, ...]
    checkpoints_pruned: tuple[str, ...] = ()
    type_name: ClassVar[str] = "BlobsDeleted"


@dataclass(frozen=True)
class LocalCheckpointsPruned(Event):
    """Older local checkpoint directories were removed (the newest is kept for host-affinity restores)."""

    paths: tuple[str, ...]
    type_name: ClassVar[str] = "LocalCheckpointsPruned"


@dataclass(frozen=True)
class CommitCompleted(Event):
    """Post-commit work is done; the commit can be compacted away."""

    type_name: ClassVar[str] = "CommitCompleted"


@dataclass(frozen=True)
class CommitAborted(Event):
    """The commit will never be committed; its blobs and index are deleted."""

    reason: str = ""
    type_name: ClassVar[str] = "CommitAborted"


EVENT_TYPES: dict[str, type[Event]] = {
    cls.type_name: cls
    for cls in (CommitStarted, LocalCheckpointCreated, UploadsPlanned, BlobUploaded, IndexUploaded,
                CheckpointAppending, CheckpointWritten, TtlRemoved, BlobsDeleted, LocalCheckpointsPruned,
                CommitCompleted, CommitAborted)
}

#: Upcasters: ``(type name, version) -> function`` turning a record of that version into the next version.
UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def event_to_dict(event: Event) -> dict[str, Any]:
    """``{"type": ..., "v": ..., <fields>}`` with tuples as lists (JSON-ready)."""
    doc: dict[str, Any] = {"type": event.type_name, "v": event.version}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        doc[f.name] = list(value) if isinstance(value, tuple) else value
    return doc


def event_from_dict(doc: dict[str, Any]) -> Event:
    """Rebuild an event, upcasting older versions; raises ``CorruptJournalError`` on unknown types or fields."""
    try:
        name = doc["type"]
        cls = EVENT_TYPES[name]
        version = int(doc.get("v", 1))
        while version < cls.version:
            doc = UPCASTERS[(name, version)](dict(doc))
            version += 1
        if version > cls.version:
            raise ValueError(f"{name} v{version} is newer than this blobstate understands (v{cls.version})")
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in doc:
                kwargs[f.name] = _checked(f.name, str(f.type), doc[f.name])
        return cls(**kwargs)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptJournalError(f"unreadable journal event {_safe(doc)}: {exc!r:.200}") from None


def _safe(doc: Any) -> str:
    """A short, printable rendering of an unreadable record (no control characters reach a terminal)."""
    return "".join(c if c.isprintable() else "?" for c in repr(doc)[:200])


def _checked(name: str, annotation: str, value: Any) -> Any:
    """``value`` if it has the JSON type the field's annotation names (lists become tuples); ``TypeError`` else."""
    if annotation == "tuple[str, ...]":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{name} must be a list of strings")
        return tuple(value)
    expected = {"str": (str,), "int": (int,), "int | None": (int, type(None)),
                "str | None": (str, type(None))}.get(annotation)
    if expected is None:
        raise TypeError(f"{name}: no reader for the field type {annotation}")
    if not isinstance(value, expected) or isinstance(value, bool):
        raise TypeError(f"{name} must be {annotation}, got {type(value).__name__}")
    return value
