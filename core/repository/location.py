"""What a location holds, told from a listing of the blob store: nothing (a new repository may go there), a
repository from before the marker (blobstate's layout: blobs, indexes, checkpoint records), or something else; and
whether any store of a repository holds a snapshot index (``marker.bind_log``'s evidence)."""

from __future__ import annotations

from blobstate.model import layout
from blobstate.plugin.interfaces import BlobStore

#: Objects looked at, at most, to tell an empty location, a pre-marker repository and a foreign location apart.
_SCAN_LIMIT = 10_000

_LAYOUT_KINDS = (layout.ObjectKind.BLOB, layout.ObjectKind.INDEX, layout.ObjectKind.RECORD)


def _is_layout_object(object_id: str) -> bool:
    """A blob, an index or a checkpoint record of some store: what a repository from before the marker holds."""
    name = layout.parse(object_id)
    return name is not None and name.kind in _LAYOUT_KINDS


def scan_location(store: BlobStore) -> tuple[bool, bool]:
    """``(empty, holds blobstate's layout)`` for a location without a marker, from a bounded listing."""
    empty = True
    for count, info in enumerate(store.list("")):
        empty = False
        if _is_layout_object(info.blob_id):
            return False, True
        if count >= _SCAN_LIMIT:
            break
    return empty, False


def holds_indexes(store: BlobStore) -> bool:
    """Whether any store of the repository in ``store`` holds a snapshot index (a listing, stopped at the first)."""
    for info in store.list(""):
        name = layout.parse(info.blob_id)
        if name is not None and name.kind is layout.ObjectKind.INDEX:
            return True
    return False


__all__ = ["holds_indexes", "scan_location"]
