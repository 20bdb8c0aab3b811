"""``CodecBlobStore``: the one place every repository object passes through on its way to and from the blob store,
where it is compressed and encrypted (``blobstate.codec.frame``). The pipelines and the plugins keep handing each
other plain bytes: the pipelines never see a stored form, the plugins never see a plain one.

What it encodes: the objects of the repository layout (``<job>/<task>/<store>/blobs/<32 hex>`` and
``.../indexes/<32 hex>.json``). Everything else (the repository marker, which holds the wrapped data key and is
read before there is a key; the file log's records, which the log wrapper seals; a doctor's probes) passes
through as it is, and the plugin's own leases are sealed by the plugin through ``seal_metadata_with``.

- a blob is compressed when its put request's ``codec`` says so: a data blob as the planner decided for its file
  (``frame.choose``, recorded in the blob's index entry), a changelog always (its writer asks for
  ``Repository.metadata_codec``); a snapshot index always; nothing with compression off. On an encrypted
  repository every layout object is encrypted;
- reads: ``get_blob`` decodes a data blob as its index entry says, streaming; ``get_bounded`` (indexes and
  changelogs, bounded by their declared plain size) decodes whole, authenticating before decompressing;
  ``get`` of an encrypted object decodes as its frame says.

Encoded objects are held in memory whole (a blob is at most the chunk size) between encoding and the end of
their upload; ``budget`` bounds the plain bytes held so at once (the store's transfer budget), so memory stays
bounded whatever the state size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher
from blobstate.model.layout import ObjectKind, store_object_kind
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import BlobInfo, BlobStore, BoundedSink, GetRequest, MetadataSeal, PutRequest


def is_layout_object(blob_id: str) -> bool:
    """True for a data blob, changelog or snapshot index id of the repository layout (the objects encoded:
    ``blobstate.model.layout.store_object_kind``)."""
    return store_object_kind(blob_id) is not None


class LeaseSeal:
    """A blob store's own bodies (its TTL leases) sealed under the repository's data key: the ``MetadataSeal`` the
    codec hands the plugin (``BlobStore.seal_metadata_with``), bound to each lease's name."""

    def __init__(self, cipher: ObjectCipher) -> None:
        self.cipher = cipher

    def seal(self, name: str, body: bytes) -> bytes:
        return self.cipher.seal("lease", name, body)

    def open(self, name: str, stored: bytes) -> bytes:
        return self.cipher.unseal("lease", name, stored)


class CodecBlobStore(BlobStore):
    """Wraps the repository's blob store (``inner``, the retrying one): layout objects are stored compressed
    (``compress``: indexes and changelogs always, data blobs as their put request says) and, with ``cipher``,
    encrypted, and so are the plugin's leases (``LeaseSeal``); ``budget`` (bytes) bounds the plain bytes being
    encoded and uploaded at once."""

    def __init__(self, inner: BlobStore, *, cipher: ObjectCipher | None = None, compress: bool = True,
                 budget: int = 128 << 20) -> None:
        self.inner = inner
        self.url = inner.url
        self.max_concurrency = inner.max_concurrency
        self.ttl_mode = inner.ttl_mode
        self.cipher = cipher
        self.compress = compress
        self.budget = ByteBudget(budget)
        if cipher is not None:
            inner.seal_metadata_with(LeaseSeal(cipher))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # -- writes ------------------------------------------------------------------------------------------------
    def _compressed(self, request: PutRequest) -> bool:
        """Whether ``request`` is stored compressed: as its ``codec`` says (a data blob: the planner's choice, in
        the index; a changelog: its writer's, ``Repository.metadata_codec``), and a snapshot index always."""
        if request.codec is not None:
            return request.codec == frame.ZSTD
        return self.compress and store_object_kind(request.blob_id) is ObjectKind.INDEX

    def _encodes(self, request: PutRequest) -> bool:
        return is_layout_object(request.blob_id) and (self.cipher is not None or self._compressed(request))

    def put(self, request: PutRequest) -> None:
        if not self._encodes(request):
            self.inner.put(request)
            return
        with self.budget.reserve(request.size):
            data = frame.encode(request.blob_id, request.source, compress=self._compressed(request),
                                cipher=self.cipher)
            self.inner.put(PutRequest(request.blob_id, data, request.ttl_ms))

    def put_many(self, requests: Sequence[PutRequest]) -> None:
        requests = list(requests)
        if any(self._encodes(r) for r in requests):
            self.map_concurrent(self.put, requests)
        else:
            self.inner.put_many(requests)

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        if self.cipher is not None and is_layout_object(blob_id):
            data = frame.encode(blob_id, data, compress=self.compress, cipher=self.cipher)
        self.inner.put_exclusive(blob_id, data)

    # -- reads -------------------------------------------------------------------------------------------------
    def get_blob(self, blob_id: str, sink: BinaryIO, codec: str | None) -> int:
        """Stream the plain bytes of a data blob stored as its index entry's ``codec`` says into ``sink``; returns
        how many. Raises ``BlobNotFound``, ``ChecksumMismatch`` (damaged, or not authentic)."""
        if self.cipher is None and codec is None:
            return self.inner.get(blob_id, sink)
        decoder = frame.DecodingSink(sink, blob_id, cipher=self.cipher, compressed=codec == frame.ZSTD)
        self.inner.get(blob_id, decoder)  # type: ignore[arg-type]
        return decoder.finish()

    def get(self, blob_id: str, sink: BinaryIO) -> int:
        if self.cipher is None or not is_layout_object(blob_id):
            return self.inner.get(blob_id, sink)
        decoder = frame.DecodingSink(sink, blob_id, cipher=self.cipher, compressed=None)
        self.inner.get(blob_id, decoder)  # type: ignore[arg-type]
        return decoder.finish()

    def get_many(self, requests: Sequence[GetRequest]) -> list[int]:
        if self.cipher is None:
            return self.inner.get_many(requests)
        return self.map_concurrent(lambda r: self.get(r.blob_id, r.sink), requests)

    def get_bytes(self, blob_id: str) -> bytes:
        if self.cipher is None or not is_layout_object(blob_id):
            return self.inner.get_bytes(blob_id)
        return super().get_bytes(blob_id)

    def get_bounded(self, blob_id: str, sink: BoundedSink) -> bytes:
        """The plain bytes of a metadata object, at most ``sink.limit`` of them (its declared size) from at most
        ``frame.stored_bound(sink.limit)`` stored bytes: authenticated (encrypted) and decompressed within the
        bound, whatever form it is stored in."""
        if not is_layout_object(blob_id):
            return self.inner.get_bounded(blob_id, sink)
        stored = BoundedSink(frame.stored_bound(sink.limit), sink.what, error=sink.error, why=sink.why)
        data = self.inner.get_bounded(blob_id, stored)
        frame.decode(blob_id, data, sink, cipher=self.cipher)
        return sink.getvalue()

    # -- everything else is the inner store's --------------------------------------------------------------
    def get_versioned(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """Metadata rewritten in place (the marker) is stored as it is: the inner store's."""
        return self.inner.get_versioned(blob_id, sink)

    @property
    def conditional_rewrite(self) -> bool:  # type: ignore[override]
        return self.inner.conditional_rewrite

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        self.inner.rewrite(blob_id, data, expected=expected)

    def delete(self, blob_id: str) -> None:
        self.inner.delete(blob_id)

    def delete_many(self, blob_ids: Iterable[str]) -> None:
        self.inner.delete_many(blob_ids)

    def delete_permanent_many(self, blob_ids: Iterable[str]) -> None:
        self.inner.delete_permanent_many(blob_ids)

    def remove_ttl(self, blob_id: str) -> None:
        self.inner.remove_ttl(blob_id)

    def remove_ttl_many(self, blob_ids: Iterable[str]) -> None:
        self.inner.remove_ttl_many(blob_ids)

    def remove_own_ttl_many(self, blob_ids: Iterable[str]) -> None:
        self.inner.remove_own_ttl_many(blob_ids)

    def has_ttl(self, blob_id: str) -> bool:
        return self.inner.has_ttl(blob_id)

    def list(self, prefix: str) -> Iterator[BlobInfo]:
        return self.inner.list(prefix)

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        return self.inner.expired(prefix, now_ms)

    def sweep_expired(self, prefix: str, now_ms: int) -> list[str]:
        return self.inner.sweep_expired(prefix, now_ms)

    def temporaries(self, prefix: str) -> list[BlobInfo]:
        return self.inner.temporaries(prefix)

    def location_exists(self) -> bool | None:
        return self.inner.location_exists()

    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        return self.inner.lifecycle_rule(ttl_ms)

    def install_lifecycle(self, ttl_ms: int) -> bool:
        return self.inner.install_lifecycle(ttl_ms)

    def seal_metadata_with(self, seal: MetadataSeal | None) -> None:
        self.inner.seal_metadata_with(seal)

    def close(self) -> None:
        self.inner.close()
