"""The base of the cloud blob stores (S3, GCS, Azure): native TTL, the bucket/prefix split and bulk deletes.

A cloud store keeps the fsspec store's lease mode (``ttl_mode="lease"``) and adds a native one: the TTL is a mark
the cloud itself understands (an S3 object tag, an Azure blob index tag, a GCS ``customTime``), set in the same
request that writes the blob, and a lifecycle rule in whole days deletes marked objects (Samza's TTL on the
blob store, done by the service). Each subclass supplies the marks (``_native_ttl_kwargs``,
``_remove_native_ttl``, ``_expired_native``, ``_tags``) and its bulk delete (``_delete_paths``); this class
routes every call to the lease or the native implementation, so no subclass repeats that choice.

Blob bytes: when a subclass can map the storage options onto obstore (``_obstore_transport``), ``put``, ``get``,
``get_bytes`` and ``put_exclusive`` go through an ``ObstoreTransport`` (streaming, a byte budget, the TTL marks in
the same request); everything else, and every store whose options cannot be mapped, stays on fsspec.
"""

from __future__ import annotations

import io
import logging
import math
from collections.abc import Callable, Iterable
from typing import Any, BinaryIO

from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, ObjectChangedError, StorageError, UnlistableKey
from blobstate.model.layout import lease_id
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import BlobStore, BoundedSink, PutRequest
from blobstate.plugins.fsspec_store import REMOTE_READ, FsspecBlobStore, leased
from blobstate.plugins.toolkit.transfer import ObjectTooLarge, ObstoreTransport, budget_from

log = logging.getLogger(__name__)

DAY_MS = 86_400_000  # milliseconds in a day: lifecycle rules count whole days


def ttl_days(ttl_ms: int) -> int:
    """Whole days a lifecycle rule needs to cover ``ttl_ms`` milliseconds (at least 1)."""
    return max(1, math.ceil(ttl_ms / DAY_MS))


class NativeTtlBlobStore(FsspecBlobStore):
    """A ``FsspecBlobStore`` on a cloud bucket (``<scheme>://<bucket>/<key prefix>``) with native TTL.

    ``bucket``: the bucket (Azure: the container); ``key_prefix``: the repository's prefix inside it ('' at the
    bucket's root). Subclasses implement the ``_native`` hooks below; lease mode is the fsspec store's.
    """

    native_ttl = True
    #: Route listings, existence checks, lease writes and deletes through the transport too, when there is one:
    #: a store whose commits need nothing else then never makes its fsspec filesystem (S3: s3fs, aiobotocore and
    #: botocore, about 0.3 s of CPU per process; the tags and lifecycle rules of native mode still use it).
    metadata_by_transport = False

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8, settings: Settings | None = None) -> None:
        self.transport: ObstoreTransport | None = None
        self._make_transport: Callable[[], ObstoreTransport] | None = None
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency,
                         settings=settings)
        self.bucket, _, self.key_prefix = self.root.partition("/")
        if self._make_transport is not None:
            self.transport = self._make_transport()

    def _accepts_userinfo(self, userinfo: str) -> bool:
        return False  # S3's and GCS's SDKs take no credentials from a URL (Azure: container@account, its own)

    def _fs_options(self, options: dict[str, Any]) -> dict[str, Any]:
        self.budget = ByteBudget(budget_from(options, self.settings.transfer_budget))
        self._make_transport = self._obstore_transport(options)
        return options

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    @property
    def native(self) -> bool:
        """True in native TTL mode (the cloud's own marks), False in lease mode."""
        return self.ttl_mode == "native"

    def bucket_key(self, blob_id: str) -> tuple[str, str]:
        """(bucket, object key) of ``blob_id``."""
        bucket, _, key = self.path(blob_id).partition("/")
        return bucket, key

    def rule_prefix(self) -> str:
        """The key prefix a lifecycle rule is limited to: ``<key prefix>/``, or '' at the bucket's root."""
        return f"{self.key_prefix}/" if self.key_prefix else ""

    # -- listings, existence, small writes and deletes through the transport (``metadata_by_transport``) ----
    @property
    def _meta(self) -> ObstoreTransport | None:
        return self.transport if self.metadata_by_transport else None

    def _key(self, path: str) -> str:
        """The object key of a full path (``<bucket>/<key>``)."""
        return path.partition("/")[2]

    def _find(self, prefix: str) -> dict[str, dict[str, Any]]:
        meta = self._meta
        if meta is None:
            return super()._find(prefix)
        base = self.bucket_key(prefix)[1] if prefix else self.key_prefix
        try:
            found = meta.list(base)
        except UnlistableKey as exc:  # a stray key obstore cannot name: fsspec lists it (layout ignores it)
            log.warning("listing %s through fsspec: %s", self.display_url, self.redact(str(exc))[:300])
            return super()._find(prefix)
        return {self._rel(f"{self.bucket}/{info['name']}"): info for info in found}

    def _exists(self, path: str) -> bool:
        meta = self._meta
        return super()._exists(path) if meta is None else meta.exists(self._key(path))

    def _write_small(self, path: str, data: bytes) -> None:
        meta = self._meta
        if meta is None:
            super()._write_small(path, data)
        else:
            meta.put(self._key(path), data)

    def _rm(self, path: str) -> None:
        meta = self._meta
        if meta is None:
            super()._rm(path)
        else:
            meta.delete([self._key(path)])

    # -- blob bytes through the transport, when there is one ------------------------------------------------
    def put(self, request: PutRequest) -> None:
        if self.transport is None:
            self._put_with_fsspec(request)
            return
        if request.ttl_ms is not None:
            self._set_ttl_before_put(request.blob_id, request.ttl_ms)  # the lease first (lease mode only)
        tags, metadata = self._native_marks(request)
        try:
            self.transport.put(self.bucket_key(request.blob_id)[1], request.source, tags=tags, attributes=metadata)
        except FileNotFoundError as exc:
            raise StorageError(f"cannot write blob {request.blob_id}: {exc}") from exc

    def _put_with_fsspec(self, request: PutRequest) -> None:
        # fsspec's cloud clients hold a whole blob (or a multipart part) while they send it: the same budget
        with self.budget.reserve(request.size):
            super().put(request)

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        """Create ``blob_id`` only if absent (``If-None-Match: *``); ``FileExistsError`` when it exists."""
        if self.transport is not None:
            self.transport.put_exclusive(self.bucket_key(blob_id)[1], data)
            return
        self._put_exclusive_with_fsspec(blob_id, data)

    def _put_exclusive_with_fsspec(self, blob_id: str, data: bytes) -> None:
        self.fs.pipe_file(self.path(blob_id), data, mode="create")

    # -- the Rewrite door's two calls: the object with its version, and the conditional replace ---------------
    conditional_rewrite = True

    def get_versioned(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """The object and its version as the service names it (S3 and Azure: the ETag of the GET that read it; GCS:
        the generation)."""
        if self.transport is None:
            return self._get_versioned_with_fsspec(blob_id, sink)
        tags: list[str] = []
        try:
            self.transport.get(self.bucket_key(blob_id)[1], sink, max_size=sink.limit, tags=tags)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        except ObjectTooLarge:
            raise sink.too_large() from None
        if not tags[0]:
            raise StorageError(f"the store names no entity tag for {blob_id}: it cannot be rewritten conditionally")
        return sink.getvalue(), tags[0]

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        """One PUT that the service applies only while the object's version is ``expected`` (S3 and Azure
        ``If-Match``, GCS ``ifGenerationMatch``); ``expected=None``: a create-only PUT. ``ObjectChangedError`` when
        it refuses (412) or the object is gone."""
        if expected is None:
            BlobStore.rewrite(self, blob_id, data, expected=None)
            return
        try:
            if self.transport is not None:
                self.transport.put_exclusive(self.bucket_key(blob_id)[1], data, version=expected)
            else:
                self._rewrite_with_fsspec(blob_id, data, expected)
        except (FileExistsError, FileNotFoundError):
            raise ObjectChangedError(f"{blob_id} changed since it was read (the store refused the conditional "
                                     "write)") from None

    def _get_versioned_with_fsspec(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """``get_versioned`` through the fsspec client (no obstore transport)."""
        raise NotImplementedError

    def _rewrite_with_fsspec(self, blob_id: str, data: bytes, expected: str) -> None:
        """The conditional PUT through the fsspec client: ``FileExistsError`` when the service refuses it."""
        raise NotImplementedError

    def get(self, blob_id: str, sink: BinaryIO) -> int:
        if self.transport is None:
            with self.budget.reserve(2 * REMOTE_READ):  # one ranged read in flight per blob, and its copy
                return super().get(blob_id, sink)
        try:
            return self.transport.get(self.bucket_key(blob_id)[1], sink)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None

    def get_bounded(self, blob_id: str, sink: BoundedSink) -> bytes:
        if self.transport is None:
            return super().get_bounded(blob_id, sink)
        try:
            self.transport.get(self.bucket_key(blob_id)[1], sink, max_size=sink.limit)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        except ObjectTooLarge:
            raise sink.too_large() from None
        return sink.getvalue()

    def get_bytes(self, blob_id: str) -> bytes:
        if self.transport is None:
            return super().get_bytes(blob_id)
        buf = io.BytesIO()
        self.get(blob_id, buf)
        return buf.getvalue()

    # -- routing between lease and native mode ---------------------------------------------------------------
    def _native_marks(self, request: PutRequest) -> tuple[dict[str, str] | None, dict[str, str] | None]:
        """``(tags, user metadata)`` ``put`` writes with the blob in the same request: in native mode its TTL tags
        (a subclass may record a data blob's expiry as metadata instead), nothing otherwise."""
        if self.native and request.ttl_ms is not None:
            return self._ttl_tags(request.ttl_ms), None
        return None, None

    def _put_kwargs(self, request: PutRequest) -> dict[str, Any]:
        if self.native and request.ttl_ms is not None:
            return self._native_ttl_kwargs(request.ttl_ms)
        return {}

    def remove_ttl(self, blob_id: str) -> None:
        if not self.native:
            super().remove_ttl(blob_id)
            return
        self._remove_native_ttl(blob_id)

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        """Lease mode: expired leases. Native mode: blobs whose recorded expiry (ms) is <= ``now_ms``."""
        if not self.native:
            return super().expired(prefix, now_ms)
        return self._expired_native(prefix, now_ms)

    def delete_many(self, blob_ids: Iterable[str]) -> None:
        """One bulk call per service batch (S3 ``DeleteObjects``, Azure Blob Batch); leases too in lease mode.
        Idempotent: missing blobs are not an error."""
        ids = list(blob_ids)
        if not ids:
            return
        paths = [self.path(b) for b in ids]
        if not self.native:
            paths += [self.path(lease_id(b)) for b in ids if leased(b)]
        self._delete_paths(paths)

    def delete_permanent_many(self, blob_ids: Iterable[str]) -> None:
        """The blobs alone, in bulk (one request per service batch): their leases went when their commit completed
        (``BlobStore.delete_permanent_many``)."""
        ids = list(blob_ids)
        if ids:
            self._delete_paths([self.path(b) for b in ids])

    def remove_ttl_many(self, blob_ids: Iterable[str]) -> None:
        """Lease mode: every lease deleted in bulk (one request per service batch); native mode: the marks
        removed blob by blob, concurrently (the services have no bulk tagging call). Idempotent."""
        ids = list(blob_ids)
        if not ids:
            return
        if self.native:
            self.map_concurrent(self._remove_native_ttl, ids)
            return
        self._delete_paths([self.path(lease_id(b)) for b in ids if leased(b)])

    def remove_own_ttl_many(self, blob_ids: Iterable[str]) -> None:
        """Native mode: the marks of objects that carry none but blobstate's dropped without reading them first
        (``_drop_native_ttl``), concurrently; lease mode: as ``remove_ttl_many``. Idempotent."""
        ids = list(blob_ids)
        if ids and self.native:
            self.map_concurrent(self._drop_native_ttl, ids)
        elif ids:
            self.remove_ttl_many(ids)

    # -- hooks -------------------------------------------------------------------------------------------------
    def _obstore_transport(self, options: dict[str, Any]) -> Callable[[], ObstoreTransport] | None:
        """A factory of the obstore transport for these fsspec ``options`` (called once the store is set up), or
        None when they cannot be mapped exactly (then fsspec carries the blob bytes)."""
        return None

    def _ttl_tags(self, ttl_ms: int) -> dict[str, str]:
        """The object tags that mark a blob expiring in ``ttl_ms`` (stores whose mark is a tag)."""
        raise NotImplementedError

    def _native_ttl_kwargs(self, ttl_ms: int) -> dict[str, Any]:
        """Keyword arguments for the write call that set the native TTL mark of a blob expiring in ``ttl_ms``."""
        raise NotImplementedError

    def _remove_native_ttl(self, blob_id: str) -> None:
        """Remove the native TTL mark (idempotent; a missing blob is fine)."""
        raise NotImplementedError

    def _drop_native_ttl(self, blob_id: str) -> None:
        """Remove the native TTL mark of an object whose marks are blobstate's alone, in as few requests as the
        service allows (default: ``_remove_native_ttl``; idempotent, a missing blob is fine)."""
        self._remove_native_ttl(blob_id)

    def _expired_native(self, prefix: str, now_ms: int) -> list[str]:
        """Blob ids under ``prefix`` whose native mark says they expired by ``now_ms``."""
        raise NotImplementedError

    def _delete_paths(self, paths: list[str]) -> None:
        """Delete full object paths in bulk (through the transport: the service's bulk call; else concurrently, one
        request each); missing objects are fine."""
        meta = self._meta
        if meta is not None:
            try:
                meta.delete([self._key(p) for p in paths])
            except FileNotFoundError:
                pass  # the bucket itself is gone: nothing left to delete (as fsspec's bulk delete answers)
            return
        self.map_concurrent(self._rm, paths)
