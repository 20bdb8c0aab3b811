"""What a set of checkpoint records references: the objects a record names itself (a snapshot's index, a delta's
changelog, a group's parts) and the blobs each snapshot index names (``walk_references``, ``references``). gc keeps
what they return; verify and the catalog walk them one record at a time. Pure: an index is read through the function
a caller hands in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import msgspec

from blobstate.errors import BlobstateError
from blobstate.model.index import SnapshotIndex
from blobstate.model.records import Checkpoint


class Reference(msgspec.Struct, frozen=True):
    """One record's references (a group record stands for one per partition part): the object the record names
    itself (``own``: a snapshot's index, a delta's changelog; ``""`` for a delta carrying its changelog inline,
    which references no object), and a snapshot's index as read (``index``; None with ``error`` set when it could
    not be read)."""

    record: Checkpoint
    index: SnapshotIndex | None = None
    error: BlobstateError | None = None

    @property
    def own(self) -> str:
        return self.record.changelog_blob_id if self.record.is_delta else self.record.index_blob_id

    @property
    def objects(self) -> set[str]:
        """``own`` and every blob the index references (only ``own`` when the index did not read)."""
        return ({self.own} if self.own else set()) | (self.index.referenced_blob_ids() if self.index is not None
                                                        else set())


def walk_references(records: Iterable[Checkpoint],
                    read_index: Callable[[Checkpoint], SnapshotIndex]) -> Iterator[Reference]:
    """One ``Reference`` per record ``records`` stand for (group records expanded, in order), reading each
    snapshot's index with ``read_index`` when it is reached; a ``BlobstateError`` it raises is the reference's
    ``error``."""
    for record in records:
        for part in record.expand():
            if part.is_delta:
                yield Reference(part)
                continue
            try:
                yield Reference(part, read_index(part))
            except BlobstateError as exc:
                yield Reference(part, error=exc)


def references(records: Iterable[Checkpoint], read_index: Callable[[Checkpoint], SnapshotIndex], *,
               on_unreadable: Callable[[Checkpoint, BlobstateError], None] | None = None) -> set[str]:
    """Every object id ``records`` reference: indexes, the blobs they reference, delta changelogs, a group's
    parts. Raises an index's error when it cannot be read (deletes are never decided on incomplete references);
    with ``on_unreadable``, that is called instead and only the index's own id is counted."""
    out: set[str] = set()
    for ref in walk_references(records, read_index):
        if ref.error is not None:
            if on_unreadable is None:
                raise ref.error
            on_unreadable(ref.record, ref.error)
        out |= ref.objects
    return out
