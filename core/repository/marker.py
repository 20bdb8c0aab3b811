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

An encrypted repository's marker (format version 2, so a blobstate that reads up to 1 refuses it rather than write
plaintext into it) adds ``"encryption": {"algorithm", "keyProvider", "keyId", "wrappedKey"}`` (``EncryptionDoc``:
the data key wrapped by the operator's key, never the key; ``blobstate.codec.keys``); an unencrypted repository's
stays format version 1, byte for byte as before. The marker is read bounded (``MAX_MARKER_BYTES``) whatever it holds.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from blobstate.errors import (
    AccessDeniedError,
    BlobNotFound,
    ConfigurationError,
    CorruptIndexError,
    LogMismatchError,
    RepositoryNotFound,
    StorageError,
)
from blobstate.model import layout
from blobstate.model.layout import MARKER, now_ms
from blobstate.plugin.interfaces import BlobStore, BoundedSink, PutRequest

if TYPE_CHECKING:
    from blobstate.codec.keys import KeyConfig

log = logging.getLogger(__name__)

MARKER_ID = MARKER  # the marker's object id (``blobstate.model.layout.MARKER``)
FORMAT = "blobstate-repository"
FORMAT_VERSION = 2  # the newest this blobstate reads
PLAIN_FORMAT_VERSION = 1  # what an unencrypted repository's marker is written as (readable by every blobstate)
ENCRYPTED_FORMAT_VERSION = 2  # a marker with ``encryption`` (issue 33): older blobstates refuse it
MAX_MARKER_BYTES = 64 << 10  # a marker is about 200 bytes (500 encrypted); a larger object is refused unread
#: Objects looked at, at most, to tell an empty location, a pre-marker repository and a foreign location apart.
_SCAN_LIMIT = 10_000
_Text = Annotated[str, Meta(max_length=4096)]


class _MarkerHead(msgspec.Struct, frozen=True, rename="camel"):
    """What every version of the marker has: read first, so a marker of a newer format is refused as such
    (``ConfigurationError``) whatever its other fields hold."""

    format: Any = None
    format_version: int = msgspec.field(default=0)
    created_by: Any = ""


class EncryptionDoc(msgspec.Struct, frozen=True, rename="camel"):
    """The marker's ``encryption`` object (format version 2; ``blobstate.codec.keys.EncryptionInfo`` reads its
    values): the algorithm, the key provider's name, the id of the key that wraps the data key, and the wrapped data
    key (base64). Never the key."""

    algorithm: _Text
    key_provider: _Text
    key_id: _Text
    wrapped_key: _Text


class MarkerDoc(msgspec.Struct, frozen=True, rename="camel"):
    """The marker as written (format version 1; 2 with ``encryption``): ``checkpointLog`` only once a log identity
    is recorded, ``encryption`` only in an encrypted repository's. A later field is added with an ``UNSET``
    default, so markers without it still read."""

    format: str
    format_version: int
    repository_id: _Text
    created_time_ms: int | None = None
    created_by: _Text = ""
    checkpoint_log: _Text | UnsetType = UNSET
    encryption: EncryptionDoc | UnsetType = UNSET


_HEAD = msgspec.json.Decoder(_MarkerHead)
_DOC = msgspec.json.Decoder(MarkerDoc)


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
        """The marker's JSON document (``MarkerDoc``)."""
        log_id = self.checkpoint_log if self.checkpoint_log is not None else UNSET
        encryption = UNSET if self.encryption is None else msgspec.convert(self.encryption, EncryptionDoc)
        doc = MarkerDoc(FORMAT, self.format_version, self.repository_id, self.created_time_ms, self.created_by,
                        log_id, encryption)
        return msgspec.to_builtins(doc)  # type: ignore[no-any-return]

    def to_bytes(self) -> bytes:
        """The marker as written: compact JSON in ASCII (the bytes every blobstate version wrote)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()


def parse_marker(data: bytes) -> RepositoryInfo:
    """The marker ``data`` holds. Raises ``CorruptIndexError`` (exit 3) for a damaged marker and
    ``ConfigurationError`` for one written by a newer blobstate (its format version is higher than this one
    reads)."""
    try:
        head = _HEAD.decode(data)
        if head.format != FORMAT:
            raise ValueError("not a blobstate repository marker")
        if head.format_version > FORMAT_VERSION:
            raise ConfigurationError(f"the repository has format version {head.format_version}, written by a newer "
                                     f"blobstate ({head.created_by or 'unknown'}); this one reads up to "
                                     f"{FORMAT_VERSION}")
        doc = _DOC.decode(data)
    except (ValueError, msgspec.MsgspecError) as exc:  # msgspec's errors are ValueErrors too
        raise CorruptIndexError(f"the repository marker {MARKER_ID} is damaged: {exc}"[:2000]) from None
    return RepositoryInfo(doc.repository_id, doc.format_version, doc.created_time_ms, doc.created_by,
                          checkpoint_log=None if doc.checkpoint_log is UNSET else doc.checkpoint_log,
                          encryption=None if doc.encryption is UNSET else msgspec.to_builtins(doc.encryption))


def read_marker(store: BlobStore) -> RepositoryInfo | None:
    """The repository's marker, or None when there is none; read no further than ``MAX_MARKER_BYTES``.

    Raises ``CorruptIndexError`` (exit 3) for a damaged or oversized marker and ``ConfigurationError`` for one
    written by a newer blobstate (``parse_marker``).
    """
    try:
        data = store.get_bounded(MARKER_ID, BoundedSink(MAX_MARKER_BYTES, f"the repository marker {MARKER_ID}",
                                                        why="a marker is a few hundred bytes"))
    except BlobNotFound:
        return None
    return parse_marker(data)


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
        store.put_exclusive(MARKER_ID, info.to_bytes())
    except FileExistsError:
        existing = read_marker(store)
        if existing is None:  # deleted again in between: nothing sensible to agree on
            raise RepositoryNotFound("the repository marker appeared and vanished while it was created") from None
        return existing
    log.info("created repository %s (marker %s)", info.repository_id, MARKER_ID)
    return replace(info, created=True)


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


def ensure_repository(store: BlobStore, url: str, *, create: bool, checkpoint_log: str | None = None,
                      encryption: Callable[[str], dict[str, Any]] | None = None) -> RepositoryInfo:
    """Check that ``store`` (opened on ``url``) holds a blobstate repository; with ``create``, make one in an empty
    location (or mark a repository from before the marker).

    Raises ``RepositoryNotFound`` (exit 6) when there is none and ``create`` is false, or when ``create`` is true
    but the location holds other objects (a repository is never created over foreign data). A marker written here
    records ``checkpoint_log`` (the identity of the log it is opened with) and, in an empty location, the key data
    ``encryption`` makes (a repository from before the marker holds plaintext: it is never marked encrypted).
    """
    info = read_marker(store)
    if info is not None:
        return info
    # imported past the common case, deliberately: an existing repository needs neither (issue 31)
    from blobstate.repository.options import redact
    from blobstate.repository.storage_errors import missing_bucket

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
    store.put(PutRequest(MARKER_ID, info.to_bytes()))


def bind_log(store: BlobStore, info: RepositoryInfo, url: str, identity: str, *, change: bool = False,
             read_only: bool = False) -> RepositoryInfo:
    """Check that the repository's checkpoint log is ``identity``; record it when the marker has none (a marker
    from before the field; with ``read_only``, a command that only reads, a failed write is only logged); with
    ``change``, move the repository to this log.

    Raises ``LogMismatchError`` (exit 2) when the marker records another log. A repository without a marker (from
    before the marker) is left as it is: its next backup writes a marker with the identity.
    """
    from blobstate.repository.log_identity import describe, same_log
    from blobstate.repository.options import redact

    if info.legacy or not info.repository_id or (info.checkpoint_log is not None and
                                                 same_log(info.checkpoint_log, identity)):
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


def rotate_data_key(store: BlobStore, url: str, old: KeyConfig, new: KeyConfig) -> RepositoryInfo:
    """Re-wrap the data key of the encrypted repository in ``store`` (at ``url``): unwrapped by ``old``, wrapped by
    ``new`` (``blobstate.codec.keys.rewrap``), the marker rewritten (``record_encryption``); nothing else changes.
    Raises ``ConfigurationError`` (exit 2) without a new key or for a repository that is not encrypted,
    ``RepositoryNotFound`` (exit 6), ``EncryptionKeyError`` (exit 3) when ``old`` does not unwrap the data key."""
    from blobstate.codec.keys import rewrap
    from blobstate.repository.options import redact

    if not new.given:
        raise ConfigurationError("name the new key (--new-key-file FILE, or --new-key-provider NAME --new-key-id ID)")
    info = read_marker(store)
    if info is None:
        raise RepositoryNotFound(f"no blobstate repository at {redact(url)}")
    if info.encryption is None:
        raise ConfigurationError(f"the repository at {redact(url)} is not encrypted: it has no key to rotate")
    return record_encryption(store, info, rewrap(info.encryption, info.repository_id, old, new).to_json())
