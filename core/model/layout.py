"""The repository layout: where a store's objects live, what their names look like, and the defaults that go
with them (Samza's blob store layout, one prefix per store so that a delete never touches another store).

::

    <job>/<task>/<store>/blobs/<32 hex>            file contents (one blob per chunk)
    <job>/<task>/<store>/indexes/<32 hex>.json     snapshot indexes
    <job>/<task>/<store>/ttl/<name>                TTL leases (lease mode; the blob store plugin's business)
    checkpoints/<job>/<task>/<store>/<generation, 20 digits>.json   the file checkpoint log

Checkpoint ids are ``<ms since the epoch, 13 digits>-<8 hex>``: unique, and they sort by creation time.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from blobstate.errors import ForeignObjectError
from blobstate.model.records import StoreKey

DEFAULT_TTL_MS = 24 * 3600 * 1000  # leases and tags expire after a day unless the commit completes
DEFAULT_RETAIN = 3  # checkpoints a store keeps
DEFAULT_CHUNK_SIZE = 64 << 20  # bytes per blob; larger files are split


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


def new_checkpoint_id() -> str:
    """``<ms since epoch>-<8 hex>``: unique, and sorts by creation time."""
    return f"{now_ms():013d}-{_clock.token()[:8]}"


def new_blob_id(key: StoreKey) -> str:
    """A fresh blob id under ``key``'s ``blobs/`` folder."""
    return f"{key.prefix}/blobs/{_clock.token()}"


def new_index_id(key: StoreKey) -> str:
    """A fresh snapshot index id under ``key``'s ``indexes/`` folder."""
    return f"{key.prefix}/indexes/{_clock.token()}.json"


def owned(key: StoreKey, ids: Iterable[str], *, what: str) -> list[str]:
    """``ids`` when every one is a blob or index id of ``key``'s own prefix; ``ForeignObjectError`` (exit 3)
    naming the first stranger otherwise. Every id read back from a repository, a log or a journal passes here
    before anything is deleted on its word."""
    ids = list(ids)
    for blob_id in ids:
        if not (key.owns_blob(blob_id) or key.owns_index(blob_id)):
            shown = "".join(c if c.isprintable() else "?" for c in blob_id[:200])
            raise ForeignObjectError(f"{what} names {shown!r}, which is not an object of store {key}: refused")
    return ids
