"""Streaming blob transfers through obstore (Rust ``object_store``) with a fixed budget of bytes in flight.

A blob up to ``SINGLE_REQUEST_MAX`` (64 MiB and 4 KiB: the core's default chunk size, encrypted) is one PUT (held in
memory while it is sent, within the budget) and one GET streamed to the sink in 1 MiB pieces: on the benchmark's
moto server a multipart upload of the same bytes took twice as long (the server assembles the parts), and fewer
requests per commit. A larger blob never sits in memory whole: it goes up as a multipart upload whose parts are read
from the file one at a time as the transport asks for them, at most ``part_concurrency`` parts in flight (rclone's
``--s3-upload-concurrency``), and comes down as ranged GETs run ``part_concurrency`` at a time and written to the
sink in order as they arrive (rclone's multi-thread streams), so the sink (a CRC32C checker on the restore path)
sees the bytes once, in order.

Every transfer of one store first reserves its bytes from one ``ByteBudget`` (default ``DEFAULT_BUDGET``, set
with the storage option ``transfer_budget`` or ``BLOBSTATE_TRANSFER_BUDGET``, bytes): concurrent files and parts
together never hold more than the budget in memory, whatever the state or file size.

Bandwidth: every byte a transport sends or receives is first taken from the process's ``RateLimiter`` of that
direction (``throttle``), when ``--limit-upload``/``--limit-download`` (``BLOBSTATE_LIMIT_UPLOAD``/``_DOWNLOAD``,
the API's ``limit_upload``/``limit_download``) set one: one token bucket per direction and rate, shared by every
transfer of the process, whatever the store (restic's ``--limit-upload``, rclone's ``--bwlimit``).

Errors: obstore's ``NotFoundError`` -> ``FileNotFoundError``, ``AlreadyExistsError``/``PreconditionError`` ->
``FileExistsError``; anything else propagates (the retry wrapper decides whether it is transient).
"""

from __future__ import annotations

import contextvars
import logging
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, BinaryIO, TypeVar

from blobstate.config.units import parse_size
from blobstate.errors import ConfigurationError, StorageError, TransientStorageError, UnlistableKey
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import FileRange

T = TypeVar("T")

MiB = 1 << 20
# Blobs up to this size move in one PUT / one streamed GET: the default chunk size, and room for what the core's codec
# adds to a chunk (an encrypted chunk is 33 bytes larger: blobstate.codec.frame.OVERHEAD).
SINGLE_REQUEST_MAX = 64 * MiB + 4096
DEFAULT_PART_SIZE = 16 * MiB  # bytes per multipart part and per ranged GET above it
DEFAULT_PART_CONCURRENCY = 4  # parts of one blob in flight at once
DEFAULT_BUDGET = 128 * MiB  # bytes in flight per store, all transfers together
BUDGET_ENV = "BLOBSTATE_TRANSFER_BUDGET"


def budget_from(options: dict[str, Any], default: int = DEFAULT_BUDGET) -> int:
    """The byte budget: the storage option ``transfer_budget`` (popped from ``options``), else ``default`` (the
    store's settings' ``transfer_budget``: ``BLOBSTATE_TRANSFER_BUDGET``); a size in bytes or human units
    (``96MiB``). Raises ``ConfigurationError`` when it is not a size of at least 1 MiB."""
    raw = options.pop("transfer_budget", None)
    if raw is None:
        return default
    try:
        value = parse_size(raw)
    except ConfigurationError:
        raise ConfigurationError(f"transfer_budget must be a size (96MiB, 1GB, bytes), not {raw!r}") from None
    if value < MiB:
        raise ConfigurationError(f"transfer_budget must be at least {MiB} bytes, not {value}")
    return value


class ObjectTooLarge(Exception):
    """An object larger than the ``max_size`` a read allowed (raised before its body is read)."""


class RateLimiter:
    """A token bucket in bytes (the virtual-scheduling form of the GCRA, as rclone's ``--bwlimit`` and restic's
    limiter use one): ``take(n)`` blocks until ``n`` bytes may pass at ``rate`` bytes per second, with a burst of
    at most ``burst`` bytes (default: a quarter second's worth, at least 64 KiB). Thread-safe; waiting callers
    are served in the order they asked (each reserves its slot under the lock and then sleeps outside it), so
    concurrent transfers share the rate. A piece larger than the burst passes; the debt it leaves delays the next.

    Libraries considered: ``pyrate-limiter`` (counts requests: a weight of N bytes stores N items, and a weight
    may not exceed the rate), ``token-bucket`` (non-blocking ``consume``: callers would poll), ``limits``
    (window counters, no waiting) and ``aiolimiter`` (asyncio only); none fits byte streams in threads.
    """

    def __init__(self, rate: int, *, burst: int | None = None, clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        import time

        if rate < 1:
            raise ConfigurationError(f"a rate limit must be at least 1 byte per second, not {rate}")
        self.rate = rate
        self.burst = burst if burst is not None else max(64 << 10, rate // 4)
        self._clock = clock or time.monotonic
        self._sleep = sleep or time.sleep
        self._lock = threading.Lock()
        self._next = self._clock()  # the theoretical arrival time: when the bucket is full again
        self.taken = 0  # bytes passed, for tests and the benchmark

    def take(self, nbytes: int) -> float:
        """Let ``nbytes`` pass, waiting as the rate requires; returns the seconds waited."""
        if nbytes <= 0:
            return 0.0
        with self._lock:
            now = self._clock()
            self._next = max(self._next, now) + nbytes / self.rate
            wait = self._next - now - self.burst / self.rate
            self.taken += nbytes
        if wait > 0:
            self._sleep(wait)
            return wait
        return 0.0


_limiters: dict[tuple[str, int], RateLimiter] = {}
_limiters_lock = threading.Lock()


def limiter(direction: str, rate: int | None) -> RateLimiter | None:
    """The process's limiter for ``direction`` (``upload`` or ``download``) at ``rate`` bytes per second (a blob
    store's settings' ``limit_upload`` or ``limit_download``: environment, CLI option, API keyword), or None
    without a limit. One limiter per direction and rate, shared by every store and transfer of the process."""
    if rate is None:
        return None
    with _limiters_lock:
        bucket = _limiters.get((direction, rate))
        if bucket is None:
            bucket = _limiters[(direction, rate)] = RateLimiter(rate)
            logging.getLogger(__name__).info("%ss limited to %d bytes/s (every transfer of this process)",
                                             direction, rate)
        return bucket


class Limits:
    """A blob store's two limiters (``limiter``), from its settings: ``upload`` and ``download`` (None: unlimited).
    ``Limits()`` limits nothing."""

    __slots__ = ("download", "upload")

    def __init__(self, upload: int | None = None, download: int | None = None) -> None:
        self.upload = limiter("upload", upload)
        self.download = limiter("download", download)

    @classmethod
    def of(cls, settings: Any) -> Limits:
        """The limits ``settings`` (a ``blobstate.config.settings.Settings``, or None: none) set."""
        return cls() if settings is None else cls(settings.limit_upload, settings.limit_download)


def throttle(bucket: RateLimiter | None, nbytes: int) -> None:
    """Wait until ``nbytes`` may pass ``bucket`` (one of a store's ``Limits``; nothing without one)."""
    if bucket is not None:
        bucket.take(nbytes)


class ThrottledSink:
    """A binary sink that takes every write from ``bucket`` (a store's download limiter) before passing it on to
    ``sink``."""

    def __init__(self, sink: BinaryIO, bucket: RateLimiter | None) -> None:
        self.sink = sink
        self.bucket = bucket

    def write(self, data: bytes) -> int:
        if self.bucket is not None:
            self.bucket.take(len(data))
        return self.sink.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


def read_exact(fh: BinaryIO, n: int, what: str) -> bytes:
    data = fh.read(n)
    if len(data) != n:
        raise StorageError(f"{what} shrank while it was uploaded")
    return data


class ObstoreTransport:
    """Put and get of whole blobs on one obstore store (``obstore.store.S3Store``, ``AzureStore``...), and the
    listing, existence checks and bulk deletes of a store that routes those through it too (``NativeTtlBlobStore.
    metadata_by_transport``).

    ``store``: the obstore store, rooted at the bucket (keys are full object keys). ``budget``: shared by every
    transfer of the owning blob store. ``pool_size``: threads for ranged GETs (parts of all blobs together).
    ``single_request_max`` (bytes): the largest blob moved in one request (default ``SINGLE_REQUEST_MAX``).
    ``limits``: the owning blob store's rate limiters (``Limits``; default none).
    """

    def __init__(self, store: Any, budget: ByteBudget, *, part_size: int = DEFAULT_PART_SIZE,
                 part_concurrency: int = DEFAULT_PART_CONCURRENCY, pool_size: int = 8,
                 limits: Limits | None = None) -> None:
        self.store = store
        self.budget = budget
        self.limits = limits if limits is not None else Limits()
        self.part_size = part_size
        self.part_concurrency = max(1, part_concurrency)
        self.single_request_max = SINGLE_REQUEST_MAX
        self._pool = ThreadPoolExecutor(max_workers=max(1, pool_size), thread_name_prefix="blobstate-part")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- upload ----------------------------------------------------------------------------------------------
    def put(self, key: str, source: FileRange | bytes, *, tags: dict[str, str] | None = None,
            attributes: dict[str, Any] | None = None) -> None:
        """Write ``source`` (bytes, or ``length`` bytes of a file from ``offset``) as object ``key``, with
        ``tags`` (S3 object tags, Azure blob index tags) in the same request."""
        import obstore

        extra: dict[str, Any] = {}
        if tags:
            extra["tags"] = tags
        if attributes:
            extra["attributes"] = attributes
        if isinstance(source, bytes):
            with self.budget.reserve(len(source)):
                throttle(self.limits.upload, len(source))
                self._call(lambda: obstore.put(self.store, key, source, use_multipart=False, **extra))
            return
        if source.length <= self.single_request_max:
            with self.budget.reserve(source.length):
                with open(source.path, "rb") as fh:
                    fh.seek(source.offset)
                    data = read_exact(fh, source.length, source.path)
                throttle(self.limits.upload, len(data))
                self._call(lambda: obstore.put(self.store, key, data, use_multipart=False, **extra))
            return
        # Multipart, part by part: obstore pulls the parts from this generator as it uploads them, at most
        # part_concurrency at once (plus the one being read).
        in_flight = self.part_size * (self.part_concurrency + 1)
        with self.budget.reserve(in_flight), open(source.path, "rb") as fh:
            fh.seek(source.offset)
            bucket = self.limits.upload

            def parts() -> Iterator[bytes]:
                remaining = source.length
                while remaining:
                    n = min(self.part_size, remaining)
                    part = read_exact(fh, n, source.path)
                    if bucket is not None:
                        bucket.take(n)
                    yield part
                    remaining -= n

            self._call(lambda: obstore.put(self.store, key, parts(), chunk_size=self.part_size,
                                           max_concurrency=self.part_concurrency, **extra))

    def put_exclusive(self, key: str, data: bytes, *, version: str | None = None) -> None:
        """Create ``key`` only if absent (``If-None-Match: *``), or with ``version`` replace it only while its entity
        tag is that (``If-Match``); ``FileExistsError`` otherwise (412), ``FileNotFoundError`` when it is gone."""
        import obstore

        throttle(self.limits.upload, len(data))
        mode = "create" if version is None else {"e_tag": version}
        self._call(lambda: obstore.put(self.store, key, data, mode=mode, use_multipart=False))

    def delete(self, keys: list[str]) -> None:
        """Delete ``keys`` (missing ones are fine): one bulk request per 1,000 keys where the service has one
        (S3 ``DeleteObjects``: object_store's bulk delete), else one request each."""
        import obstore

        if keys:
            self._call(lambda: obstore.delete(self.store, keys))

    # -- metadata --------------------------------------------------------------------------------------------
    def list(self, prefix: str) -> list[dict[str, Any]]:
        """Every object under the key prefix ``prefix`` ('' for all; it ends at a path segment, as fsspec's
        ``find``), as fsspec-shaped info dicts: ``name`` (the key), ``size`` (bytes), ``LastModified`` (a
        ``datetime``), ``ETag``, ``type`` ``file``. One request per 1,000 objects."""
        import obstore
        from obstore.exceptions import InvalidPathError

        out: list[dict[str, Any]] = []
        try:
            with _errors():
                for batch in obstore.list(self.store, prefix=prefix or None, chunk_size=1000):
                    out += [{"name": meta["path"], "size": meta["size"], "LastModified": meta["last_modified"],
                             "ETag": meta["e_tag"], "type": "file"} for meta in batch]
        except InvalidPathError as exc:  # object_store refuses a key with an empty, '.' or '..' segment
            raise UnlistableKey(first_line(exc)) from None
        return out

    def exists(self, key: str) -> bool:
        """Whether object ``key`` exists (one HEAD request)."""
        import obstore

        try:
            self._call(lambda: obstore.head(self.store, key))
        except FileNotFoundError:
            return False
        return True

    # -- download --------------------------------------------------------------------------------------------
    def get(self, key: str, sink: BinaryIO, *, max_size: int | None = None, tags: list[str] | None = None) -> int:
        """Stream object ``key`` into ``sink`` in order; return the bytes written (``tags``: the GET's entity tag is
        appended). ``FileNotFoundError`` if missing; ``ObjectTooLarge`` before reading a body over ``max_size``."""
        import obstore

        with self.budget.reserve(MiB), _errors():
            result = obstore.get(self.store, key)
            size = int(result.meta["size"])
            if tags is not None:
                tags.append(str(result.meta.get("e_tag") or ""))
            if max_size is not None and size > max_size:
                del result  # dropped unread: the response's headers said enough
                raise ObjectTooLarge(f"{key}: {size} bytes, more than {max_size}")
            if size <= self.single_request_max:
                written = 0
                for chunk in result.stream(min_chunk_size=MiB):
                    throttle(self.limits.download, len(chunk))
                    sink.write(chunk)
                    written += len(chunk)
                return written
            del result  # a large object: dropped unread, it comes as ranged GETs in parallel instead
        return self._get_ranges(key, 0, size, sink)

    def _get_ranges(self, key: str, start: int, size: int, sink: BinaryIO) -> int:
        """Bytes ``[start, size)`` as ranged GETs, ``part_concurrency`` ahead, written in order. Each part's bytes
        are reserved from the budget before its request and released once written; a get waits for budget only
        while it holds no part, so concurrent gets can never wait on each other."""
        import obstore

        def fetch(offset: int, length: int) -> Any:
            with _errors():
                data = obstore.get_range(self.store, key, start=offset, length=length)
            if len(data) != length:
                raise StorageError(f"ranged read of {key} at {offset} returned {len(data)} of {length} bytes")
            return data

        offsets = deque(range(start, size, self.part_size))
        pending: deque[tuple[Future[Any], int]] = deque()
        written = 0
        try:
            while offsets or pending:
                while offsets and len(pending) < self.part_concurrency:
                    length = min(self.part_size, size - offsets[0])
                    held = self.budget.acquire(length, block=not pending)
                    if held is None:
                        break
                    off = offsets.popleft()
                    pending.append((self._pool.submit(contextvars.copy_context().run, fetch, off, length), held))
                future, held = pending.popleft()
                try:
                    data = future.result()
                    throttle(self.limits.download, len(data))
                    sink.write(data)
                    written += len(data)
                    del data
                finally:
                    self.budget.release(held)
        finally:
            for future, held in pending:
                future.cancel()
                try:
                    future.exception()  # wait: its bytes stay reserved until it is done
                except BaseException:  # noqa: BLE001 - cancelled or failed: either way it is over
                    pass
                self.budget.release(held)
        return written

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        with _errors():
            return fn()


@contextmanager
def _errors() -> Iterator[None]:
    """obstore's errors as the store's: missing -> ``FileNotFoundError``, exists -> ``FileExistsError``, transport
    faults -> ``TransientStorageError`` (the retry wrapper may try again)."""
    from obstore.exceptions import AlreadyExistsError, GenericError, NotFoundError, PreconditionError

    try:
        yield
    except NotFoundError as exc:
        raise FileNotFoundError(first_line(exc)) from None
    except (AlreadyExistsError, PreconditionError) as exc:
        raise FileExistsError(first_line(exc)) from None
    except GenericError as exc:
        # object_store's catch-all: transport faults (refused or reset connections, timeouts, 5xx; its own retries
        # are off) are transient; a 4xx answer other than 408/429 is the request's fault and final.
        status = re.search(r"status code: (\d{3})", str(exc))
        if status and status.group(1).startswith("4") and status.group(1) not in ("408", "429"):
            raise StorageError(first_line(exc)) from None
        raise TransientStorageError(first_line(exc)) from None


def first_line(exc: BaseException) -> str:
    """The message of an obstore error without its multi-line debug dump (the URL stays; no credentials)."""
    return str(exc).strip().split("\n", 1)[0]
