"""Commit events: frozen msgspec Structs with a type name and a schema version (upcast on read).

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

Every event is a frozen msgspec ``Struct``, tagged on the wire by its type name (``"type"``, the class name) and
carrying its schema version (``"v"``); reading one back (``event_from_dict``) upcasts an older version, then lets
msgspec check every field against its declared type (integers in the 64-bit range): a journal is input like any
other, and every defect is a ``CorruptJournalError``.

Adding an event: declare a subclass of ``Event`` here (its fields, defaults last); it is registered in
``EVENT_TYPES`` under its class name by that declaration alone. Changing an event's fields: raise its ``version``
and add an upcaster from the old version to ``UPCASTERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import msgspec

from blobstate.errors import CorruptJournalError

Int64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]

#: Every event type by its type name (its class name), filled in as the classes below are declared.
EVENT_TYPES: dict[str, type[Event]] = {}


class Event(msgspec.Struct, frozen=True, tag_field="type", tag=True):
    """Base of all events: the commit it belongs to and when it happened (ms since the epoch)."""

    commit_id: str
    time_ms: Int64

    type_name: ClassVar[str] = "Event"
    version: ClassVar[int] = 1

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("type_name", cls.__name__) != cls.__name__:
            raise TypeError(f"{cls.__name__}.type_name must be its class name, the tag msgspec writes")
        cls.type_name = cls.__name__  # ``tag=True``: the class name is the tag msgspec writes and checks
        EVENT_TYPES[cls.type_name] = cls


class CommitStarted(Event):
    """A commit began; ``expected_generation`` is the checkpoint log generation it will append after, ``retain``
    the number of checkpoints its post-commit step keeps. ``repo_url`` and ``log_url`` (without credentials or
    query) name the repository and checkpoint log the commit belongs to: recovery refuses another pair, and
    ``blobstate recover`` with no options reopens them. ``kind``: ``snapshot``, ``delta`` or ``group``.
    ``ttl_ms``: the TTL of its uploads (0: not recorded, an older journal), from which recovery counts its TTL
    budget. ``repository_id``: the id the repository's marker records ("" in an older journal): recovery refuses a
    commit of another repository by it, whatever URL reaches the two (issue 39 case 8)."""

    store_key: str
    expected_generation: Int64
    batch_id: Int64 | None = None
    retain: Int64 = 3
    repo_url: str = ""
    log_url: str = ""
    kind: str = "snapshot"
    ttl_ms: Int64 = 0
    repository_id: str = ""


class LocalCheckpointCreated(Event):
    """The consistent local copy exists at ``path`` (the local checkpoint directory)."""

    path: str


class UploadsPlanned(Event):
    """Every blob id this commit may create, and its index blob id (a delta commit: ``""``), recorded before any
    upload."""

    blob_ids: tuple[str, ...]
    index_blob_id: str
    bytes_planned: Int64 = 0


class BlobUploaded(Event):
    """One blob is in the store (with its TTL); ``size`` in bytes."""

    blob_id: str
    size: Int64


class IndexUploaded(Event):
    """The snapshot index is in the store (with its TTL); size in bytes and CRC32C of its bytes."""

    index_blob_id: str
    index_crc32c: Int64
    index_size: Int64


class CheckpointAppending(Event):
    """The append of ``record`` (the checkpoint record's JSON text) after ``expected_generation`` is about to be
    sent: from here the commit may land at any moment."""

    expected_generation: Int64
    record: str


class CheckpointWritten(Event):
    """The checkpoint log accepted the checkpoint at ``generation``: the commit point."""

    generation: Int64


class TtlRemoved(Event):
    """These blobs (the commit's new blobs and its index) are permanent now."""

    blob_ids: tuple[str, ...]


class BlobsDeleted(Event):
    """Deferred deletes: blobs no retained snapshot references, and the checkpoints that left retention."""

    blob_ids: tuple[str, ...]
    checkpoints_pruned: tuple[str, ...] = ()


class LocalCheckpointsPruned(Event):
    """Older local checkpoint directories were removed (the newest is kept for host-affinity restores)."""

    paths: tuple[str, ...]


class CommitCompleted(Event):
    """Post-commit work is done; the commit can be compacted away."""


class CommitAborted(Event):
    """The commit will never be committed; its blobs and index are deleted."""

    reason: str = ""


#: Upcasters: ``(type name, version) -> function`` turning a record of that version into the next version.
UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


def event_to_dict(event: Event) -> dict[str, Any]:
    """``{"type": ..., "v": ..., <fields>}`` with tuples as lists (JSON-ready)."""
    doc = msgspec.to_builtins(event)
    doc = {"type": doc.pop("type"), "v": event.version, **doc}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in doc.items()}


def event_from_dict(doc: dict[str, Any]) -> Event:
    """Rebuild an event, upcasting older versions; raises ``CorruptJournalError`` on an unknown type, a version
    newer than this blobstate's, a missing field or a field of the wrong type. Unknown fields are ignored."""
    try:
        name = doc["type"]
        cls = EVENT_TYPES[name]
        version = doc.get("v", 1)
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError(f"version {version!r:.20} is not an integer")
        while version < cls.version:
            doc = UPCASTERS[(name, version)](dict(doc))
            version += 1
        if version > cls.version:
            raise ValueError(f"{name} v{version} is newer than this blobstate understands (v{cls.version})")
        return msgspec.convert(doc, cls)
    except (KeyError, TypeError, ValueError, AttributeError, msgspec.ValidationError) as exc:
        raise CorruptJournalError(f"unreadable journal event {_safe(doc)}: {exc!r:.200}") from None


def _safe(doc: Any) -> str:
    """A short, printable rendering of an unreadable record (no control characters reach a terminal)."""
    return "".join(c if c.isprintable() else "?" for c in repr(doc)[:200])
