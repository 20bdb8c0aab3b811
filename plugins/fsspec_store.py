"""The fsspec blob store: any filesystem fsspec reaches (``file://``, plain paths, ``memory://``, ...).

Bandwidth: every blob's bytes are taken from the process's upload or download limiter
(``blobstate.plugins.toolkit.transfer.throttle``) as they move: a range written from a file and a remote read piece by
piece, a whole blob in one call before it.

TTL in lease mode: a lease object (``blobstate.model.layout.lease_id``: ``<store prefix>/ttl/<blob name>``) holding
the expiry (ms since the epoch, ``layout.Lease``) is written *before* the blob, so a crash mid-upload never leaves a
blob without a TTL; ``remove_ttl`` deletes the lease; ``expired`` lists leases past their expiry (Samza's TTL, kept
as objects so every store supports it).
"""

from __future__ import annotations

import logging
import os
import posixpath
import time
import uuid
from collections.abc import Iterator
from functools import cached_property
from typing import Any, BinaryIO

from blobstate.config.options import credential_sources, redact, secret_values, split_userinfo
from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, ConfigurationError, IntegrityError, StorageError
from blobstate.model.layout import (
    MAX_LEASE_BYTES,
    Lease,
    ObjectKind,
    is_lease,
    kind_of,
    lease_id,
    leased_object,
)
from blobstate.plugin.interfaces import BlobInfo, BlobStore, BoundedSink, FileRange, PutRequest, content_version
from blobstate.plugins.fsspec_info import LOCAL_PROTOCOLS, etag, local_root, modified_ms
from blobstate.plugins.toolkit.local_files import LocalRepository
from blobstate.plugins.toolkit.transfer import Limits, ThrottledSink, throttle

log = logging.getLogger(__name__)
COPY_BUFFER = 1 << 20  # bytes per read/write when streaming a local blob (1 MiB: measured fastest, cache-friendly)
REMOTE_READ = 16 << 20  # bytes per ranged GET when streaming a remote blob (fewer requests, bounded memory)
TORN_LEASE_GRACE_MS = 24 * 3600 * 1000  # an unreadable lease counts as expired only once it is this old


def leased(blob_id: str) -> bool:
    """True for an object that may have a lease: a blob or an index (records, the marker and leases have none)."""
    return kind_of(blob_id) in (ObjectKind.BLOB, ObjectKind.INDEX)


def check_blob_id(blob_id: str) -> str:
    """Refuse blob ids that are absolute or climb out of the repository."""
    if not blob_id or blob_id.startswith("/") or any(p in ("", ".", "..") for p in blob_id.split("/")):
        raise ConfigurationError(f"invalid blob id {blob_id!r}")
    return blob_id


class FsspecBlobStore(BlobStore):
    """A ``BlobStore`` over an fsspec filesystem rooted at ``url``.

    ``url`` (without a query) and ``storage_options`` come resolved (``blobstate.repository.backends.open_blob_store``);
    the options go to the filesystem constructor (credentials stay there: never logged). Batches run on a thread pool
    of ``max_concurrency`` workers. ``ttl_mode`` must be ``lease`` here; cloud plugins subclass this and add
    ``native``. ``settings`` (default ``Settings()``): the rate limits, the transfer budget, ``file_fsync``.
    """

    native_ttl = False

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8, settings: Settings | None = None) -> None:
        self.settings = settings if settings is not None else Settings()
        #: the upload and download limiters of the settings (shared per rate by every store of the process)
        self.limits = Limits.of(self.settings)
        storage_options = dict(storage_options or {})
        self._secrets = secret_values(storage_options)
        self.url = url
        userinfo, _ = split_userinfo(url)
        if userinfo and not self._accepts_userinfo(userinfo):
            scheme = url.split("://", 1)[0]
            raise ConfigurationError(
                f"the repository URL {self.display_url} holds user info, which {scheme}:// never reads as credentials "
                f"(it would be taken for part of the bucket's name): give them through {credential_sources(scheme)}")
        self.ttl_mode = ttl_mode or "lease"
        if self.ttl_mode not in ("lease", "native") or (self.ttl_mode == "native" and not self.native_ttl):
            raise ConfigurationError(f"{type(self).__name__} does not support ttl mode {self.ttl_mode!r}")
        self.max_concurrency = max(1, int(max_concurrency))
        self._options = options = self._fs_options(storage_options)
        root, protocol = local_root(url, options), "file"
        if root is None:
            root, protocol = self._remote_root(url) or self._fsspec_root()
        self.root = root.rstrip("/")
        self.is_local = protocol in LOCAL_PROTOCOLS
        #: file:// only: durable writes, no symlink followed below the root (``local_files``)
        self.local: LocalRepository | None = (LocalRepository(self.root or "/", fsync=self.settings.file_fsync)
                                              if self.is_local else None)
        #: leases ``expired`` ignored because they name a blob other than their own (see ``expired``)
        self.foreign_leases: list[str] = []

    @cached_property
    def _fs_and_root(self) -> tuple[Any, str]:
        import fsspec.core  # here, not at the top: a local repository never needs it (``local_root``)

        try:
            return fsspec.core.url_to_fs(self.url, **self._options)
        except (ValueError, ImportError) as exc:
            raise ConfigurationError(f"cannot open repository {self.display_url}: {exc}") from None

    def _fsspec_root(self) -> tuple[str, str]:
        fs, root = self._fs_and_root
        return root, fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]

    def _accepts_userinfo(self, userinfo: str) -> bool:
        """Whether the filesystem reads a URL's user info (``sftp://user:pw@host``); a store whose SDK would take it
        for part of the bucket's name (and so print it) says no, and the URL is refused at open."""
        return True

    def _remote_root(self, url: str) -> tuple[str, str] | None:
        """``(root, protocol)`` of a remote ``url`` known without making the fsspec filesystem (a subclass that
        reaches its store another way); None: ask fsspec."""
        return None

    @property
    def fs(self) -> Any:
        """The fsspec filesystem (``fsspec.core.url_to_fs``), made on first use: a local repository reads and writes
        through ``self.local`` and makes it only if a caller asks for it."""
        return self._fs_and_root[0]

    def _fs_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """The options for the fsspec filesystem, from the resolved storage options (a subclass may take its own
        out, or add defaults such as the SDK's retry configuration)."""
        return options

    @property
    def display_url(self) -> str:
        """The URL with userinfo and secret option values redacted (credentials never appear in messages)."""
        return str(redact(self.url, secrets=self._secrets))

    def redact(self, text: str) -> str:
        """``text`` with this store's secrets (and anything that looks like one) replaced by ``***``."""
        return str(redact(text, secrets=self._secrets))

    def path(self, blob_id: str) -> str:
        return f"{self.root}/{check_blob_id(blob_id)}" if self.root else check_blob_id(blob_id)

    # -- writes ----------------------------------------------------------------------------------------------
    def put(self, request: PutRequest) -> None:
        if request.ttl_ms is not None:
            self._set_ttl_before_put(request.blob_id, request.ttl_ms)
        path = self.path(request.blob_id)
        source = request.source
        whole_file = isinstance(source, FileRange) and source.offset == 0 and self.local is None \
            and os.path.getsize(source.path) == source.length
        if self.local is not None or isinstance(source, bytes) or whole_file:
            throttle(self.limits.upload, request.size)  # sent in one call (a streamed range: its pieces one by one)
        try:
            if self.local is not None:
                if isinstance(source, bytes):
                    self.local.write_bytes(path, source)
                else:
                    self.local.write_range(path, source.path, source.offset, source.length)
            elif isinstance(source, bytes):
                self._write_bytes(path, source, request)
            elif whole_file:
                self.fs.put_file(source.path, path, **self._put_kwargs(request))
            else:
                self._write_range(path, source, request)
        except FileNotFoundError as exc:
            raise StorageError(f"cannot write blob {request.blob_id}: {exc}") from exc

    def _write_bytes(self, path: str, data: bytes, request: PutRequest) -> None:
        self.fs.pipe_file(path, data, **self._put_kwargs(request))

    #: bytes a streaming remote write buffers before it sends them (None: the filesystem's default)
    write_block_size: int | None = None

    def _write_range(self, path: str, source: FileRange, request: PutRequest) -> None:
        kwargs = self._put_kwargs(request)
        if self.write_block_size:
            kwargs["block_size"] = self.write_block_size
        with self.fs.open(path, "wb", **kwargs) as dst:
            for data in source.pieces(COPY_BUFFER):
                throttle(self.limits.upload, len(data))
                dst.write(data)

    def _put_kwargs(self, request: PutRequest) -> dict[str, Any]:
        """Extra keyword arguments for the filesystem's write calls (native TTL tags in cloud subclasses)."""
        return {}

    def _set_ttl_before_put(self, blob_id: str, ttl_ms: int) -> None:
        if self.ttl_mode == "lease":
            expires = int(time.time() * 1000) + ttl_ms
            lease = self.path(lease_id(blob_id))
            # Written in place under its final name, so an abort or gc always finds it, even torn by a crash; a
            # reader that sees it half-written treats it as unreadable, which expires only once it is old.
            data = Lease(blob_id, expires).to_bytes()
            if self.metadata_seal is not None:  # an encrypted repository: the core's seal, opaque to this store
                data = self.metadata_seal.seal(lease_id(blob_id), data)
            self._write_small(lease, data)

    def _write_small(self, path: str, data: bytes) -> None:
        """Write the few bytes of a lease at ``path`` in one request (durably on file://)."""
        if self.local is not None:
            self.local.write_bytes(path, data)
        else:
            self.fs.pipe_file(path, data)

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        path = self.path(blob_id)
        if self.local is not None:
            # Write a temp file, then link it into place: the link is atomic and fails if the name exists, so a
            # reader never sees a half-written record and a second writer gets FileExistsError. The temp name
            # ``<name>.tmp-<hex>`` is what ``list`` hides and gc may remove once old.
            tmp = f"{path}.tmp-{uuid.uuid4().hex}"
            fd = self.local.open_write(tmp, exclusive=True)
            try:
                os.write(fd, data)
                os.fsync(fd)  # always: the checkpoint record is the commit point
            finally:
                os.close(fd)
            self.local.link_into_place(tmp, path)
            return
        self.fs.pipe_file(path, data, mode="create")

    conditional_rewrite = property(lambda self: self.local is not None)  # type: ignore[assignment]  # file://: CAS

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        """file://: ``LocalRepository.replace_if`` on the version ``get_versioned`` gave (a digest of the bytes)."""
        if self.local is None or expected is None:
            super().rewrite(blob_id, data, expected=expected)
            return
        throttle(self.limits.upload, len(data))
        self.local.replace_if(self.path(blob_id), data, expected, content_version)

    # -- reads -----------------------------------------------------------------------------------------------
    def get(self, blob_id: str, sink: BinaryIO) -> int:
        path = self.path(blob_id)
        try:
            if self.local is not None:
                with self.local.open_read(path) as src:
                    return _copy(src, ThrottledSink(sink, self.limits.download))  # type: ignore[arg-type]
            with self.fs.open(path, "rb", block_size=REMOTE_READ, cache_type="none") as src:
                return _copy(src, ThrottledSink(sink, self.limits.download), REMOTE_READ)  # type: ignore[arg-type]
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None

    def get_bytes(self, blob_id: str) -> bytes:
        try:
            data = self._cat(self.path(blob_id))
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        throttle(self.limits.download, len(data))
        return data

    def _cat(self, path: str) -> bytes:
        return self.local.read_bytes(path) if self.local is not None else self.fs.cat_file(path)

    def get_bounded(self, blob_id: str, sink: BoundedSink) -> bytes:
        """The blob, reading no more than ``sink.limit + 1`` bytes (one ranged GET remotely) before refusing it."""
        try:
            head = self._head(self.path(blob_id), sink.limit + 1)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        if len(head) > sink.limit:
            raise sink.too_large()
        throttle(self.limits.download, len(head))
        sink.write(head)
        return head

    def _head(self, path: str, length: int) -> bytes:
        """The first ``length`` bytes of ``path`` (all of it when it is shorter)."""
        if self.local is not None:
            with self.local.open_read(path) as src:
                return src.read(length)
        try:
            return self.fs.cat_file(path, start=0, end=length)
        except FileNotFoundError:
            raise
        except OSError:
            # An empty object has no byte range to serve (HTTP 416 on some stores): ask for it whole, if it is small.
            if self.fs.size(path) >= length:
                raise
            return self.fs.cat_file(path)

    # -- deletes and TTL -------------------------------------------------------------------------------------
    def delete(self, blob_id: str) -> None:
        self._rm(self.path(blob_id))
        if self.ttl_mode == "lease" and leased(blob_id):
            self._rm(self.path(lease_id(blob_id)))

    def _rm(self, path: str) -> None:
        if self.local is not None:
            self.local.remove(path)
            return
        try:
            self.fs.rm_file(path)
        except FileNotFoundError:
            pass

    def remove_empty_folder(self, prefix: str) -> None:
        """file://: ``prefix`` and its parents removed while empty (``capabilities.folder_removal``)."""
        if self.local is not None:
            self.local.remove_empty_dirs(self.path(prefix))

    def remove_ttl(self, blob_id: str) -> None:
        if self.ttl_mode == "lease":
            self._rm(self.path(lease_id(blob_id)))

    #: Native mode: the tag (or metadata key) that marks a blob's TTL; ``_tags`` reads a blob's tags.
    ttl_tag = ""

    def _tags(self, blob_id: str) -> dict[str, str] | None:
        return None

    def has_ttl(self, blob_id: str) -> bool:
        if self.ttl_mode == "lease":
            return self._exists(self.path(lease_id(blob_id)))
        tags = self._tags(blob_id)
        return bool(tags) and self.ttl_tag in tags

    def _exists(self, path: str) -> bool:
        return self.local.exists(path) if self.local is not None else bool(self.fs.exists(path))

    def location_exists(self) -> bool | None:
        """False when the URL's bucket (container) does not exist; None for a local directory. A refused
        credential raises (``PermissionError``) rather than answer False."""
        if self.local is not None or not self.root:
            return None
        bucket = self.root.split("/", 1)[0]
        try:
            self.fs.invalidate_cache(bucket)
            self.fs.info(bucket)
        except FileNotFoundError:
            return False
        return True

    def _check_local_root(self) -> None:
        """A local repository whose path runs through a regular file is unreachable, not empty."""
        path = self.root or "/"
        while path and not os.path.exists(path):
            path = os.path.dirname(path)
        if path and not os.path.isdir(path):
            raise StorageError(f"repository {self.display_url} is unreachable: {path} is not a directory")

    # -- listing ---------------------------------------------------------------------------------------------
    def _find(self, prefix: str) -> dict[str, dict[str, Any]]:
        base = self.path(prefix) if prefix else self.root
        if self.local is not None:
            self._check_local_root()
            return {self._rel(path): {"size": st.st_size, "mtime": st.st_mtime, "type": "file"}
                    for path, st in self.local.walk(base)}
        else:
            # Never answer from fsspec's listing cache (shared by every store on the same filesystem instance):
            # the checkpoint log decides fencing and "latest" from these listings.
            self.fs.invalidate_cache(base)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return {}
        return {self._rel(path): info for path, info in found.items() if info.get("type") != "directory"}

    def _rel(self, path: str) -> str:
        return path[len(self.root) + 1:] if self.root and path.startswith(self.root + "/") else path.lstrip("/")

    def list(self, prefix: str) -> Iterator[BlobInfo]:
        return _objects(self._find(prefix))

    def temporaries(self, prefix: str) -> list[BlobInfo]:
        """Temp files of exclusive creates cut off by a crash (``<name>.tmp-<hex>``, local stores only: a remote
        store creates exclusively in one request, so it has none and is not listed for them)."""
        if self.local is None:
            return []
        return [BlobInfo(rel, int(info.get("size") or 0), modified_ms(info))
                for rel, info in sorted(self._find(prefix).items()) if ".tmp-" in posixpath.basename(rel)]

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        """Blob ids whose lease expired before ``now_ms``. A lease names its blob, and that name must be the one
        its own path gives (``<p>/ttl/<x>`` -> ``<p>/blobs/<x>``, or ``<p>/indexes/<x>`` for ``.json``): a lease
        naming any other object (another store's blob, index or record) is ignored, logged and kept in
        ``foreign_leases``, never used to delete."""
        if self.ttl_mode != "lease":
            return []
        return [blob_id for blob_id, expires in self._leases(self._find(prefix)) if expires <= now_ms]

    def list_with_ttl(self, prefix: str, now_ms: int) -> tuple[list[BlobInfo], set[str], set[str]] | None:
        """What ``list(prefix)``, ``expired(prefix, far future)`` (every blob with a TTL) and ``expired(prefix,
        now_ms)`` answer, from one listing of ``prefix`` (the capability ``capabilities.listing_with_ttl``: gc's
        view of a whole repository). Lease mode only; None otherwise (no leases to list with the objects)."""
        if self.ttl_mode != "lease":
            return None
        found = self._find(prefix)
        leases = self._leases(found)
        return (list(_objects(found)), {blob_id for blob_id, _ in leases},
                {blob_id for blob_id, expires in leases if expires <= now_ms})

    def _leases(self, found: dict[str, dict[str, Any]]) -> list[tuple[str, int]]:
        """``(blob id, expiry in ms)`` of every lease among ``found`` (a listing), each lease read once; foreign
        ones left out (``expired``). An unreadable lease (a torn write, or one being written right now) stands for
        the blob of the same name under blobs/ or indexes/, expiring once the lease itself is old."""
        out = []
        for rel, info in found.items():
            if not is_lease(rel):
                continue
            try:
                body = self.get_bounded(rel, BoundedSink(MAX_LEASE_BYTES, f"lease {rel}"))
                lease = Lease.from_bytes(body if self.metadata_seal is None else self.metadata_seal.open(rel, body))
                if lease.blob_id != leased_object(rel):
                    self.foreign_leases.append(rel)
                    log.warning("ignored lease %s of %s: it names %s, not its own blob %s", rel,
                                self.display_url, self.redact(repr(lease.blob_id))[:200], leased_object(rel))
                    continue
                out.append((lease.blob_id, lease.expires_at_ms))
            except (FileNotFoundError, BlobNotFound):
                continue
            except (ValueError, IntegrityError):  # msgspec's DecodeError and ValidationError are ValueErrors
                written = modified_ms(info)
                if written is not None:
                    out.append((leased_object(rel), written + TORN_LEASE_GRACE_MS))
        return out


def _objects(found: dict[str, dict[str, Any]]) -> Iterator[BlobInfo]:
    """The blobs of a listing, sorted by id: TTL bookkeeping (leases) and temp files left out."""
    for rel, info in sorted(found.items()):
        if not is_lease(rel) and ".tmp-" not in posixpath.basename(rel):
            yield BlobInfo(rel, int(info.get("size") or 0), modified_ms(info), etag(info))


def _copy(src: Any, sink: BinaryIO, piece: int = COPY_BUFFER) -> int:
    total = 0
    while True:
        data = src.read(piece)
        if not data:
            return total
        sink.write(data)
        total += len(data)
