"""State TTL with Spark's semantics, and the expiry index that removes expired values without scanning the store.

Spark (``StateTTL``, ``TTLState``): a value written in a batch whose processing time (the batch timestamp) is ``t``
expires at ``t + ttlDurationMs``; it is expired once a batch's processing time reaches that instant
(``processing_time >= expiry``) and is never returned from then on; at the end of the batch the values the index
says are expired are removed. Every write of a value moves its index entry in the same staged batch (the old entry
deleted, the new one put), so the index never names a value it does not hold and the sweep reads only the range
``[-inf, processing_time]`` of the index: the entries due, in time order, never the store's other keys.

Index entries are ``TTL_INDEX vid expiry element-key`` with an empty value; the element key is the grouping key
(value and list state: a list's entry holds the earliest expiry of its elements) or grouping key + user key (map).
"""

from __future__ import annotations

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.codec import u64
from blobstate.spark.processor.store import TTL_INDEX, Store, earliest_time, space, time_entries


def ttl_duration(ttl_ms: int | None, *, name: str, time_mode: str) -> int | None:
    """The TTL of a variable declared with ``ttlDurationMs`` (None or 0: none, as Spark's ``TTLConfig.NONE``);
    ``StateVariableError`` for a negative one or a TTL outside the ProcessingTime time mode (as Spark refuses)."""
    if ttl_ms is None or ttl_ms == 0:
        return None
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise StateVariableError(f"state variable {name!r}: ttlDurationMs must be an int of milliseconds")
    if ttl_ms < 0:
        raise StateVariableError(f"state variable {name!r}: ttlDurationMs must be positive, got {ttl_ms}")
    if time_mode != "ProcessingTime":
        raise StateVariableError(f"state variable {name!r}: a TTL needs timeMode='ProcessingTime' (Spark refuses "
                                 f"TTL in time mode {time_mode!r})")
    return ttl_ms


def expiry(processing_time_ms: int, ttl_ms: int | None) -> int | None:
    """When a value written now expires (ms), None without a TTL."""
    return None if ttl_ms is None else processing_time_ms + ttl_ms


def expired(expiry_ms: int | None, processing_time_ms: int) -> bool:
    """Whether a value with this expiry is expired in a batch at ``processing_time_ms`` (Spark's ``isExpired``)."""
    return expiry_ms is not None and processing_time_ms >= expiry_ms


class TtlIndex:
    """One variable's expiry index in ``store``."""

    def __init__(self, store: Store, vid: int) -> None:
        self.store = store
        self.group = space(TTL_INDEX, vid)

    def move(self, element: bytes, old: int | None, new: int | None) -> None:
        """Stage ``element``'s expiry change from ``old`` to ``new`` (either None: no entry)."""
        if old == new:
            return
        if old is not None:
            self.store.delete(self.group + u64(old) + element, self.group)
        if new is not None:
            self.store.put(self.group + u64(new) + element, b"", self.group)

    def due(self, processing_time_ms: int) -> list[tuple[int, bytes]]:
        """``(expiry, element)`` of every entry with ``expiry <= processing_time_ms``, oldest first (a snapshot:
        the sweep then changes the index freely)."""
        return time_entries(self.store, self.group, processing_time_ms)

    def earliest(self) -> int | None:
        """The earliest expiry in the index (ms), None when it is empty."""
        return earliest_time(self.store, self.group)

    def entries(self) -> list[tuple[int, bytes]]:
        """Every ``(expiry, element)`` of the index (state as data, tests)."""
        return time_entries(self.store, self.group)
