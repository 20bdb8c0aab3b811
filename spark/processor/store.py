"""The key-value view the processor runtime reads and writes, and where each kind of record lives in it.

One partition's RocksDB holds everything (its default column family, as the changelog and the restore know it):
each kind of record and each state variable gets its own key space, a short prefix of bytes keys. A prefix, not a
RocksDB column family: the changelog of a batch, its replay, the snapshot and every restore carry scalar keys of
one column family today, and a prefix gives the same isolation (a variable's records are one contiguous range,
scanned or dropped alone) with no change to any of them. Variables are numbered (``vid``, 2 bytes) in the metadata
document, so a renamed or re-created variable never meets the old one's records.

    0x00 "processor-metadata"              the metadata document (JSON): variables, schemas, TTLs, time mode
    0x10 vid gkey                          a value state's value, or a list state's whole list
    0x11 vid gkey ukey                     one map entry
    0x20 vid expiry gkey [ukey]            TTL index (empty value): what expires when, in time order
    0x30 mode gkey ts                      timers by key (``listTimers``)
    0x31 mode ts gkey                      timers in time order (which fire)

``Store`` wraps a batch's ``blobstate.model.changelog.StagedWrites`` (reads see the batch's writes; nothing reaches
RocksDB until the batch is applied; the writes are its changelog) or, read only, an open ``rocksdict.Rdict``. Range
scans merge RocksDB's range with the batch's own writes in it: the store remembers the keys written in each scanned
range (a "group", the key space's prefix) so the merge never walks the whole batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from blobstate.model.changelog import StagedWrites
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.codec import from_u64, u64

META_KEY = b"\x00processor-metadata"
VALUES, MAP, TTL_INDEX, TIMERS_BY_KEY, TIMERS_BY_TIME = 0x10, 0x11, 0x20, 0x30, 0x31
PROCESSING, EVENT = b"P", b"E"


def space(kind: int, vid: int) -> bytes:
    """The prefix of variable ``vid``'s records of ``kind`` (``VALUES``, ``MAP``, ``TTL_INDEX``)."""
    return bytes((kind,)) + vid.to_bytes(2, "big")


def after(prefix: bytes) -> bytes:
    """The smallest key above every key that starts with ``prefix``."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\xff" * (len(prefix) + 9)
    return stripped[:-1] + bytes((stripped[-1] + 1,))


class Store:
    """Bytes keys and values over a batch's ``StagedWrites`` (read-write) or an ``Rdict`` (read only)."""

    def __init__(self, target: Any) -> None:
        if isinstance(target, StagedWrites):
            self._view: StagedWrites | None = target
            self._db = target.db
        else:
            self._view = None
            self._db = target
        self._reader = self._view if self._view is not None else self._db
        self._touched: dict[bytes, set[bytes]] = {}

    @property
    def writable(self) -> bool:
        return self._view is not None

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key`` (this batch's write first), or None."""
        value = self._reader.get(key, None)
        return None if value is None else bytes(value) if not isinstance(value, bytes) else value

    def put(self, key: bytes, value: bytes | str, group: bytes | None = None) -> None:
        """Stage ``key = value``; ``group``: the prefix scans of this key's range use (None: never scanned)."""
        view = self._writable()
        view.put(key, value)
        if group is not None:
            self._touched.setdefault(group, set()).add(key)

    def delete(self, key: bytes, group: bytes | None = None) -> None:
        """Stage the deletion of ``key`` (absent is fine)."""
        view = self._writable()
        view.delete(key)
        if group is not None:
            self._touched.setdefault(group, set()).add(key)

    def _writable(self) -> StagedWrites:
        if self._view is None:
            raise StateVariableError("this state store is open read only (state as data): it takes no writes")
        return self._view

    def scan(self, group: bytes, lo: bytes | None = None, hi: bytes | None = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` in key order for ``lo <= key < hi`` (defaults: the whole ``group``), RocksDB's records
        merged with this batch's writes in ``group``. Takes a snapshot of the batch's writes in the range when
        called: writes made while iterating are not seen (as a RocksDB iterator)."""
        lo = group if lo is None else lo
        hi = after(group) if hi is None else hi
        touched = self._touched.get(group)
        mine = sorted(k for k in touched if lo <= k < hi) if touched else []
        staged = [(k, self.get(k)) for k in mine]
        i = 0
        for key, value in self._db_range(lo, hi):
            while i < len(staged) and staged[i][0] < key:
                if staged[i][1] is not None:
                    yield staged[i]  # type: ignore[misc]
                i += 1
            if i < len(staged) and staged[i][0] == key:
                if staged[i][1] is not None:
                    yield staged[i]  # type: ignore[misc]
                i += 1
                continue
            yield key, value
        for key, mine_value in staged[i:]:
            if mine_value is not None:
                yield key, mine_value

    def _db_range(self, lo: bytes, hi: bytes) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._db.items(from_key=lo):
            if not isinstance(key, bytes) or key >= hi:
                return
            yield key, value


def time_entries(store: Store, group: bytes, upto_ms: int | None = None) -> list[tuple[int, bytes]]:
    """``(time, rest)`` of the entries ``group + u64(time) + rest`` of a time-ordered index (the TTL index, timers
    by time), in time order, up to ``upto_ms`` inclusive (None: all); a snapshot."""
    start = len(group)
    hi = None if upto_ms is None else group + u64(upto_ms + 1)
    return [(from_u64(key, start), key[start + 8:]) for key, _ in store.scan(group, group, hi)]


def earliest_time(store: Store, group: bytes) -> int | None:
    """The first time of a time-ordered index, None when it is empty."""
    first = next(store.scan(group), None)
    return None if first is None else from_u64(first[0], len(group))
