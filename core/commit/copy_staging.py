"""Where ``blobstate copy`` keeps a file's chunks between their download and their upload (issue 39 case 10).

A file's chunks are all read from the source and checked together (its CRC32C covers them all) before any is put
at the target, so a file larger than one chunk waits on this host's disk. They wait in a *held* directory of the
target store's work directory (``blobstate.local.held``: ``copy-staging-XXXX``, its lock taken before it exists,
removed at the end): a copy killed meanwhile leaves it behind unheld, and the next session of that work directory
(a rerun, ``blobstate recover``, a backup of the store: ``blobstate.commit.session.StoreSession``) sweeps it.

From an encrypted source nothing waits there in the clear: each chunk is written through AES-256-CTR under a key made
for this staging and held only in this process's memory (``codec.cipher.keystream_at``), so what a killed copy
leaves is noise to anyone, and read back into memory (bounded by ``budget`` bytes at once) for its upload.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO

from blobstate.local import held
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import FileRange

PIECE = 1 << 20  # bytes read back at a time


class _SealedFile:
    """A write-only file over ``fh`` that stores what it is given through the keystream of ``key`` and ``iv``;
    ``seek`` to an earlier offset (a retried download) positions the keystream there too."""

    def __init__(self, fh: BinaryIO, key: bytes, iv: bytes) -> None:
        from blobstate.codec.cipher import keystream_at

        self._fh, self._key, self._iv, self._at = fh, key, iv, keystream_at
        self._stream = keystream_at(key, iv, 0)

    def write(self, data: Any) -> int:
        self._fh.write(self._stream.update(bytes(data)))
        return len(data)

    def tell(self) -> int:
        return self._fh.tell()

    def seek(self, pos: int, whence: int = 0) -> int:
        if whence != 0:
            raise OSError("a staged chunk seeks to an absolute offset only")
        self._fh.seek(pos)
        self._stream = self._at(self._key, self._iv, pos)
        return pos

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def flush(self) -> None:
        self._fh.flush()


class StagedChunk:
    """One chunk waiting in a ``Staging``: ``path`` (its file), ``size`` (bytes written, set by the writer)."""

    def __init__(self, staging: Staging, path: str) -> None:
        self.staging = staging
        self.path = path
        self.iv = os.urandom(16)
        self.size = 0

    @contextlib.contextmanager
    def writer(self) -> Iterator[Any]:
        """A file object to write the chunk's plain bytes into (sealed when the staging is); ``size`` is where the
        last write ended."""
        with open(self.path, "w+b") as fh:
            key = self.staging.key
            yield fh if key is None else _SealedFile(fh, key, self.iv)
            self.size = fh.tell()

    def remove(self) -> None:
        """Delete the chunk's file (idempotent)."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)

    def pieces(self) -> Iterator[bytes]:
        """The chunk's plain bytes, read back in pieces."""
        key = self.staging.key
        stream = None
        if key is not None:
            from blobstate.codec.cipher import keystream_at

            stream = keystream_at(key, self.iv, 0)
        with open(self.path, "rb") as fh:
            while piece := fh.read(PIECE):
                yield piece if stream is None else stream.update(piece)

    @contextlib.contextmanager
    def source(self) -> Iterator[FileRange | bytes]:
        """What a put of the chunk reads: the file itself, or (sealed) its plain bytes in memory, within the
        staging's budget while the block runs."""
        if self.staging.key is None:
            yield FileRange(self.path, 0, self.size)
            return
        with self.staging.budget.reserve(self.size):
            yield b"".join(self.pieces())


class Staging:
    """A held staging directory in ``work_dir`` for one copy run; a context manager (the directory and what is in it
    are removed at the end). ``sealed``: the source is encrypted (see the module docstring); ``budget``: bytes of
    sealed chunks held in memory for their uploads at once."""

    def __init__(self, work_dir: str, *, sealed: bool, budget: int = 256 << 20) -> None:
        self.work_dir = work_dir
        self.key = os.urandom(32) if sealed else None
        self.budget = ByteBudget(budget)
        self._held: contextlib.ExitStack | None = None
        self.path = ""

    def __enter__(self) -> Staging:
        stack = contextlib.ExitStack()
        self.path = stack.enter_context(held.new_held_dir(self.work_dir, held.COPY_STAGING))
        self._held = stack
        return self

    def __exit__(self, *exc: object) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None
        self.key = None

    def chunk(self) -> StagedChunk:
        """A new chunk file in the staging directory."""
        return StagedChunk(self, os.path.join(self.path, uuid.uuid4().hex))
