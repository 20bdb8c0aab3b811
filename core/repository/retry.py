"""Retries with exponential backoff (tenacity) for transient storage faults, around any ``BlobStore``.

Transient: ``TransientStorageError``, connection and timeout errors, and errno values a retry can cure. Permanent
faults (missing blob, existing object on exclusive create, permission) pass through at once. After the last
attempt the fault becomes a ``StorageError`` naming the operation and the blob, never the credentials.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, TypeVar

from blobstate.config.settings import DEFAULT_RETRY_ATTEMPTS
from blobstate.errors import BlobstateError, StorageError, TransientStorageError
from blobstate.plugin.capabilities import listing_with_ttl, recorded_expiry
from blobstate.plugin.interfaces import (
    BlobInfo,
    BlobStore,
    BoundedSink,
    GetRequest,
    MetadataSeal,
    PutRequest,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_TRANSIENT_ERRNOS = {errno.EAGAIN, errno.ETIMEDOUT, errno.ECONNRESET, errno.ECONNABORTED, errno.ECONNREFUSED,
                     errno.EPIPE, errno.EBUSY, errno.EHOSTUNREACH, errno.ENETUNREACH}
_TRANSIENT_NAMES = ("Throttl", "SlowDown", "ServiceUnavailable", "ClientConnector", "ServerDisconnected",
                    "ConnectTimeout", "ReadTimeout", "EndpointConnectionError", "RequestTimeout", "InternalError",
                    "ConnectionClosed", "ServiceRequestError", "ServiceResponseError")


def is_transient(exc: BaseException) -> bool:
    """True for faults a retry may cure."""
    if isinstance(exc, TransientStorageError):
        return True
    if isinstance(exc, (BlobstateError, FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError,
                        NotADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    return any(name in type(exc).__name__ for name in _TRANSIENT_NAMES)


def _redacted(exc: BaseException | None) -> str:
    from blobstate.config.options import redact

    return str(redact(f"{type(exc).__name__}: {exc}"))


#: Attempts per operation unless the caller's settings say otherwise (``Settings.retry_attempts``,
#: ``BLOBSTATE_RETRY_ATTEMPTS``).
DEFAULT_ATTEMPTS = DEFAULT_RETRY_ATTEMPTS


def call_with_retry(fn: Callable[[], T], what: str, *, attempts: int | None = None,
                    max_wait_s: float = 2.0) -> T:
    """Run ``fn`` with up to ``attempts`` tries (default ``DEFAULT_ATTEMPTS``) and exponential backoff (0.05 s
    doubling to ``max_wait_s``).

    Raises what ``fn`` raised for permanent faults, ``StorageError`` once a transient one outlasts the retries.
    """
    try:
        try:
            return fn()  # the first attempt without tenacity: most calls succeed at once (issue 31, see _retry)
        except Exception as exc:
            if not is_transient(exc):
                raise
            first = exc
        return _retry(fn, first, what, attempts or DEFAULT_ATTEMPTS, max_wait_s)
    except BlobstateError:
        raise
    except (FileNotFoundError, FileExistsError):
        raise
    except Exception as exc:  # noqa: BLE001 - an SDK's own error types (HttpResponseError, ClientError, ...)
        raise StorageError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


def _retry(fn: Callable[[], T], first: Exception, what: str, attempts: int, max_wait_s: float) -> T:
    """The attempts after a first one that raised the transient ``first``: tenacity's ``Retrying`` counts ``first``
    as its attempt 1 (so the waits, the logged retries and ``attempts`` are those of a ``Retrying`` around every
    attempt), then calls ``fn`` again. ``StorageError`` once a transient fault outlasts the attempts. tenacity is
    imported here, deliberately, on the first transient fault: ~5 ms of import that a command whose calls all
    succeed at once (a backup to ``file://``) no longer pays."""
    from tenacity import RetryError, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    pending = [first]

    def attempt() -> T:
        if pending:
            raise pending.pop()
        return fn()

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.05, max=max_wait_s),
        retry=retry_if_exception(is_transient),
        reraise=False,
        before_sleep=lambda state: log.info("retrying %s after %s", what, _redacted(state.outcome.exception())),
    )
    try:
        return retrying(attempt)
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise StorageError(f"{what} failed after {exc.last_attempt.attempt_number} attempts: "
                           f"{type(last).__name__}: {last}") from last


class RetryingBlobStore(BlobStore):
    """Wraps a ``BlobStore`` so that every call is retried on transient faults (``call_with_retry``).

    Batch calls reach the backend's own implementation when it has one (S3's ``DeleteObjects``, Azure's batch
    delete): the whole batch is retried, which is safe because ``put`` of a fresh blob id, ``delete`` and
    ``remove_ttl`` are idempotent. A backend without its own batch call gets the base class's concurrent loop
    over this wrapper's single calls, so each item is retried on its own. ``attempts``: per call (the settings'
    ``retry_attempts``, handed in by ``blobstate.repository.backends.open_blob_store``).
    """

    def __init__(self, inner: BlobStore, *, attempts: int = DEFAULT_ATTEMPTS) -> None:
        self.inner = inner
        self.attempts = max(1, attempts)
        self.url = inner.url
        self.max_concurrency = inner.max_concurrency
        self.ttl_mode = inner.ttl_mode

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _call(self, fn: Callable[[], T], what: str, *, attempts: int | None = None) -> T:
        """``call_with_retry``, then a missing bucket, refused credentials, a wrong region or an unreachable endpoint
        becomes its one-line ``StorageLocationError`` (``blobstate.repository.translate.translate``)."""
        from blobstate.repository.translate import translate

        try:
            return call_with_retry(fn, what, attempts=attempts or self.attempts)
        except Exception as exc:
            translated = translate(exc, self.url)
            if translated is None or translated is exc:
                raise
            raise translated from exc

    def put(self, request: PutRequest) -> None:
        self._call(lambda: self.inner.put(request), f"upload of {request.blob_id}")

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        self._call(lambda: self.inner.put_exclusive(blob_id, data), f"exclusive create of {blob_id}")

    def get(self, blob_id: str, sink: BinaryIO) -> int:
        start = sink.tell() if sink.seekable() else None

        def attempt() -> int:
            if start is not None:
                sink.seek(start)  # a retry rewrites the same byte range (never truncate: other chunks follow)
            return self.inner.get(blob_id, sink)

        if start is None:
            return self._call(lambda: self.inner.get(blob_id, sink), f"download of {blob_id}", attempts=1)
        return self._call(attempt, f"download of {blob_id}")

    def get_bytes(self, blob_id: str) -> bytes:
        return self._call(lambda: self.inner.get_bytes(blob_id), f"download of {blob_id}")

    def get_bounded(self, blob_id: str, sink: BoundedSink) -> bytes:
        def attempt() -> bytes:
            sink.seek(0)
            sink.truncate()
            return self.inner.get_bounded(blob_id, sink)

        return self._call(attempt, f"download of {blob_id}")

    def get_versioned(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        def attempt() -> tuple[bytes, str]:
            sink.seek(0)
            sink.truncate()
            return self.inner.get_versioned(blob_id, sink)

        return self._call(attempt, f"download of {blob_id}")

    @property
    def conditional_rewrite(self) -> bool:  # type: ignore[override]
        return self.inner.conditional_rewrite

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        """The inner store's conditional rewrite, retried on transient faults. A rewrite that landed but whose
        answer was lost is refused on its retry (the version moved on: ``ObjectChangedError``); the caller reads
        the object again and finds its own bytes (``blobstate.repository.marker.update_marker``)."""
        self._call(lambda: self.inner.rewrite(blob_id, data, expected=expected), f"rewrite of {blob_id}")

    def delete(self, blob_id: str) -> None:
        self._call(lambda: self.inner.delete(blob_id), f"delete of {blob_id}")

    def remove_ttl(self, blob_id: str) -> None:
        self._call(lambda: self.inner.remove_ttl(blob_id), f"TTL removal of {blob_id}")

    def has_ttl(self, blob_id: str) -> bool:
        return self._call(lambda: self.inner.has_ttl(blob_id), f"TTL check of {blob_id}")

    def list(self, prefix: str) -> Iterator[BlobInfo]:
        return iter(self._call(lambda: list(self.inner.list(prefix)), f"listing of {prefix or '/'}"))

    def sweep_expired(self, prefix: str, now_ms: int) -> list[str]:
        return self._call(lambda: self.inner.sweep_expired(prefix, now_ms), f"TTL sweep of {prefix or '/'}")

    def temporaries(self, prefix: str) -> list[BlobInfo]:
        return self._call(lambda: self.inner.temporaries(prefix), f"listing of temporaries in {prefix or '/'}")

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        return self._call(lambda: self.inner.expired(prefix, now_ms), f"TTL listing of {prefix or '/'}")

    def recorded_expiry(self, blob_ids: Sequence[str]) -> dict[str, int | None] | None:
        """The inner store's ``recorded_expiry`` (``capabilities.recorded_expiry``), retried; None without it."""
        fn = recorded_expiry(self.inner)
        return None if fn is None else self._call(lambda: fn(blob_ids), f"recorded expiry of {len(blob_ids)} blobs")

    def list_with_ttl(self, prefix: str, now_ms: int) -> tuple[list[BlobInfo], set[str], set[str]] | None:
        """The inner store's ``list_with_ttl`` (``capabilities.listing_with_ttl``), retried; None without it."""
        fn = listing_with_ttl(self.inner)
        return None if fn is None else self._call(lambda: fn(prefix, now_ms), f"listing with TTLs of {prefix or '/'}")

    # -- batches: the backend's own bulk calls, when it has them ---------------------------------------------
    def _native(self, name: str) -> bool:
        """True when the wrapped store overrides the batch call ``name`` of the ``BlobStore`` base class."""
        return getattr(type(self.inner), name, None) is not getattr(BlobStore, name)

    def put_many(self, requests: Sequence[PutRequest]) -> None:
        if not self._native("put_many"):
            return super().put_many(requests)
        requests = list(requests)
        self._call(lambda: self.inner.put_many(requests), f"upload of {len(requests)} blobs")

    def get_many(self, requests: Sequence[GetRequest]) -> list[int]:
        if not self._native("get_many"):
            return super().get_many(requests)
        # Sinks cannot all be rewound to a consistent point: one attempt, errors mapped like every other call.
        return self._call(lambda: self.inner.get_many(requests), f"download of {len(requests)} blobs",
                               attempts=1)

    def delete_many(self, blob_ids: Iterable[str]) -> None:
        self._bulk("delete_many", blob_ids, "delete")

    def delete_permanent_many(self, blob_ids: Iterable[str]) -> None:
        self._bulk("delete_permanent_many", blob_ids, "delete")

    def remove_ttl_many(self, blob_ids: Iterable[str]) -> None:
        self._bulk("remove_ttl_many", blob_ids, "TTL removal")

    def remove_own_ttl_many(self, blob_ids: Iterable[str]) -> None:
        self._bulk("remove_own_ttl_many", blob_ids, "TTL removal")

    def _bulk(self, method: str, blob_ids: Iterable[str], what: str) -> None:
        """The inner store's own bulk ``method`` as one retried call, or the interface's per-blob default."""
        if not self._native(method):
            getattr(super(), method)(blob_ids)
            return
        ids = list(blob_ids)
        if ids:
            self._call(lambda: getattr(self.inner, method)(ids), f"{what} of {len(ids)} blobs")

    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        return self.inner.lifecycle_rule(ttl_ms)

    def location_exists(self) -> bool | None:
        return self._call(self.inner.location_exists, "bucket check")

    def install_lifecycle(self, ttl_ms: int) -> bool:
        return self._call(lambda: self.inner.install_lifecycle(ttl_ms), "lifecycle rule installation")

    def seal_metadata_with(self, seal: MetadataSeal | None) -> None:
        self.inner.seal_metadata_with(seal)

    def close(self) -> None:
        self.inner.close()
