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
writer that opens a repository whose marker lacks it (a marker from before the field) with a log that holds
records, or into a repository without indexes (a reader never records one). ``bind_log`` refuses every
other log (``LogMismatchError``, exit 2); ``blobstate init --log NEW --change-log`` moves the repository to another
log on purpose. The marker is created exclusively, so two first backups agree on one log.

The marker is the one object blobstate writes twice under one name: recording the log, ``--change-log`` and a key
rotation (``blobstate.repository.rotation``) rewrite it, and every one of them goes through one door,
``update_marker``: read with its version, replaced all or nothing (one PUT; on file:// a temporary file renamed over
it) and only if it did not change since (If-Match, a generation match, a compare-and-swap: ``BlobStore.rewrite``),
else read again and decided again. A SIGKILL at any point leaves the old marker or the new one, and a writer never
writes back a marker another writer changed in between (issue 39 cases 1 and 2).

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
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, UnsetType

from blobstate.errors import (
    AccessDeniedError,
    BlobNotFound,
    ConfigurationError,
    CorruptIndexError,
    LogMismatchError,
    ObjectChangedError,
    RepositoryNotFound,
)
from blobstate.model import layout
from blobstate.model.layout import MARKER, now_ms
from blobstate.plugin.interfaces import BlobStore, BoundedSink
from blobstate.repository.location import scan_location

log = logging.getLogger(__name__)

MARKER_ID = MARKER  # the marker's object id (``blobstate.model.layout.MARKER``)
FORMAT = "blobstate-repository"
FORMAT_VERSION = 2  # the newest this blobstate reads
PLAIN_FORMAT_VERSION = 1  # what an unencrypted repository's marker is written as (readable by every blobstate)
ENCRYPTED_FORMAT_VERSION = 2  # a marker with ``encryption`` (issue 33): older blobstates refuse it
MAX_MARKER_BYTES = 64 << 10  # a marker is about 200 bytes (500 encrypted); a larger object is refused unread
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
    """The repository's marker, or None when there is none; read no further than ``MAX_MARKER_BYTES``. A marker that
    is missing or damaged while a key rotation's copy of it is kept (``newest_copy``) reads as that copy (the next
    rewrite through ``update_marker`` puts it back).

    Raises ``CorruptIndexError`` (exit 3) for a damaged or oversized marker and ``ConfigurationError`` for one
    written by a newer blobstate (``parse_marker``).
    """
    try:
        data = store.get_bounded(MARKER_ID, BoundedSink(MAX_MARKER_BYTES, f"the repository marker {MARKER_ID}",
                                                        why="a marker is a few hundred bytes"))
    except BlobNotFound:
        data = None
    if data is not None:
        try:
            return parse_marker(data)
        except CorruptIndexError:
            kept = newest_copy(store)
            if kept is None:
                raise
    else:
        kept = newest_copy(store)
        if kept is None:
            return None
    log.warning("the repository marker is %s: using the copy an interrupted key rotation kept (run `blobstate key "
                "rotate` again to finish it)", "damaged" if data is not None else "missing")
    return kept


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
    from blobstate.config.options import redact
    from blobstate.repository.translate import missing_bucket

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


# --- the Rewrite door (issue 39): the marker is the one object written twice under one name ----------------------
#: times ``update_marker`` reads again after its conditional write was refused (another writer got there first)
UPDATE_ATTEMPTS = 8


@dataclass(frozen=True)
class MarkerVersion:
    """The marker as ``update_marker`` read it: ``info`` (from a copy a key rotation kept when the marker object is
    missing or damaged: ``repair``), and the version of the marker object (None: there is none) its conditional
    write expects."""

    info: RepositoryInfo
    version: str | None
    repair: bool = False


def _read_versioned(store: BlobStore) -> MarkerVersion | None:
    sink = BoundedSink(MAX_MARKER_BYTES, f"the repository marker {MARKER_ID}", why="a marker is a few hundred bytes")
    try:
        data, version = store.get_versioned(MARKER_ID, sink)
    except BlobNotFound:
        data, version = None, None
    try:
        if data is not None:
            return MarkerVersion(parse_marker(data), version)
    except CorruptIndexError:
        kept = newest_copy(store)
        if kept is None:
            raise
        return MarkerVersion(kept, version, repair=True)
    kept = newest_copy(store)
    return None if kept is None else MarkerVersion(kept, None, repair=True)


def update_marker(store: BlobStore, change: Callable[[RepositoryInfo], RepositoryInfo | None]) -> RepositoryInfo:
    """The one door through which the marker is ever rewritten (``bind_log``, ``init --change-log``, key rotation):
    read it with its version (``BlobStore.get_versioned``), ask ``change`` for the marker it should be (None: as it
    is), and replace it all or nothing and only if it did not change since (``BlobStore.rewrite``: S3 and Azure
    If-Match, GCS ifGenerationMatch, a compare-and-swap on file://). When another writer changed it in between, the
    write is refused and this reads it again and asks ``change`` again, so ``change`` decides on the marker as it
    is, never on a stale copy: it raises to refuse (another key rotation, another log). A marker that is missing or
    damaged while a copy of it is kept (``newest_copy``) is put back from the copy. Where the store's rewrite is
    not atomic and conditional (``BlobStore.conditional_rewrite`` false: the interface's default writes in place), a
    copy of the marker as read is kept beside it first and dropped once the marker reads back whole (``_rewrite``),
    so a kill in the middle never leaves zero good copies of an encrypted repository's key. Returns the marker as
    written (or as found). Raises ``RepositoryNotFound`` when there is none, ``ObjectChangedError`` (exit 4) when it
    kept changing, ``CorruptIndexError`` (exit 3) when it does not read back (the copy stays), and what ``change``
    raises."""
    for _ in range(UPDATE_ATTEMPTS):
        read = _read_versioned(store)
        if read is None:
            raise RepositoryNotFound("the repository marker vanished while it was rewritten")
        updated = change(read.info)
        if updated is None and not read.repair:
            return read.info
        target = replace(updated or read.info, created=False)
        try:
            _rewrite(store, read, target)
        except ObjectChangedError:
            continue
        if read.repair:
            log.warning("put the repository marker back from the copy a key rotation kept")
        return target
    raise ObjectChangedError(f"the repository marker changed {UPDATE_ATTEMPTS} times while this command rewrote it: "
                             "run it again")


def _rewrite(store: BlobStore, read: MarkerVersion, target: RepositoryInfo) -> None:
    """``update_marker``'s write of ``target`` over the marker ``read``: on a store whose rewrite is not atomic and
    conditional, with this call's own copy of ``read.info`` kept beside it until the marker reads back whole (only
    that copy is dropped: another rotation's or rewrite's stay)."""
    copy_id = None if store.conditional_rewrite else keep_copy(store, read.info)
    try:
        store.rewrite(MARKER_ID, target.to_bytes(), expected=read.version)
    except ObjectChangedError:
        if copy_id is not None:
            store.delete(copy_id)  # nothing was written
        raise
    if copy_id is not None:
        parse_marker(store.get_bounded(MARKER_ID, BoundedSink(MAX_MARKER_BYTES, f"the repository marker {MARKER_ID}")))
        store.delete(copy_id)


def keep_copy(store: BlobStore, info: RepositoryInfo) -> str:
    """Keep a copy of the marker ``info`` beside it (``layout.marker_copy_id``), created exclusively under a fresh
    name; returns its id. ``read_marker`` reads the newest copy where the marker is missing or damaged."""
    copy_id = layout.marker_copy_id(uuid.uuid4().hex)
    store.put_exclusive(copy_id, info.to_bytes())
    return copy_id


def newest_copy(store: BlobStore) -> RepositoryInfo | None:
    """The newest readable copy of the marker a key rotation (``blobstate.repository.rotation``) or an in-place
    rewrite (``_rewrite``) keeps until the new marker is read back, or None: what stands for a marker that is
    missing or damaged."""
    for info in sorted(store.list(layout.MARKER_COPIES), key=lambda i: (i.modified_ms or 0, i.blob_id), reverse=True):
        try:
            data = store.get_bounded(info.blob_id, BoundedSink(MAX_MARKER_BYTES, f"the marker copy {info.blob_id}"))
            return parse_marker(data)
        except (BlobNotFound, CorruptIndexError, ConfigurationError):
            continue
    return None


def bind_log(store: BlobStore, info: RepositoryInfo, url: str, identity: str, *, change: bool = False,
             read_only: bool = False, holds_records: Callable[[], bool] | None = None) -> RepositoryInfo:
    """Check that the repository's checkpoint log is ``identity``; record it when the marker has none (a marker
    from before the field), for a writer only, and only on evidence that it is the log holding the repository's
    records (``holds_records()``: that log holds a record, or the repository holds no snapshot index;
    ``Repository.open`` passes it); with ``change``, move the repository to this log. A command that only reads
    (``read_only``) never records a log: what it was opened with (the default file log, or a log it could not
    reach) is no evidence of where the records are. The marker is rewritten through ``update_marker``, so recording
    the log never writes back a marker another writer changed meanwhile (a rotated key, another log).

    Raises ``LogMismatchError`` (exit 2) when the marker records another log, and when a writer would record a log
    without that evidence (its records are in another log: pass that one, or ``blobstate init --change-log``). A
    repository without a marker (from before the marker) is left as it is: its next backup writes a marker with the
    identity.
    """
    from blobstate.config.options import redact
    from blobstate.repository.log_identity import describe, same_log

    if info.legacy or not info.repository_id or (info.checkpoint_log is not None and
                                                 same_log(info.checkpoint_log, identity)):
        return info
    if info.checkpoint_log is not None and not change:
        raise LogMismatchError(
            f"the repository at {redact(url)} has its checkpoint log at {describe(info.checkpoint_log)}, and this "
            f"command was opened with {describe(identity)}: a repository has exactly one log (pass the recorded "
            "one with --log, or none for the file log inside the repository). To move the repository to another "
            f"log on purpose: blobstate init --repo {redact(url)} --log NEW --change-log")
    if info.checkpoint_log is None and not change:
        if read_only:
            return info
        if holds_records is not None and not holds_records():
            raise LogMismatchError(
                f"the repository at {redact(url)} records no checkpoint log (a marker from before the field) and "
                f"holds snapshot indexes, but {describe(identity)}, which this command was opened with, holds no "
                "checkpoint record: its records are in another log. Pass that log with --log; to bind the "
                f"repository to this one on purpose: blobstate init --repo {redact(url)} --log LOG --change-log")

    def recorded(current: RepositoryInfo) -> RepositoryInfo | None:
        if current.checkpoint_log == identity:
            return None
        if current.checkpoint_log is not None and current.checkpoint_log != info.checkpoint_log:
            raise LogMismatchError(f"the repository at {redact(url)} was bound to another checkpoint log "
                                   f"({describe(current.checkpoint_log)}) at the same time: run the command again "
                                   "with that log")
        return replace(current, checkpoint_log=identity)

    previous = info.checkpoint_log
    update_marker(store, recorded)
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
