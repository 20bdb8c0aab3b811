"""The repository layout, in one place (as Spark's ``RocksDBFileManager`` draws its DFS layout): the name of every
object blobstate keeps in a repository, how a name is parsed back into what it is, the lease format, which
objects a store's key names (``StoreKey``), the defaults, and the clock seam.

::

    blobstate-repository.json                      the marker (MARKER; its format: blobstate.repository.marker)
    blobstate-repository.previous/<32 hex>.json    a key rotation's copy of the marker it replaces (removed once the
                                                   new one is read back: ``marker_copy_id``)
    <job>/<task>/<store>/blobs/<32 hex>            blobs: file contents (one per chunk), delta changelogs
    <job>/<task>/<store>/indexes/<32 hex>.json     snapshot indexes (blobstate.model.index)
    <job>/<task>/<store>/ttl/<blob or index name>  TTL leases (lease mode: ``Lease``)
    checkpoints/<job>/<task>/<store>/<generation, 20 digits>.json   checkpoint records of the file checkpoint log
    doctor/<32 hex>/...                            ``blobstate doctor``'s scratch objects (removed afterwards)

Samza's blob store layout: one prefix per store (``StoreKey.prefix``), so that a delete never touches another
store; object names are fresh random tokens, never reused, and a record or an index is never overwritten
(Elasticsearch's metadata generations). Every id read back from a repository, a log or a journal passes ``owned``
before anything is deleted on its word. Checkpoint ids are ``<ms since the epoch, 13 digits>-<8 hex>``: unique,
and they sort by creation time.

Everything else names these objects through this module: ``tests/project/test_layout.py`` fails when a path piece
of the layout is spelled anywhere else.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Annotated

import msgspec
from msgspec import Meta

from blobstate.errors import ConfigurationError, ForeignObjectError

DEFAULT_TTL_MS = 24 * 3600 * 1000  # leases and tags expire after a day unless the commit completes
DEFAULT_RETAIN = 3  # checkpoints a store keeps
DEFAULT_CHUNK_SIZE = 64 << 20  # bytes per blob; larger files are split
FAR_FUTURE_MS = 1 << 62  # ``BlobStore.expired(prefix, FAR_FUTURE_MS)`` lists every object that carries a TTL

MARKER = "blobstate-repository.json"
MARKER_COPIES = "blobstate-repository.previous"
BLOBS = "blobs"
INDEXES = "indexes"
LEASES = "ttl"
RECORDS = "checkpoints"
SCRATCH = "doctor"
INDEX_SUFFIX = ".json"
RECORD_SUFFIX = ".json"
GENERATION_DIGITS = 20
MAX_LEASE_BYTES = 4096  # a lease is about 150 bytes; a larger object under ttl/ is not one (refused unread)
_TOKEN = "[0-9a-f]{32}"
#: The shape of any store's blob id, for schemas (``blobstate.model.index``): which store is checked afterwards.
ANY_BLOB_ID = rf"\A[^/]+/[^/]+/[^/]+/{BLOBS}/{_TOKEN}\Z"


#: A part of a store key: ``job``, ``task`` or ``store``.
_KEY_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,199}$")


@dataclass(frozen=True, order=True)
class StoreKey:
    """Identifies one store: ``job / task / store``. Every object a store writes lives under ``prefix``."""

    job: str
    task: str
    store: str

    def __post_init__(self) -> None:
        for part in (self.job, self.task, self.store):
            if not _KEY_PART.match(part) or part in (".", ".."):
                raise ConfigurationError(
                    f"invalid store key part {part!r}: use letters, digits, '.', '_', '=', '-' (at most 200)"
                )

    @property
    def prefix(self) -> str:
        """The store's folder inside a repository, ``job/task/store``."""
        return f"{self.job}/{self.task}/{self.store}"

    def __str__(self) -> str:
        return self.prefix

    def owns_blob(self, blob_id: str) -> bool:
        """True for a blob id of this store's own ``blobs/`` folder (``blobstate.model.is_blob_of``)."""
        return is_blob_of(self, blob_id)

    def owns_index(self, blob_id: str) -> bool:
        """True for an index id of this store's own ``indexes/`` folder (``blobstate.model.is_index_of``)."""
        return is_index_of(self, blob_id)

    @classmethod
    def parse(cls, text: str) -> StoreKey:
        """Parse ``job/task/store``; raises ``ConfigurationError`` on another shape."""
        parts = text.split("/")
        if len(parts) != 3:
            raise ConfigurationError(f"store key must be job/task/store, got {text!r}")
        return cls(*parts)

    @classmethod
    def for_directory(cls, directory: str, *, job: str = "default", task: str = "0",
                      store: str | None = None) -> StoreKey:
        """The key of the store kept in ``directory``: ``store`` defaults to the directory's name."""
        return cls(job, task, store or os.path.basename(os.path.abspath(directory).rstrip("/")))


class ObjectKind(Enum):
    """What an object of a repository is."""

    BLOB = "blob"
    INDEX = "index"
    LEASE = "lease"
    RECORD = "record"
    MARKER = "marker"
    MARKER_COPY = "marker copy"
    SCRATCH = "scratch"


_FOLDERS = {BLOBS: ObjectKind.BLOB, INDEXES: ObjectKind.INDEX, LEASES: ObjectKind.LEASE}


# msgspec Structs, not dataclasses: each created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class ObjectName(msgspec.Struct, frozen=True):
    """A parsed object id: its ``kind``, the store it belongs to (``key``; None for the marker and scratch
    objects), its last path part (``name``) and, for a checkpoint record named by its generation, ``generation``."""

    kind: ObjectKind
    key: StoreKey | None
    name: str
    generation: int | None = None


def parse(object_id: str) -> ObjectName | None:
    """What ``object_id`` is in a repository, by its place (the name of a blob, index or lease is not checked:
    ``is_blob_of`` and ``is_index_of`` are the strict checks); None for anything else (a foreign object, an id of
    another depth, store key parts that are not valid)."""
    if object_id == MARKER:
        return ObjectName(ObjectKind.MARKER, None, MARKER)
    parts = object_id.split("/")
    if len(parts) == 2 and parts[0] == MARKER_COPIES:
        return ObjectName(ObjectKind.MARKER_COPY, None, parts[1])
    if len(parts) != 5:  # a store whose job is named like the scratch prefix keeps its objects (five parts)
        return ObjectName(ObjectKind.SCRATCH, None, parts[-1]) if parts[0] == SCRATCH and len(parts) > 1 else None
    records = parts[0] == RECORDS
    kind = ObjectKind.RECORD if records else _FOLDERS.get(parts[3])
    if kind is None:
        return None
    try:
        key = StoreKey(*(parts[1:4] if records else parts[:3]))
    except ConfigurationError:
        return None
    return ObjectName(kind, key, parts[4], record_generation(parts[4]) if records else None)


def kind_of(object_id: str) -> ObjectKind | None:
    """The kind of one of a store's own objects by the folder it lies in (``blobs``, ``indexes``, ``ttl``), as a
    listing of the store's prefix shows it; None for anything else there."""
    return _FOLDERS.get(posixpath.basename(posixpath.dirname(object_id)))


# -- a store's objects -------------------------------------------------------------------------------------------
def blobs_prefix(key: StoreKey) -> str:
    """The folder of ``key``'s blobs (a listing prefix: ``<job>/<task>/<store>/blobs``)."""
    return f"{key.prefix}/{BLOBS}"


def indexes_prefix(key: StoreKey) -> str:
    """The folder of ``key``'s snapshot indexes."""
    return f"{key.prefix}/{INDEXES}"


def blob_id(key: StoreKey, token: str) -> str:
    """The blob ``token`` (32 hex) of ``key``."""
    return f"{blobs_prefix(key)}/{token}"


def index_id(key: StoreKey, token: str) -> str:
    """The snapshot index ``token`` (32 hex) of ``key``."""
    return f"{indexes_prefix(key)}/{token}{INDEX_SUFFIX}"


def is_blob_of(key: StoreKey, object_id: str) -> bool:
    """True for a blob id of ``key``'s own ``blobs/`` folder (``<prefix>/blobs/<32 hex>``)."""
    return re.fullmatch(re.escape(blobs_prefix(key)) + f"/{_TOKEN}", object_id) is not None


def is_index_of(key: StoreKey, object_id: str) -> bool:
    """True for an index id of ``key``'s own ``indexes/`` folder (``<prefix>/indexes/<32 hex>.json``)."""
    return re.fullmatch(re.escape(indexes_prefix(key)) + f"/{_TOKEN}" + re.escape(INDEX_SUFFIX), object_id) is not None


def store_object_kind(object_id: str) -> ObjectKind | None:
    """``ObjectKind.BLOB`` or ``ObjectKind.INDEX`` for a blob or snapshot index of some store, by the strict names
    ``is_blob_of`` and ``is_index_of`` accept (what the repository's codec encodes, ``blobstate.codec.store``); None
    for anything else (the marker, a lease, a checkpoint record, a scratch object, a foreign name)."""
    name = parse(object_id)
    if name is None or name.key is None:
        return None
    if name.kind is ObjectKind.BLOB and is_blob_of(name.key, object_id):
        return ObjectKind.BLOB
    if name.kind is ObjectKind.INDEX and is_index_of(name.key, object_id):
        return ObjectKind.INDEX
    return None


def new_blob_id(key: StoreKey) -> str:
    """A fresh blob id under ``key``'s ``blobs/`` folder."""
    return blob_id(key, _clock.token())


def new_index_id(key: StoreKey) -> str:
    """A fresh snapshot index id under ``key``'s ``indexes/`` folder."""
    return index_id(key, _clock.token())


def owned(key: StoreKey, ids: Iterable[str], *, what: str) -> list[str]:
    """``ids`` when every one is a blob or index id of ``key``'s own prefix; ``ForeignObjectError`` (exit 3)
    naming the first stranger otherwise. Every id read back from a repository, a log or a journal passes here
    before anything is deleted on its word."""
    ids = list(ids)
    for object_id in ids:
        if not (is_blob_of(key, object_id) or is_index_of(key, object_id)):
            shown = "".join(c if c.isprintable() else "?" for c in object_id[:200])
            raise ForeignObjectError(f"{what} names {shown!r}, which is not an object of store {key}: refused")
    return ids


# -- leases ------------------------------------------------------------------------------------------------------
def lease_id(object_id: str) -> str:
    """The lease object of ``object_id``: ``<prefix>/blobs/<x>`` -> ``<prefix>/ttl/<x>`` (an index's lease keeps the
    index's ``.json``)."""
    head, name = posixpath.split(object_id)
    return posixpath.join(posixpath.dirname(head), LEASES, name)


def is_index_id(object_id: str) -> bool:
    """True for an object in an ``indexes/`` folder (a snapshot index of some store)."""
    return posixpath.basename(posixpath.dirname(object_id)) == INDEXES


def is_lease(object_id: str) -> bool:
    """True for a lease object (one in a ``ttl/`` folder)."""
    return posixpath.basename(posixpath.dirname(object_id)) == LEASES


def leased_object(lease: str) -> str:
    """The object a lease belongs to by its own name: ``<p>/ttl/<x>`` -> ``<p>/blobs/<x>``, or ``<p>/indexes/<x>``
    for a name ending in ``.json``."""
    parent, name = posixpath.dirname(posixpath.dirname(lease)), posixpath.basename(lease)
    return posixpath.join(parent, INDEXES if name.endswith(INDEX_SUFFIX) else BLOBS, name)


class Lease(msgspec.Struct, frozen=True, rename="camel"):
    """A lease object's content: the object it protects and when its protection ends (ms since the epoch)."""

    blob_id: Annotated[str, Meta(max_length=MAX_LEASE_BYTES)]
    expires_at_ms: Annotated[int, Meta(ge=-(1 << 63), le=(1 << 63) - 1)]

    def to_bytes(self) -> bytes:
        """The JSON written since leases exist (``{"blobId": ..., "expiresAtMs": ...}``, with spaces)."""
        return json.dumps(msgspec.to_builtins(self)).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease:
        """Decode a lease; ``ValueError`` (a ``msgspec.DecodeError``) for anything that is not one (a torn write)."""
        return _LEASE.decode(data)


_LEASE = msgspec.json.Decoder(Lease)


# -- checkpoint records of the file log --------------------------------------------------------------------------
def records_prefix(key: StoreKey) -> str:
    """The folder of ``key``'s checkpoint records in a file checkpoint log."""
    return f"{RECORDS}/{key.prefix}"


def record_id(key: StoreKey, generation: int) -> str:
    """The record of ``key`` at ``generation`` (``checkpoints/<prefix>/<generation, 20 digits>.json``)."""
    return f"{records_prefix(key)}/{generation:0{GENERATION_DIGITS}d}{RECORD_SUFFIX}"


def record_generation(name: str) -> int | None:
    """The generation a record's name (its last path part) gives; None for another name."""
    stem = name[: -len(RECORD_SUFFIX)] if name.endswith(RECORD_SUFFIX) else ""
    return int(stem) if len(stem) == GENERATION_DIGITS and stem.isdigit() and stem.isascii() else None


def marker_copy_id(token: str) -> str:
    """The copy ``token`` (32 hex) of the marker a key rotation keeps until the new marker is read back
    (``blobstate-repository.previous/<token>.json``)."""
    return f"{MARKER_COPIES}/{token}{RECORD_SUFFIX}"


def scratch_prefix(token: str) -> str:
    """The folder of one ``blobstate doctor`` run's scratch objects (never a store's: a store key has three
    parts)."""
    return f"{SCRATCH}/{token}"


# -- the clock seam ----------------------------------------------------------------------------------------------
class SystemClock:
    """Where the protocol reads time and fresh ids: the wall clock (``time.time``, s), a monotonic clock
    (``time.monotonic``, s: deadlines and re-check ages), ``sleep`` (s) and a random 128-bit token (32 hex).

    The one seam between the commit protocol and the machine's clock: the deterministic simulator
    (``blobstate.testing.simulation``) installs a virtual clock with ``use_clock`` (FoundationDB's simulator and
    TigerBeetle's VOPR replace time and randomness the same way)."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def token(self) -> str:
        return uuid.uuid4().hex


_clock: SystemClock = SystemClock()


@contextmanager
def use_clock(clock: SystemClock) -> Iterator[SystemClock]:
    """Read time, sleep and draw ids from ``clock`` (any object with ``SystemClock``'s methods) inside the block."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield clock
    finally:
        _clock = previous


def now_ms() -> int:
    """Wall-clock time in ms since the epoch (what TTL expiries and checkpoint ids are made of)."""
    return int(_clock.time() * 1000)


def monotonic() -> float:
    """Seconds of a clock that never goes back and runs on while the process is stopped (deadlines, ages)."""
    return _clock.monotonic()


def sleep(seconds: float) -> None:
    """Wait ``seconds`` (backoff between retries)."""
    _clock.sleep(seconds)


def new_token() -> str:
    """A fresh random 128-bit id (32 hex) from the clock seam: a new run's lineage id."""
    return _clock.token()


def new_checkpoint_id() -> str:
    """``<ms since epoch>-<8 hex>``: unique, and sorts by creation time."""
    return f"{now_ms():013d}-{_clock.token()[:8]}"
