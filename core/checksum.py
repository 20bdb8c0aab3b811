"""CRC32C (Castagnoli) of files and streams through google-crc32c, and a cache of file checksums.

The cache is keyed by ``(device, inode, size, mtime_ns)``: RocksDB SSTs are immutable and a local checkpoint
hard-links them, so an unchanged SST is read once, however many checkpoints share it. Name and size alone never
decide that a file is unchanged.
"""

from __future__ import annotations

import json
import os
import threading
from typing import BinaryIO

import google_crc32c

BUFFER_SIZE = 1 << 20  # 1 MiB reads: streaming, never whole files in memory


def crc32c_bytes(data: bytes) -> int:
    """CRC32C of ``data`` as an unsigned 32-bit integer."""
    return google_crc32c.value(data)


def crc32c_file(path: str, offset: int = 0, length: int | None = None) -> int:
    """CRC32C of ``length`` bytes of ``path`` from ``offset`` (to the end when ``length`` is None)."""
    crc = 0
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        remaining = length if length is not None else -1
        while remaining != 0:
            data = fh.read(BUFFER_SIZE if remaining < 0 else min(BUFFER_SIZE, remaining))
            if not data:
                break
            crc = google_crc32c.extend(crc, data)
            if remaining > 0:
                remaining -= len(data)
    return crc


class Crc32cSink:
    """A write-only file object that keeps the CRC32C and byte count of what passes, forwarding to ``fh`` (or
    discarding, without one).

    ``mark()`` remembers the position and checksum at the start of a chunk; ``seek()`` back to that position (what
    a retried download does) restores the checksum too, so a retry never corrupts it. Any other seek is refused.
    """

    def __init__(self, fh: BinaryIO | None = None) -> None:
        self._fh = fh
        self.crc32c = 0
        self.size = 0
        self._mark = (self.tell(), 0, 0)

    def mark(self) -> None:
        self._mark = (self.tell(), self.crc32c, self.size)

    def write(self, data: bytes) -> int:
        self.crc32c = google_crc32c.extend(self.crc32c, bytes(data))
        self.size += len(data)
        if self._fh is not None:
            self._fh.write(data)
        return len(data)

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._fh.tell() if self._fh is not None else self.size

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0 or pos != self._mark[0]:
            raise OSError("Crc32cSink can only seek back to its mark")
        if self._fh is not None:
            self._fh.seek(pos)
        _, self.crc32c, self.size = self._mark
        return pos

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()


def stat_key(st: os.stat_result) -> str:
    """The cache key of a file: device, inode, size and mtime in ns."""
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


class ChecksumCache:
    """CRC32C of local files by ``(device, inode, size, mtime_ns)``, optionally persisted as JSON at ``path``.

    Thread-safe. ``hits`` and ``misses`` count lookups (the tests check that an unchanged SST is not re-read).
    """

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._entries: dict[str, int] = {}
        self._lock = threading.Lock()
        self._dirty = False
        self.hits = 0
        self.misses = 0
        if path and os.path.exists(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    raw = json.load(fh)
                self._entries = {str(k): int(v) for k, v in raw.items()}
            except (OSError, ValueError, AttributeError):
                self._entries = {}  # a damaged cache only costs re-reads

    def crc32c(self, path: str, *, trust_cache: bool = True) -> tuple[int, int]:
        """``(size in bytes, CRC32C)`` of the file at ``path``, read only on a cache miss (or always, without
        ``trust_cache``: for files that change in place)."""
        st = os.stat(path)
        key = stat_key(st)
        with self._lock:
            cached = self._entries.get(key) if trust_cache else None
            if cached is not None:
                self.hits += 1
                return st.st_size, cached
        value = crc32c_file(path)
        if stat_key(os.stat(path)) == key:  # unchanged while we read it: safe to remember
            self.remember_key(key, value)
        with self._lock:
            self.misses += 1
        return st.st_size, value

    def remember(self, path: str, crc: int) -> None:
        """Record the known CRC32C of ``path`` (a file just restored and verified)."""
        self.remember_key(stat_key(os.stat(path)), crc)

    def remember_key(self, key: str, crc: int) -> None:
        with self._lock:
            if self._entries.get(key) != crc:
                self._entries[key] = crc
                self._dirty = True

    def retain(self, paths: list[str]) -> None:
        """Forget every entry but those of ``paths`` (that exist), so the cache does not grow without bound."""
        keep = set()
        for p in paths:
            try:
                keep.add(stat_key(os.stat(p)))
            except OSError:
                continue
        with self._lock:
            before = len(self._entries)
            self._entries = {k: v for k, v in self._entries.items() if k in keep}
            self._dirty = self._dirty or len(self._entries) != before

    def save(self) -> None:
        """Write the cache atomically (temp file + rename); no-op without a path or changes."""
        if not self.path or not self._dirty:
            return
        with self._lock:
            data = json.dumps(self._entries)
            self._dirty = False
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        tmp = f"{self.path}.tmp-{os.getpid()}-{threading.get_ident()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, self.path)
