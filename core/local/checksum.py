"""Checksums of files and streams: CRC32C (Castagnoli, google-crc32c) for every file, XXH3-128 (xxhash) as well for
files that can change in place, and a cache of the CRC32C of immutable files.

CRC32C is linear: four chosen bytes make a collision, and by accident one in 2**32 rewrites keeps it. It is enough
for files that never change under their name (RocksDB SSTs, where it guards against damage); a file that is
rewritten in place (a dir-store file, a RocksDB ``MANIFEST``) is compared by a 128-bit content hash too, read
every time, never cached.

The cache is keyed by ``(device, inode, size, mtime_ns)`` and, for what a restore keeps, ``ctime_ns`` too (the stat
fields restic and git trust; see ``ChecksumCache``): RocksDB SSTs are immutable and a local checkpoint hard-links
them, so an unchanged SST is read once by backups, however many checkpoints share it; a byte changed in place with
its mtime put back still moves ctime, so a restore reads a damaged file again. Name and size alone never decide
that a file is unchanged.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any, BinaryIO

import google_crc32c
import msgspec
import xxhash

from blobstate.errors import ChecksumMismatch
from blobstate.local.files import replace_file

BUFFER_SIZE = 1 << 20  # 1 MiB reads: streaming, never whole files in memory
CONTENT_HASH = "xxh3-128"  # the algorithm name recorded in snapshot indexes: ``xxh3-128:<32 hex>``


# A msgspec Struct, not a dataclass: created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class FileDigest(msgspec.Struct, frozen=True):
    """What a file holds: size in bytes, CRC32C (unsigned), and its XXH3-128 as ``xxh3-128:<32 hex>`` (or None
    when not computed: immutable files)."""

    size: int
    crc32c: int
    content_hash: str | None = None


def content_hash_of(hasher: Any) -> str:
    """The recorded form of an ``xxhash.xxh3_128`` state: ``xxh3-128:<32 lowercase hex>``."""
    return f"{CONTENT_HASH}:{hasher.hexdigest()}"


def digest_file(path: str, *, content_hash: bool = True) -> FileDigest:
    """Size, CRC32C and (with ``content_hash``) XXH3-128 of the file at ``path``, in one streaming pass."""
    crc = 0
    size = 0
    hasher = xxhash.xxh3_128() if content_hash else None
    with open(path, "rb", buffering=0) as fh:
        while data := fh.read(BUFFER_SIZE):
            crc = google_crc32c.extend(crc, data)
            if hasher is not None:
                hasher.update(data)
            size += len(data)
    return FileDigest(size, crc, content_hash_of(hasher) if hasher is not None else None)


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
    """A write-only file object that keeps the CRC32C (and, with ``content_hash``, the XXH3-128) and byte count of
    what passes, forwarding to ``fh`` (or discarding, without one).

    ``mark(limit)`` remembers the position and checksums at the start of a chunk; with ``limit`` (bytes) a write
    that would take the chunk past it raises ``ChecksumMismatch`` before anything is written, so a blob larger
    than the index declares never fills the disk. ``seek()`` back to the mark (what a retried download does)
    restores the checksums too, so a retry never corrupts them. Any other seek is refused.
    """

    def __init__(self, fh: BinaryIO | None = None, *, content_hash: bool = False) -> None:
        self._fh = fh
        self.crc32c = 0
        self.size = 0
        self._hasher = xxhash.xxh3_128() if content_hash else None
        self._limit: int | None = None
        self._mark: tuple[int, int, int, Any] = (self.tell(), 0, 0, self._copy_hasher())

    def _copy_hasher(self) -> Any:
        return self._hasher.copy() if self._hasher is not None else None

    @property
    def content_hash(self) -> str | None:
        """``xxh3-128:<hex>`` of what passed, or None without ``content_hash``."""
        return content_hash_of(self._hasher) if self._hasher is not None else None

    def mark(self, limit: int | None = None) -> None:
        self._mark = (self.tell(), self.crc32c, self.size, self._copy_hasher())
        self._limit = limit

    def write(self, data: bytes) -> int:
        data = bytes(data)
        if self._limit is not None and self.size - self._mark[2] + len(data) > self._limit:
            raise ChecksumMismatch(f"a blob holds more than the {self._limit} bytes the index declares")
        self.crc32c = google_crc32c.extend(self.crc32c, data)
        if self._hasher is not None:
            self._hasher.update(data)
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
        _, self.crc32c, self.size, hasher = self._mark
        self._hasher = hasher.copy() if hasher is not None else None
        return pos

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()


def stat_key(st: os.stat_result, *, ctime: bool = True) -> str:
    """The cache key of a file: device, inode, size, mtime in ns and (with ``ctime``) ctime in ns, which moves on
    any change, even one whose mtime was put back."""
    base = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"
    return f"{base}:{st.st_ctime_ns}" if ctime else base


class ChecksumCache:
    """CRC32C of local files by stat key, optionally persisted as JSON at ``path``.

    Two kinds of key. A restore trusts a file it keeps, or hard-links from a local checkpoint, only by the strict
    key with ctime (restic's and git's rule): a byte changed in place with its mtime put back moves ctime, so the
    file is read again. A backup scanning an immutable file of its own local checkpoint uses the key without ctime
    (``strict=False``), because RocksDB's checkpoint hard-links every SST again, which moves ctime each time: there
    a stale entry can only make the commit reuse the previous snapshot's blob for that name, verified when it was
    uploaded; it never puts damaged bytes into a snapshot.

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
            except (OSError, ValueError, AttributeError, TypeError):
                self._entries = {}  # a damaged cache only costs re-reads

    def crc32c(self, path: str, *, trust_cache: bool = True, strict: bool = True) -> tuple[int, int]:
        """``(size in bytes, CRC32C)`` of the file at ``path``, read only on a cache miss (or always, without
        ``trust_cache``); ``strict``: the key includes ctime (see the class docstring)."""
        st = os.stat(path)
        key = stat_key(st, ctime=strict)
        with self._lock:
            cached = self._entries.get(key) if trust_cache else None
            if cached is not None:
                self.hits += 1
                return st.st_size, cached
        value = crc32c_file(path)
        self._remember_if_unchanged(path, st, value)
        with self._lock:
            self.misses += 1
        return st.st_size, value

    def digest(self, path: str, *, mutable: bool) -> FileDigest:
        """The ``FileDigest`` of ``path`` for a backup scan: a file that can change in place (``mutable``) is read
        in full, CRC32C and XXH3-128, never from the cache; an immutable one gets its CRC32C from the cache when
        the key without ctime matches."""
        if not mutable:
            size, crc = self.crc32c(path, strict=False)
            return FileDigest(size, crc)
        st = os.stat(path)
        digest = digest_file(path, content_hash=True)
        self._remember_if_unchanged(path, st, digest.crc32c)
        with self._lock:
            self.misses += 1
        return digest

    def _remember_if_unchanged(self, path: str, before: os.stat_result, crc: int) -> None:
        after = os.stat(path)
        if stat_key(after) == stat_key(before):  # unchanged while we read it: safe to remember
            self._remember_stat(after, crc)

    def remember(self, path: str, crc: int) -> None:
        """Record the known CRC32C of ``path`` (a file just restored and verified), under both keys."""
        self._remember_stat(os.stat(path), crc)

    def _remember_stat(self, st: os.stat_result, crc: int) -> None:
        with self._lock:
            for key in (stat_key(st), stat_key(st, ctime=False)):
                if self._entries.get(key) != crc:
                    self._entries[key] = crc
                    self._dirty = True

    def retain(self, paths: list[str]) -> None:
        """Forget every entry but those of ``paths`` (that exist), so the cache does not grow without bound."""
        keep = set()
        for p in paths:
            try:
                st = os.stat(p)
            except OSError:
                continue
            keep.update((stat_key(st), stat_key(st, ctime=False)))
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
        replace_file(self.path, data)
