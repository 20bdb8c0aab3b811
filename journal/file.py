"""The journal file: append-only, one file per store, each record framed with its length and CRC32C.

Layout: an 8-byte magic ``BSJRNL01``, then records ``[u32 length][u32 CRC32C of payload][payload: UTF-8 JSON]``
(big-endian). Every record is written with one ``os.write`` before the event is reported, so it survives a killed
process; ``fsync`` runs at the commit point and at step boundaries (``sync=True``), so it survives a power loss.
A torn or corrupt tail (cut mid-record, a flipped byte) is detected, reported and truncated on open, never fatal.

A write that fails or comes up short (disk full) is cut back off the file and the journal stops accepting
appends (``JournalWriteError``), so a torn record is only ever the last thing in the file, never followed by the
records of other threads. Telling a torn tail from damage in the middle scans forward for a valid record; the scan
is linear in the file's size (candidates are found by the record body's fixed start, and the bytes checksummed
are bounded), so a crafted journal cannot make it quadratic.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import threading
from dataclasses import dataclass

from blobstate.errors import CorruptJournalError, JournalWriteError
from blobstate.journal.events import Event, event_from_dict, event_to_dict
from blobstate.local.checksum import crc32c_bytes
from blobstate.local.files import fsync_dir

log = logging.getLogger(__name__)

MAGIC = b"BSJRNL01"
HEADER = struct.Struct(">II")
MAX_RECORD = 64 << 20  # bytes; a larger length field is a corrupt header
BODY_START = b'{"type":'  # every record's payload starts with this (``encode``)


@dataclass(frozen=True)
class TornTail:
    """The unreadable end of a journal: it starts at byte ``offset`` and is ``length`` bytes long."""

    offset: int
    length: int
    reason: str


@dataclass(frozen=True)
class JournalRead:
    """What a journal holds: the good events in order, the byte length they span, and the torn tail if any."""

    events: tuple[Event, ...]
    good_length: int
    torn: TornTail | None


def _valid_record_at(data: bytes, pos: int) -> int:
    """The length of a whole, checksummed record at ``pos``, or 0 when there is none."""
    if pos < 0 or len(data) - pos < HEADER.size:
        return 0
    length, crc = HEADER.unpack_from(data, pos)
    end = pos + HEADER.size + length
    if length < len(BODY_START) or end > len(data) or data[end - 1:end] != b"}":
        return 0
    return length if crc32c_bytes(data[pos + HEADER.size: end]) == crc else 0


def _valid_record_after(data: bytes, pos: int) -> bool:
    """True when a whole record starts anywhere after ``pos``. Linear: a candidate is a place where a record body
    starts (``BODY_START``), and at most ``4 x len(data)`` bytes are checksummed in all; past that budget the
    answer is True (the conservative one: never truncate what might be good records)."""
    budget = 4 * len(data)
    at = data.find(BODY_START, pos + 1 + HEADER.size)
    while at != -1:
        start = at - HEADER.size
        length = HEADER.unpack_from(data, start)[0]
        if length <= len(data) - at:
            budget -= length
            if budget < 0:
                return True
            if _valid_record_at(data, start):
                return True
        at = data.find(BODY_START, at + 1)
    return False


def _damage(data: bytes, events: list[Event], pos: int, reason: str, strict: bool) -> JournalRead:
    """A bad record at ``pos``: a torn tail if no valid record follows it, mid-file corruption otherwise."""
    if strict and _valid_record_after(data, pos):
        raise CorruptJournalError(
            f"journal record at byte {pos} is damaged ({reason}) and valid records follow it: this is not a torn "
            "tail, and truncating would lose events. Inspect it with `blobstate journal show`; moving the file "
            "aside starts a fresh journal (blobs of unfinished commits are then reclaimed by their TTL and gc)."
        )
    return JournalRead(tuple(events), pos, TornTail(pos, len(data) - pos, reason))


def decode(data: bytes, *, strict: bool = True) -> JournalRead:
    """Parse journal bytes. Damage at the end (a cut, a flipped byte in the last records) is the torn tail: never
    an error. A damaged record followed by valid ones raises ``CorruptJournalError`` (with ``strict``; without,
    it is reported as the start of the tail, for ``journal show``). A record that frames correctly but holds an
    unknown event raises ``CorruptJournalError``."""
    if not data:
        return JournalRead((), 0, None)
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        if MAGIC.startswith(data[: len(MAGIC)]):
            return JournalRead((), 0, TornTail(0, len(data), "cut inside the file header"))
        raise CorruptJournalError("not a blobstate journal (bad magic)")
    events: list[Event] = []
    pos = len(MAGIC)
    while pos < len(data):
        if len(data) - pos < HEADER.size:
            return _damage(data, events, pos, "cut inside a record header", strict)
        length, crc = HEADER.unpack_from(data, pos)
        if length > MAX_RECORD:
            return _damage(data, events, pos, f"bad record length {length}", strict)
        body = data[pos + HEADER.size: pos + HEADER.size + length]
        if len(body) < length:
            return _damage(data, events, pos, "cut inside a record", strict)
        if crc32c_bytes(body) != crc:
            return _damage(data, events, pos, "record checksum mismatch", strict)
        try:
            doc = json.loads(body)
        except ValueError:
            return _damage(data, events, pos, "record is not JSON", strict)
        events.append(event_from_dict(doc))
        pos += HEADER.size + length
    return JournalRead(tuple(events), pos, None)


def encode(event: Event) -> bytes:
    body = json.dumps(event_to_dict(event), separators=(",", ":")).encode()
    return HEADER.pack(len(body), crc32c_bytes(body)) + body


class Journal:
    """The journal of one store at ``path``. Thread-safe appends; ``open()`` before ``append``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._length = 0  # bytes of whole records in the file (where a failed write is cut back to)
        self._failed: BaseException | None = None
        self.last_torn: TornTail | None = None

    def read(self, *, strict: bool = True) -> JournalRead:
        """Read without changing the file (``blobstate journal show``, ``recover --dry-run``); see ``decode``."""
        try:
            with open(self.path, "rb") as fh:
                return decode(fh.read(), strict=strict)
        except FileNotFoundError:
            return JournalRead((), 0, None)

    def open(self) -> JournalRead:
        """Read, truncate a torn tail (reported as a warning), and open for appending."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        result = self.read()
        self.last_torn = result.torn
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if result.torn is not None:
            log.warning("journal %s: ignoring a torn tail of %d bytes at offset %d (%s)", self.path,
                        result.torn.length, result.torn.offset, result.torn.reason)
        size = os.fstat(fd).st_size
        keep = max(result.good_length, len(MAGIC)) if result.good_length else 0
        if size != keep:
            os.ftruncate(fd, keep)
        if keep == 0:
            os.pwrite(fd, MAGIC, 0)
        os.fsync(fd)
        os.close(fd)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        self._length = os.fstat(self._fd).st_size
        self._failed = None
        return result

    def append(self, event: Event, *, sync: bool = False) -> None:
        """Append one event (one ``write`` call); ``sync`` makes it and all before it durable with fsync.

        Raises ``JournalWriteError`` when the write fails or is short (the partial record is cut off again) and
        for every append after that.
        """
        record = encode(event)
        with self._lock:
            if self._fd is None:
                raise RuntimeError("journal is not open")
            if self._failed is not None:
                raise JournalWriteError(f"journal {self.path} accepts no more records after a failed write: "
                                        f"{self._failed}")
            try:
                written = os.write(self._fd, record)
                if written != len(record):
                    raise OSError(f"short write: {written} of {len(record)} bytes")
                if sync:
                    os.fsync(self._fd)
            except OSError as exc:
                self._failed = exc
                try:
                    os.ftruncate(self._fd, self._length)  # no torn record between whole ones, ever
                except OSError:
                    pass  # the torn record stays the last thing in the file: a torn tail, cut on next open
                raise JournalWriteError(f"cannot write the journal {self.path}: {exc}") from exc
            self._length += len(record)

    def sync(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def compact(self, keep: list[Event]) -> None:
        """Rewrite the journal with only ``keep`` (the events of commits still open), atomically."""
        tmp = f"{self.path}.compact"
        try:
            with open(tmp, "wb") as fh:
                fh.write(MAGIC)
                for event in keep:
                    fh.write(encode(event))
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise JournalWriteError(f"cannot compact the journal {self.path}: {exc}") from exc
        with self._lock:
            os.replace(tmp, self.path)
            fsync_dir(os.path.dirname(self.path) or ".")
            if self._fd is not None:
                os.close(self._fd)
                self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
                self._length = os.fstat(self._fd).st_size
                self._failed = None

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
