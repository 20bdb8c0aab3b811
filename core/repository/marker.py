"""The repository marker: the object that makes a location a blobstate repository.

``blobstate-repository.json`` at the repository root (restic's repository ``config`` object plays the same part):
``{"format": "blobstate-repository", "formatVersion": 1, "repositoryId": "<32 hex>", "createdTimeMs": <ms>,
"createdBy": "blobstate <version>", "checkpointLog": "<identity>"}``. The first backup into an empty location writes
it (exclusively, so two first backups agree on one); ``blobstate init`` may write it beforehand, but is never
required. Every other command checks it, so a mistyped ``--repo`` is reported as "no blobstate repository"
(``RepositoryNotFound``, exit code 6) instead of looking like an empty repository.

A repository written before the marker existed (objects of blobstate's layout, no marker) is accepted, and its
next backup adds the marker.

A repository has exactly one checkpoint log: ``checkpointLog`` is its identity
(``blobstate.repository.log_identity``), written with the marker by the first writer, or recorded by the first
command that opens a repository whose marker lacks it (a marker from before the field). ``bind_log`` refuses every
other log (``LogMismatchError``, exit 2); ``blobstate init --log NEW --change-log`` moves the repository to another
log on purpose. The marker is created exclusively, so two first backups agree on one log. Recording the identity
into an older marker (and ``--change-log``) rewrites it and reads it back: a first use that reads another log back
is refused, but two first uses with different logs racing within one write-and-read-back can both go on (the
window exists only once per pre-field repository; the next command of the loser is refused).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from blobstate.errors import (
    AccessDeniedError,
    BlobNotFound,
    ConfigurationError,
    CorruptIndexError,
    LogMismatchError,
    RepositoryNotFound,
    StorageError,
)
from blobstate.model.layout import now_ms
from blobstate.plugin.interfaces import BlobStore, PutRequest

log = logging.getLogger(__name__)

MARKER_ID = "blobstate-repository.json"
FORMAT = "blobstate-repository"
FORMAT_VERSION = 2  # the newest this blobstate reads
PLAIN_FORMAT_VERSION = 1  # what an unencrypted repository's marker is written as (readable by every blobstate)
ENCRYPTED_FORMAT_VERSION = 2  # a marker with ``encryption`` (issue 33): older blobstates refuse it
#: Objects looked at, at most, to tell an empty location, a pre-marker repository and a foreign location apart.
_SCAN_LIMIT = 10_000


@dataclass(frozen=True)
class RepositoryInfo:
    """What the marker records: the repository's id, its format version, when and by what it was created (ms),
    and the identity of its checkpoint log (``checkpoint_log``; None in a marker from before the field).

    ``legacy`` is true for a repository from before the marker (no marker object, blobstate's layout found).
    """

    repository_id: str
    format_version: int
    created_time_ms: int | None
    created_by: str
    legacy: bool = False
    checkpoint_log: str | None = None
    #: true only in the process (and the call) that wrote the marker: the CLI says "created repository at URL"
    created: bool = field(default=False, compare=False)
    #: an encrypted repository's key data (``blobstate.codec.keys.EncryptionInfo``: the wrapped key, never the key)
    encryption: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        doc = {"format": FORMAT, "formatVersion": self.format_version, "repositoryId": self.repository_id,
               "createdTimeMs": self.created_time_ms, "createdBy": self.created_by}
        if self.checkpoint_log is not None:
            doc["checkpointLog"] = self.checkpoint_log
        if self.encryption is not None:
            doc["encryption"] = self.encryption
        return doc


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
        log_id = doc.get("checkpointLog")
        encryption = doc.get("encryption")
        if encryption is not None and not isinstance(encryption, dict):
            raise ValueError("encryption is not an object")
        info = RepositoryInfo(str(doc["repositoryId"]), version, created if isinstance(created, int) else None,
                              str(doc.get("createdBy", "")), checkpoint_log=log_id if isinstance(log_id, str) else None,
                              encryption=encryption)
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


def write_marker(store: BlobStore, checkpoint_log: str | None = None, *,
                 encryption: Callable[[str], dict[str, Any]] | None = None) -> RepositoryInfo:
    """Create the marker exclusively (recording ``checkpoint_log``, the log's identity, and with ``encryption`` the
    key data it makes for the new repository id); when another writer created it first, that one is returned."""
    info = RepositoryInfo(uuid.uuid4().hex, PLAIN_FORMAT_VERSION, now_ms(), _version(), checkpoint_log=checkpoint_log)
    if encryption is not None:
        info = replace(info, format_version=ENCRYPTED_FORMAT_VERSION, encryption=encryption(info.repository_id))
    try:
        store.put_exclusive(MARKER_ID, json.dumps(info.to_json(), separators=(",", ":")).encode())
    except FileExistsError:
        existing = read_marker(store)
        if existing is None:  # deleted again in between: nothing sensible to agree on
            raise RepositoryNotFound("the repository marker appeared and vanished while it was created") from None
        return existing
    log.info("created repository %s (marker %s)", info.repository_id, MARKER_ID)
    return replace(info, created=True)


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


def ensure_repository(store: BlobStore, url: str, *, create: bool, checkpoint_log: str | None = None,
                      encryption: Callable[[str], dict[str, Any]] | None = None) -> RepositoryInfo:
    """Check that ``store`` (opened on ``url``) holds a blobstate repository; with ``create``, make one in an empty
    location (or mark a repository from before the marker).

    Raises ``RepositoryNotFound`` (exit 6) when there is none and ``create`` is false, or when ``create`` is true
    but the location holds other objects (a repository is never created over foreign data). A marker written here
    records ``checkpoint_log`` (the identity of the log it is opened with) and, in an empty location, the key data
    ``encryption`` makes (a repository from before the marker holds plaintext: it is never marked encrypted).
    """
    from blobstate.repository.options import redact
    from blobstate.repository.storage_errors import missing_bucket

    info = read_marker(store)
    if info is not None:
        return info
    try:
        exists = store.location_exists()
    except AccessDeniedError:
        exists = None  # a credential scoped to a prefix may not read the bucket itself: the calls below tell
    if exists is False:
        raise missing_bucket(url)
    empty, legacy = scan_location(store)
    if legacy:
        if create:
            # also the loser of a race between two first backups: it gets the winner's
            return write_marker(store, checkpoint_log)
        return RepositoryInfo("", PLAIN_FORMAT_VERSION, None, "", legacy=True)
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
    return write_marker(store, checkpoint_log, encryption=encryption)


def _rewrite(store: BlobStore, info: RepositoryInfo) -> None:
    store.put(PutRequest(MARKER_ID, json.dumps(info.to_json(), separators=(",", ":")).encode()))


def bind_log(store: BlobStore, info: RepositoryInfo, url: str, identity: str, *, change: bool = False,
             read_only: bool = False) -> RepositoryInfo:
    """Check that the repository's checkpoint log is ``identity``; record it when the marker has none (a marker
    from before the field; with ``read_only``, a command that only reads, a failed write is only logged); with
    ``change``, move the repository to this log.

    Raises ``LogMismatchError`` (exit 2) when the marker records another log. A repository without a marker (from
    before the marker) is left as it is: its next backup writes a marker with the identity.
    """
    from blobstate.repository.log_identity import describe
    from blobstate.repository.options import redact

    if info.legacy or not info.repository_id or info.checkpoint_log == identity:
        return info
    if info.checkpoint_log is not None and not change:
        raise LogMismatchError(
            f"the repository at {redact(url)} has its checkpoint log at {describe(info.checkpoint_log)}, and this "
            f"command was opened with {describe(identity)}: a repository has exactly one log (pass the recorded "
            "one with --log, or none for the file log inside the repository). To move the repository to another "
            f"log on purpose: blobstate init --repo {redact(url)} --log NEW --change-log")
    previous = info.checkpoint_log
    updated = replace(info, checkpoint_log=identity, created=False)
    try:
        _rewrite(store, updated)
    except StorageError as exc:
        if not read_only or change:
            raise
        log.warning("could not record the checkpoint log in the repository marker (read-only access?): %s", exc)
        return info
    again = read_marker(store)
    if again is None or again.checkpoint_log != identity:
        raise LogMismatchError(f"the repository at {redact(url)} was bound to another checkpoint log "
                               f"({describe(again.checkpoint_log) if again and again.checkpoint_log else 'none'}) "
                               "at the same time: run the command again with that log")
    if previous is None:
        log.info("recorded the checkpoint log %s in the repository marker", describe(identity))
    else:
        log.warning("moved the repository from the checkpoint log %s to %s", describe(previous), describe(identity))
    return replace(again, created=info.created)


# --- encryption (issue 33): key rotation rewrites the marker's ``encryption`` only -----------------------------
def record_encryption(store: BlobStore, info: RepositoryInfo, encryption: dict[str, Any]) -> RepositoryInfo:
    """Rewrite the marker with ``encryption`` (a re-wrapped data key) and read it back. Raises ``StorageError``
    when the marker cannot be written, ``ConfigurationError`` when another write replaced it in between."""
    updated = replace(info, encryption=encryption, created=False)
    _rewrite(store, updated)
    again = read_marker(store)
    if again is None or again.encryption != encryption:
        raise ConfigurationError("the repository marker changed while its key was rotated: run the rotation again")
    return again
