"""Timers with Spark's semantics (``TimerStateImpl``), in two indexes of the partition's store.

A timer is a (grouping key, expiry ms) pair of one time mode. ``by key`` (``TIMERS_BY_KEY mode gkey ts``) answers
``listTimers`` for a key with one prefix scan; ``by time`` (``TIMERS_BY_TIME mode ts gkey``) holds the same timers
in time order, so the timers due in a batch are one range scan from the start of the index: processing-time timers
fire when the batch's processing time reaches them, event-time timers when the watermark does
(``expiry <= threshold``, as Spark's ``getExpiredTimers``). Registering a registered timer, or deleting an absent
one, changes nothing (Spark logs a warning). Both indexes are written in the same staged batch.
"""

from __future__ import annotations

from blobstate.spark.processor.codec import from_u64, u64
from blobstate.spark.processor.store import (
    EVENT,
    PROCESSING,
    TIMERS_BY_KEY,
    TIMERS_BY_TIME,
    Store,
    earliest_time,
    time_entries,
)

MODES = {"ProcessingTime": PROCESSING, "EventTime": EVENT}


class Timers:
    """The timers of one time mode (``"ProcessingTime"`` or ``"EventTime"``) in ``store``."""

    def __init__(self, store: Store, time_mode: str) -> None:
        self.store = store
        mode = MODES[time_mode]
        self.by_key = bytes((TIMERS_BY_KEY,)) + mode
        self.by_time = bytes((TIMERS_BY_TIME,)) + mode

    def exists(self, gkey: bytes, ts: int) -> bool:
        return self.store.get(self.by_key + gkey + u64(ts)) is not None

    def register(self, gkey: bytes, ts: int) -> bool:
        """Register ``(gkey, ts)``; False when it already was."""
        if self.exists(gkey, ts):
            return False
        self.store.put(self.by_key + gkey + u64(ts), b"", self.by_key + gkey)
        self.store.put(self.by_time + u64(ts) + gkey, b"", self.by_time)
        return True

    def delete(self, gkey: bytes, ts: int) -> bool:
        """Delete ``(gkey, ts)``; False when it was not registered."""
        if not self.exists(gkey, ts):
            return False
        self.store.delete(self.by_key + gkey + u64(ts), self.by_key + gkey)
        self.store.delete(self.by_time + u64(ts) + gkey, self.by_time)
        return True

    def of_key(self, gkey: bytes) -> list[int]:
        """The expiry times registered for ``gkey``, ascending."""
        group = self.by_key + gkey
        return [from_u64(key, len(key) - 8) for key, _ in self.store.scan(group)]

    def due(self, threshold_ms: int) -> list[tuple[int, bytes]]:
        """``(ts, gkey)`` of every timer with ``ts <= threshold_ms``, in time order (a snapshot)."""
        return time_entries(self.store, self.by_time, threshold_ms)

    def earliest(self) -> int | None:
        """The earliest registered timer's time (ms), None when none is."""
        return earliest_time(self.store, self.by_time)

    def all(self) -> list[tuple[int, bytes]]:
        """Every ``(ts, gkey)``, in time order (state as data)."""
        return time_entries(self.store, self.by_time)
