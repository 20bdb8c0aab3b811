"""The three backend interfaces a plugin implements: ``BlobStore``, ``CheckpointLog`` and ``LocalStore``.

``BlobStore`` follows Samza's ``BlobStoreManager`` (put with TTL, get, delete, remove TTL); ``CheckpointLog``
follows Samza's checkpoint manager with Kafka-style producer fencing on a generation number; ``LocalStore``
makes a consistent point-in-time copy of a local store (RocksDB's ``Checkpoint``: hard links, milliseconds).
"""

from __future__ import annotations

import hashlib
import io
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Protocol, TypeVar

from blobstate.errors import CorruptIndexError, IntegrityError, ObjectChangedError, StorageError
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.inflight import run_settled

T = TypeVar("T")
R = TypeVar("R")

#: TTL modes: ``lease`` (a lease object per blob, works on every store) or ``native`` (the cloud expires objects).
TTL_MODES = ("lease", "native")


@dataclass(frozen=True)
class FileRange:
    """``length`` bytes of the local file ``path`` starting at byte ``offset``: the source of one blob."""

    path: str
    offset: int
    length: int

    def pieces(self, size: int) -> Iterator[bytes]:
        """The range's bytes, read as they are consumed, in pieces of at most ``size`` bytes. Raises
        ``StorageError`` when the file ends before the range does (it shrank while it was uploaded)."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            left = self.length
            while left:
                data = fh.read(min(size, left))
                if not data:
                    raise StorageError(f"{self.path} shrank while it was uploaded")
                left -= len(data)
                yield data


@dataclass(frozen=True)
class PutRequest:
    """Write ``source`` as blob ``blob_id`` (a path relative to the repository root, chosen by the core).

    With ``ttl_ms`` the blob expires that many milliseconds from now unless ``remove_ttl`` is called first.
    ``codec`` (``"zstd"`` or None) is how the core stores a data blob (``blobstate.codec``, recorded in the
    index entry of the blob); a plugin never sees it set: it is handed the stored bytes.
    """

    blob_id: str
    source: FileRange | bytes
    ttl_ms: int | None = None
    codec: str | None = None

    @property
    def size(self) -> int:
        return self.source.length if isinstance(self.source, FileRange) else len(self.source)


@dataclass(frozen=True)
class GetRequest:
    """Stream blob ``blob_id`` into ``sink`` (a writable binary file object already positioned)."""

    blob_id: str
    sink: BinaryIO


@dataclass(frozen=True)
class BlobInfo:
    """A listed blob: id, size in bytes, last-modified time in ms since the epoch (``None`` if unknown), and the
    entity tag the listing gives it (``None`` if the store lists none; S3's is the MD5 of a one-request upload's
    bytes unless the object is encrypted with a KMS key)."""

    blob_id: str
    size: int
    modified_ms: int | None
    etag: str | None = None


class BoundedSink(io.BytesIO):
    """An in-memory sink that refuses to hold more than ``limit`` bytes: a write past it raises ``error`` (an
    ``IntegrityError``, exit 3) at once, so a streamed read of an oversized object stops at its first piece past
    the limit instead of holding the object whole. ``why`` says where the limit comes from."""

    def __init__(self, limit: int, what: str, *, error: type[IntegrityError] = CorruptIndexError,
                 why: str = "no blobstate metadata object is that large") -> None:
        super().__init__()
        self.limit = limit
        self.what = what
        self.error = error
        self.why = why

    def too_large(self) -> IntegrityError:
        """The error a write past ``limit`` raises (not raised here): what, the limit in bytes, and why."""
        return self.error(f"{self.what} is larger than {self.limit} bytes ({self.why}); refused unread")

    def write(self, data: bytes) -> int:  # type: ignore[override]
        """Append ``data``; the bytes written. Raises ``too_large()`` instead when the sink would pass ``limit``."""
        if self.tell() + len(data) > self.limit:
            raise self.too_large()
        return super().write(data)


def content_version(data: bytes) -> str:
    """``sha256:<hex>`` of an object's bytes: its version where the store names none (``get_versioned``)."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


class MetadataSeal(Protocol):
    """Seals the bodies of the objects a blob store writes for itself (its TTL leases) in an encrypted repository
    (``blobstate.codec``): ``seal(name, body)`` gives the bytes to store under ``name`` (relative to the
    repository root), ``open(name, stored)`` the body back (``IntegrityError`` when it does not authenticate). A
    plugin passes such bodies through it when one is set, and never needs to know what it does."""

    def seal(self, name: str, body: bytes) -> bytes:
        """The bytes to store under ``name`` (relative to the repository root) for ``body``."""
        ...

    def open(self, name: str, stored: bytes) -> bytes:
        """``body`` back from the ``stored`` bytes of ``name``; ``IntegrityError`` when they do not authenticate."""
        ...


class BlobStore(ABC):
    """A blob store (Samza's ``BlobStoreManager``) rooted at a repository URL.

    Blob ids are ``/``-separated paths relative to the repository root. Contract (checked by
    ``blobstate.testing``): ``put`` never leaves a blob without its TTL when ``ttl_ms`` is given; ``get`` raises
    ``BlobNotFound`` for a missing blob; ``delete`` and ``remove_ttl`` are idempotent (missing blob is fine);
    ``put_exclusive`` raises ``FileExistsError`` when the blob exists (the basis of the file checkpoint log's fencing);
    ``rewrite`` is atomic and conditional on the version read. The ``*_many`` calls run ``max_concurrency`` at once.
    """

    url: str = ""
    max_concurrency: int = 8
    ttl_mode: str = "lease"
    #: True when ``rewrite`` is atomic and conditional in the store itself (S3, Azure If-Match; GCS ifGenerationMatch;
    #: file://: a compare-and-swap); False for the interface's default, which is neither (``blobstate doctor`` warns)
    conditional_rewrite: bool = False
    #: set by the core on an encrypted repository (``seal_metadata_with``): seals the store's own bodies (leases)
    metadata_seal: MetadataSeal | None = None

    @abstractmethod
    def put(self, request: PutRequest) -> None:
        """Write one blob (overwriting is allowed: blob ids are fresh UUIDs)."""

    @abstractmethod
    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        """Create ``blob_id`` only if it does not exist; raise ``FileExistsError`` otherwise. No TTL."""

    @abstractmethod
    def get(self, blob_id: str, sink: BinaryIO) -> int:
        """Stream the blob into ``sink``; return the bytes written; raise ``BlobNotFound`` if it is missing."""

    def get_bytes(self, blob_id: str) -> bytes:
        """The whole blob in memory. For metadata (records, leases, markers, indexes) use ``get_bounded``."""
        buf = io.BytesIO()
        self.get(blob_id, buf)
        return buf.getvalue()

    def get_bounded(self, blob_id: str, sink: BoundedSink) -> bytes:
        """The whole blob, read into ``sink`` and refused (``sink.too_large()``, exit 3) as soon as it exceeds
        ``sink.limit`` bytes: every metadata read goes through here, so an oversized object is never held whole.
        The default streams ``get`` into the sink; a store that can ask for the first ``limit + 1`` bytes alone
        (a ranged GET) or knows the size before the body does better. Raises ``BlobNotFound``."""
        self.get(blob_id, sink)
        return sink.getvalue()

    def get_versioned(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """The blob as ``get_bounded`` reads it, and its version (ETag, generation, ``content_version``)."""
        data = self.get_bounded(blob_id, sink)
        return data, content_version(data)

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        """Replace ``blob_id`` with ``data`` (no TTL) all or nothing, only while its version is still ``expected``
        (``get_versioned``'s; None: only while absent), else ``ObjectChangedError``, nothing written: the marker's
        door. This default checks, then ``put``s: neither atomic nor conditional (docs/plugins.md)."""
        try:
            if expected is None:
                self.put_exclusive(blob_id, data)
                return
            current = self.get_versioned(blob_id, BoundedSink(1 << 20, blob_id))[1]  # a marker: a few hundred bytes
        except (FileExistsError, IntegrityError):  # created meanwhile; gone, or grown past any metadata object
            current = ""
        if current != expected:
            raise ObjectChangedError(f"{blob_id} changed since it was read")
        self.put(PutRequest(blob_id, data))

    @abstractmethod
    def delete(self, blob_id: str) -> None:
        """Delete the blob and its TTL; a missing blob is not an error."""

    @abstractmethod
    def remove_ttl(self, blob_id: str) -> None:
        """Make the blob permanent; a missing blob or a blob without TTL is not an error."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[BlobInfo]:
        """Every blob under ``prefix`` (a folder, no trailing slash), recursively; TTL bookkeeping excluded."""

    @abstractmethod
    def expired(self, prefix: str, now_ms: int) -> list[str]:
        """Blob ids under ``prefix`` whose TTL expired before ``now_ms`` (lease mode; native mode may return [])."""

    @abstractmethod
    def has_ttl(self, blob_id: str) -> bool:
        """True while the blob carries a TTL (a lease, a tag, a custom time)."""

    def temporaries(self, prefix: str) -> list[BlobInfo]:
        """Leftovers of this store's own interrupted writes under ``prefix`` (temp files of an exclusive create cut
        off by a crash), for ``blobstate gc`` to remove once old; [] where the store leaves none."""
        return []

    def sweep_expired(self, prefix: str, now_ms: int) -> list[str]:
        """Delete every blob whose TTL expired before ``now_ms``; return their ids."""
        ids = self.expired(prefix, now_ms)
        self.delete_many(ids)
        return ids

    def location_exists(self) -> bool | None:
        """Whether the bucket (container) the URL names exists: False makes every command say so in one line
        (``blobstate.repository.translate``) instead of "no repository"; None (default) where the store
        cannot tell or has no such thing (a local directory is created on the first write)."""
        return None

    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        """The cloud lifecycle rule that expires TTL-tagged blobs, as text for the user (native mode), or None."""
        return None

    def install_lifecycle(self, ttl_ms: int) -> bool:
        """Install the lifecycle rule where the API allows it; return False when the user must do it."""
        return False

    def seal_metadata_with(self, seal: MetadataSeal | None) -> None:
        """Seal the bodies of the objects this store writes for itself (its leases) with ``seal`` from now on
        (None: store them as they are). The core calls it when it opens an encrypted repository."""
        self.metadata_seal = seal

    # -- batches ---------------------------------------------------------------------------------------------
    def map_concurrent(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """Run ``fn`` over ``items`` with at most ``max_concurrency`` in flight; results in input order.

        The first exception (an interrupt included) is raised after the batch has stopped: pending items are
        cancelled and the running ones are waited for, through any further interrupt (a second Ctrl-C), so nothing
        is still in flight when the caller cleans up (an abort deleting what a commit uploaded never races an
        upload that lands after it).
        """
        items = list(items)
        if len(items) <= 1 or self.max_concurrency <= 1:
            return [fn(item) for item in items]
        return run_settled(fn, items, min(self.max_concurrency, len(items)))

    def put_many(self, requests: Sequence[PutRequest]) -> None:
        """``put`` every request, ``max_concurrency`` at a time (``map_concurrent``). A store with a bulk call of
        its own may override any ``*_many`` method; the contract is the single call's, for each item."""
        self.map_concurrent(self.put, requests)

    def get_many(self, requests: Sequence[GetRequest]) -> list[int]:
        """``get`` each request's blob into its sink, concurrently; the bytes written per request, in order."""
        return self.map_concurrent(lambda r: self.get(r.blob_id, r.sink), requests)

    def delete_many(self, blob_ids: Iterable[str]) -> None:
        """``delete`` every blob, concurrently (a store with a bulk delete overrides it: S3's ``DeleteObjects``)."""
        self.map_concurrent(self.delete, blob_ids)

    def delete_permanent_many(self, blob_ids: Iterable[str]) -> None:
        """Delete blobs made permanent (the commit that wrote them removed their TTL): what retention drops. A store
        may leave their TTL bookkeeping alone (lease mode: no lease deletes beside them, so a bulk delete sends
        ceil(blobs / batch) requests, not twice that); a lease a crash left behind expires and ``blobstate gc``
        drops it with its blob id (``expired``). A missing blob is not an error. Default: ``delete_many``."""
        self.delete_many(blob_ids)

    def remove_ttl_many(self, blob_ids: Iterable[str]) -> None:
        """``remove_ttl`` of every blob, concurrently."""
        self.map_concurrent(self.remove_ttl, blob_ids)

    def remove_own_ttl_many(self, blob_ids: Iterable[str]) -> None:
        """Make permanent objects the caller itself put with a TTL and nothing else in their marks (a commit's own
        uploads, a group's parts): a store may drop the marks without reading them first (S3: one
        ``DeleteObjectTagging`` each, where ``remove_ttl`` reads the tag set to keep tags others added).
        Idempotent. Default: ``remove_ttl_many``."""
        self.remove_ttl_many(blob_ids)

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections; the store is not used afterwards."""


class CheckpointLog(ABC):
    """A log of checkpoint records per store key, with fencing on a generation number.

    Contract (checked by ``blobstate.testing``): generations start at 1 and grow by one; ``append`` raises
    ``FencedError`` unless the latest generation is ``expected_generation`` (0 for an empty log), and at most one
    of two racing appends with the same expected generation succeeds; a record is never overwritten; a malformed
    record raises ``CorruptIndexError``, never a silent skip; an unreachable log raises ``StorageError``.
    """

    url: str = ""

    @abstractmethod
    def latest(self, key: StoreKey) -> Checkpoint | None:
        """The checkpoint with the highest generation, or None for a new store."""

    @abstractmethod
    def history(self, key: StoreKey) -> list[Checkpoint]:
        """Every retained checkpoint, oldest generation first."""

    @abstractmethod
    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        """Write ``checkpoint`` as generation ``expected_generation + 1`` and return it with that generation.

        This is the commit point. Raises ``FencedError`` when another writer got there first, and
        ``AppendOutcomeUnknown`` when the request may have been applied (sent, then a timeout or a broken
        connection): never a plain failure for an append that might land later.

        Idempotent for the same record: when generation ``expected_generation + 1`` already holds a record with
        the same ``checkpoint_id`` (an earlier attempt landed, perhaps after its client gave up), ``append``
        returns that record instead of raising ``FencedError``, whatever was appended after it. This is how the
        core resolves an unknown outcome: it re-appends until the answer is certain.
        """

    @abstractmethod
    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        """Delete all but the newest ``keep`` (>= 1) records, and with ``below`` only those of a generation below
        it (a record appended since the caller read the log is never deleted in its place); return the deleted
        ones. Idempotent."""

    def forget(self, key: StoreKey, records: Sequence[Checkpoint]) -> list[Checkpoint]:
        """Delete exactly ``records`` of ``key`` from inside the log (a retention policy's interior records: a
        daily snapshot kept, the ones around it not), each matched by generation *and* checkpoint id (a record
        appended since the caller read the log is never deleted in its place); the newest record is never deleted
        (``ValueError``). Returns the deleted ones; idempotent.

        Optional: a log whose format cannot drop a record in the middle (the Kafka log: its acceptance rule reads
        a gap as a zombie's record) leaves this default, which raises ``NotImplementedError``; retention then keeps
        those records and every blob they reference (``prune`` still removes the oldest)."""
        raise NotImplementedError(f"{type(self).__name__} keeps records inside the log: prune removes the oldest")

    @property
    def can_forget(self) -> bool:
        """True when this log implements ``forget`` (records dropped from inside the log)."""
        return type(self).forget is not CheckpointLog.forget

    def drop(self, key: StoreKey, expiring: Sequence[Checkpoint], *, first_kept: int) -> list[Checkpoint]:
        """Retention's removal of ``expiring`` records: ``prune`` below ``first_kept`` (the oldest generation
        kept), then ``forget`` the expiring ones above it (none unless ``can_forget``). Returns what was deleted."""
        removed = self.prune(key, 1, below=first_kept)
        interior = [cp for cp in expiring if cp.generation > first_kept]
        return removed + (self.forget(key, interior) if interior and self.can_forget else [])

    def keys(self) -> list[StoreKey]:
        """Every store key with a checkpoint (for ``blobstate gc`` over a whole repository); [] if unsupported."""
        return []

    def histories(self, keys: Iterable[StoreKey] | None = None) -> dict[StoreKey, list[Checkpoint]]:
        """``history`` of each of ``keys`` (default: every key of ``keys()``), for a verb over many stores at once
        (``list``, ``gc``, ``stats``, ``verify`` of a whole repository). A log that can read many stores in one go
        overrides it (the file log: one listing of every record, the records read concurrently); this default
        reads them store by store."""
        return {key: self.history(key) for key in (self.keys() if keys is None else keys)}

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release connections."""


class LocalStore(ABC):
    """A kind of local state store: how to make a consistent copy of it, and which of its files change in place."""

    store_type: str = ""

    @abstractmethod
    def create_checkpoint(self, source: object, target_dir: str) -> None:
        """Make a consistent point-in-time copy of ``source`` (a directory path, or a live handle the plugin
        understands) in ``target_dir``, which must not exist yet. Immutable files may be hard links."""

    @abstractmethod
    def is_mutable(self, relative_path: str) -> bool:
        """True for files that keep their name while their content changes (RocksDB ``MANIFEST-*``, ``CURRENT``,
        ``OPTIONS-*``): they are uploaded at every commit and copied (never hard-linked) on restore."""

    def validate(self, directory: str) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Check that a restored directory opens (RocksDB: open read-only). Raise ``IntegrityError`` if not.

        Called on the complete restored tree before the destination changes (a copy of it: the hook may write)."""

    def check_destination(self, directory: str) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Refuse a restore into ``directory`` while the store there is in use (RocksDB: its ``LOCK`` held by a live
        process): raise ``LocalStoreError``. Called before anything is downloaded, and again just before the
        destination changes."""


class KeyProvider(ABC):
    """Wraps and unwraps a repository's data key with a key the operator holds (envelope encryption, as a KMS
    does it): the built-in ``file`` provider with a key file, a KMS plugin with a key in the KMS. The data key
    (32 random bytes, ``blobstate.codec``) encrypts every object; the provider only ever sees it to wrap or
    unwrap it. Registered through ``blobstate_key_providers`` (``KeyProviderSpec``); the repository marker records
    the provider's name, ``key_id()`` and the wrapped key, never the key.

    ``key_id()`` names the key that wraps (a KMS key id or ARN; the file provider's is derived one-way from the
    key file), and must never reveal key material: it is stored in the marker and printed. ``wrap`` returns the
    wrapped data key; ``unwrap`` returns the data key or raises ``EncryptionKeyError`` (exit 3) when this key
    cannot unwrap it (another key, or a wrapped key that does not authenticate). Both are bound to ``context``
    (the repository id: a KMS's encryption context, the AEAD's associated data).
    """

    name: str = ""

    @abstractmethod
    def key_id(self) -> str:
        """The id of the key this provider wraps with (recorded in the marker; never key material)."""

    @abstractmethod
    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        """The data key, wrapped (encrypted and authenticated) by this provider's key."""

    @abstractmethod
    def unwrap(self, wrapped: bytes, key_id: str, context: bytes) -> bytes:
        """The data key from ``wrap``'s output (``key_id``: the id recorded with it); ``EncryptionKeyError`` when
        this provider's key cannot unwrap it."""
