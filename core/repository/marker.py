"""The repository marker: the object that makes a location a blobstate repository.

``blobstate-repository.json`` at the repository root (restic's repository ``config`` object plays the same part):
``{"format": "blobstate-repository", "formatVersion": 1, "repositoryId": "<32 hex>", "createdTimeMs": <ms>,
"createdBy": "blobstate <version>"}``. The first backup into an empty location writes it (exclusively, so two first
backups agree on one); ``blobstate init`` may write it beforehand, but is never required. Every other command
checks it, so a mistyped ``--repo`` is reported as "no blobstate repository" (``RepositoryNotFound``, exit code 6)
instead of looking like an empty repository.

A repository written before the marker existed (objects of blobstate's layout, no marker) is accepted, and its
next backup adds the marker.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from blobstate.errors import BlobNotFound, ConfigurationError, CorruptIndexError, RepositoryNotFound
from blobstate.model.layout import now_ms
from blobstate.plugin.interfaces import BlobStore

log = logging.getLogger(__name__)

MARKER_ID = "blobstate-repository.json"
FORMAT = "blobstate-repository"
FORMAT_VERSION = 1
#: Objects looked at, at most, to tell an empty location, a pre-marker repository and a foreign location apart.
_SCAN_LIMIT = 10_000


@dataclass(frozen=True)
class RepositoryInfo:
    """What the marker records: the repository's id, its format version, when and by what it was created (ms).

    ``legacy`` is true for a repository from before the marker (no marker object, blobstate's layout found).
    """

    repository_id: str
    format_version: int
    created_time_ms: int | None
    created_by: str
    legacy: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "formatVersion": self.format_version, "repositoryId": self.repository_id,
                "createdTimeMs": self.created_time_ms, "createdBy": self.created_by}


def read_marker(store: BlobStore) -> RepositoryInfo | None:
    """The repository's marker, or None when there is none.

    Raises ``CorruptIndexError`` (exit 3) for a damaged marker and ``ConfigurationError`` for one written by a
    newer blobstate (its format version is higher than this one reads).
    """
    try:
        data = store.get_bytes(MARKER_ID)
    except BlobNotFound:
        return None
    try:
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a blobstate repository marker")
        version = doc["formatVersion"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise ValueError(f"formatVersion {version!r}")
        created = doc.get("createdTimeMs")
        info = RepositoryInfo(str(doc["repositoryId"]), version, created if isinstance(created, int) else None,
                              str(doc.get("createdBy", "")))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptIndexError(f"the repository marker {MARKER_ID} is damaged: {exc}") from None
    if info.format_version > FORMAT_VERSION:
        raise ConfigurationError(f"the repository has format version {info.format_version}, written by a newer "
                                 f"blobstate ({info.created_by or 'unknown'}); this one reads up to {FORMAT_VERSION}")
    return info


def _version() -> str:
    from importlib import metadata

    try:
        return f"blobstate {metadata.version('blobstate')}"
    except metadata.PackageNotFoundError:
        return "blobstate"


def write_marker(store: BlobStore) -> RepositoryInfo:
    """Create the marker exclusively; when another writer created it first, that one is returned."""
    info = RepositoryInfo(uuid.uuid4().hex, FORMAT_VERSION, now_ms(), _version())
    try:
        store.put_exclusive(MARKER_ID, json.dumps(info.to_json(), separators=(",", ":")).encode())
    except FileExistsError:
        existing = read_marker(store)
        if existing is None:  # deleted again in between: nothing sensible to agree on
            raise RepositoryNotFound("the repository marker appeared and vanished while it was created") from None
        return existing
    log.info("created repository %s (marker %s)", info.repository_id, MARKER_ID)
    return info


def _is_layout_object(blob_id: str) -> bool:
    parts = blob_id.split("/")
    if len(parts) != 5:
        return False
    return parts[0] == "checkpoints" or parts[3] in ("blobs", "indexes")


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


def ensure_repository(store: BlobStore, url: str, *, create: bool) -> RepositoryInfo:
    """Check that ``store`` (opened on ``url``) holds a blobstate repository; with ``create``, make one in an empty
    location (or mark a repository from before the marker).

    Raises ``RepositoryNotFound`` (exit 6) when there is none and ``create`` is false, or when ``create`` is true
    but the location holds other objects (a repository is never created over foreign data).
    """
    from blobstate.repository.options import redact

    info = read_marker(store)
    if info is not None:
        return info
    empty, legacy = scan_location(store)
    if legacy:
        if create:
            return write_marker(store)  # also the loser of a race between two first backups: it gets the winner's
        return RepositoryInfo("", FORMAT_VERSION, None, "", legacy=True)
    if not create:
        raise RepositoryNotFound(
            f"no blobstate repository at {redact(url)}: check --repo (the first `blobstate backup` into an empty "
            "location creates the repository, as does `blobstate init`)")
    if not empty:
        info = read_marker(store)  # a concurrent first backup may have created it since the first look
        if info is not None:
            return info
        raise RepositoryNotFound(
            f"no blobstate repository at {redact(url)}, and the location is not empty: a repository is created only "
            "in an empty location (choose a new folder or prefix)")
    return write_marker(store)
