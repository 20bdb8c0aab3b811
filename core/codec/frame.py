"""The stored form of one repository object (a data blob, a snapshot index, a changelog), and its streaming
decoder.

Three forms, told apart without guessing:

- **plain**: the bytes as written. Every object written before compression existed, and the data blobs an index
  entry records without a ``codec``.
- **zstd**: one zstd frame (content size and checksum inside) of the plain bytes. A data blob whose index entry
  says ``codec: "zstd"`` (the index decides, so a state file that happens to start with zstd's magic is never
  misread), and an index or changelog of an unencrypted repository (these are told from their plain form by
  zstd's magic: an index is JSON and starts with ``{``, a changelog with ``BSCHLOG1``).
- **encrypted** (every object of an encrypted repository): ``MAGIC flags nonce ciphertext tag`` (4 + 1 + 12 + n
  + 16 bytes), AES-256-GCM (``blobstate.codec.cipher``) of the plain bytes or, when ``flags`` has ``FLAG_ZSTD``, of
  their zstd frame. The header (magic and flags) and the object's name are the associated data: a flipped flag
  or an object moved to another name fails authentication.

What a size and CRC32C declared for an object (a record's ``indexSizeInBytes``/``indexCrc32c``, an index entry's
``sizeInBytes``/``crc32c``) cover is always the **plain** bytes: the same value whatever form the object is
stored in (old and new objects mix; a lost index is put back from its plain copy in any form), and a reader is
bounded by it: it reads at most ``stored_bound(declared)`` stored bytes and decodes at most ``declared`` plain
bytes (a decompression bomb stops at the first piece past it). An encrypted metadata object is authenticated
whole before its plain bytes are decompressed or parsed; an unencrypted one is decompressed within the bound and
checked against the declared CRC32C before it is parsed. A data blob is decoded as it streams (memory stays
bounded): its plain bytes reach the caller's sink (a restore's staging file, verify's checksum) before the GCM
tag at its end is checked, and the caller uses none of them until ``DecodingSink.finish`` returned and the
file's CRC32C matched.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, BinaryIO

import zstandard

from blobstate.codec.cipher import NONCE_BYTES, TAG_BYTES, ObjectCipher, not_authentic
from blobstate.errors import ChecksumMismatch, IntegrityError
from blobstate.plugin.interfaces import FileRange

MAGIC = b"BSE\x01"  # blobstate encrypted object, version 1
FLAG_ZSTD = 0x01
_FLAGS = FLAG_ZSTD
HEADER_BYTES = len(MAGIC) + 1
PREFIX_BYTES = HEADER_BYTES + NONCE_BYTES
OVERHEAD = PREFIX_BYTES + TAG_BYTES  # what encryption adds to an object: 33 bytes
ZSTD = "zstd"  # the codec name an index entry records
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
LEVEL = 3  # zstd's default level: about 300-500 MB/s per core, the ratio of gzip -6
PIECE = 1 << 20  # bytes read, compressed, encrypted and written at a time
#: ciphertext decrypted at a time: one large ``update`` allocates its whole output (170 MiB/s for a 64 MiB chunk
#: on the benchmark machine, 1 GiB/s in pieces of this size; bench/codec.py)
DECRYPT_PIECE = 256 << 10
MAX_WINDOW = 1 << 25  # the largest zstd window a reader accepts (level 3 uses at most 2 MiB)
SAMPLE_BYTES = 64 << 10  # a file is sampled at its start, middle and end, this much at each
MIN_COMPRESS_BYTES = 512  # smaller files are stored as they are (zstd's own header would eat the gain)
MAX_RATIO = 0.9  # a file is compressed when its sample shrinks to this fraction or less


def stored_bound(plain: int) -> int:
    """The most bytes an object of ``plain`` plain bytes can take stored, in any form (zstd's worst case,
    ``ZSTD_compressBound``, plus the encryption frame): what a bounded read of it may read."""
    return plain + (plain >> 7) + 512 + OVERHEAD


def choose(path: str, size: int) -> str | None:
    """``"zstd"`` when the ``size`` bytes of the file at ``path`` are worth compressing, judged from a sample
    (``SAMPLE_BYTES`` at its start, middle and end, compressed at level 1) that shrinks to at most ``MAX_RATIO``;
    None for small or incompressible files (random values, RocksDB SSTs with their own block compression)."""
    if size < MIN_COMPRESS_BYTES:
        return None
    with open(path, "rb") as fh:
        if size <= 3 * SAMPLE_BYTES:
            sample = fh.read(size)
        else:
            parts = []
            for offset in (0, (size - SAMPLE_BYTES) // 2, size - SAMPLE_BYTES):
                fh.seek(offset)
                parts.append(fh.read(SAMPLE_BYTES))
            sample = b"".join(parts)
    if not sample:
        return None
    packed = zstandard.ZstdCompressor(level=1, write_checksum=False, write_content_size=False).compress(sample)
    return ZSTD if len(packed) <= MAX_RATIO * len(sample) else None


def pieces(source: FileRange | bytes) -> Iterator[bytes]:
    """The bytes of ``source`` in pieces of at most ``PIECE`` bytes (a file range is read as it goes)."""
    if isinstance(source, bytes):
        for start in range(0, len(source), PIECE):
            yield source[start:start + PIECE]
        return
    yield from source.pieces(PIECE)


def decrypted(decrypt: Any, data: Any) -> Iterator[bytes]:
    """The plain bytes of ciphertext ``data`` from the streaming decryptor ``decrypt``, ``DECRYPT_PIECE`` at a
    time (the tag is checked by the caller once the object ended)."""
    view = memoryview(data)
    for start in range(0, len(view), DECRYPT_PIECE):
        yield decrypt.update(view[start:start + DECRYPT_PIECE])


def encode(name: str, source: FileRange | bytes, *, compress: bool, cipher: ObjectCipher | None) -> bytes:
    """The stored form of object ``name`` holding ``source``'s bytes: zstd when ``compress``, encrypted (and bound
    to ``name``) when there is a ``cipher``. Held in memory whole (at most a chunk): the caller bounds how many
    are held at once."""
    size = source.length if isinstance(source, FileRange) else len(source)
    out = io.BytesIO()
    encryptor: Any = None
    if cipher is not None:
        header = MAGIC + bytes([FLAG_ZSTD if compress else 0])
        nonce, encryptor = cipher.encryptor(name, header)
        out.write(header + nonce)
    write = out.write if encryptor is None else (lambda data: out.write(encryptor.update(data)))
    if compress:
        packer = zstandard.ZstdCompressor(level=LEVEL, write_checksum=True, write_content_size=True)
        stream = packer.compressobj(size=size)
        for piece in pieces(source):
            packed = stream.compress(piece)
            if packed:
                write(packed)
        write(stream.flush())
    else:
        for piece in pieces(source):
            write(piece)
    if encryptor is not None:
        out.write(encryptor.finalize())
        out.write(encryptor.tag)
    return out.getvalue()


class _Counter:
    """Forwards plain bytes to the caller's sink and counts them."""

    def __init__(self, sink: BinaryIO) -> None:
        self.sink = sink
        self.count = 0

    def write(self, data: Any) -> int:
        self.sink.write(data)
        self.count += len(data)
        return len(data)


class DecodingSink:
    """A writable sink that decodes the stored bytes of one object as they are written into it and writes the
    plain bytes to ``sink``: decrypts (with ``cipher``: the frame's flags say whether a zstd frame is inside,
    ``compressed``, when given, is what the caller expects and a mismatch is refused) and decompresses (zstd,
    in pieces of at most ``PIECE`` bytes, so a sink that refuses bytes past a declared size stops a
    decompression bomb at its first piece past it). ``finish()`` after the last byte checks the GCM tag and the
    frame's completeness; errors are ``ChecksumMismatch`` (exit 3) naming the object.

    A retry rewinds it (``seek(0)``: the blob store's retry does that) and the caller's sink to where they began.
    """

    def __init__(self, sink: BinaryIO, name: str, *, cipher: ObjectCipher | None, compressed: bool | None) -> None:
        self.sink = sink
        self.name = name
        self.cipher = cipher
        self.expected = compressed
        self._start = sink.tell() if sink.seekable() else None
        self._reset()

    def _reset(self) -> None:
        self.stored = 0
        self._out = _Counter(self.sink)
        self._head = b""
        self._tail = b""
        self._decrypt: Any = None
        self._check_tag: Any = None
        self._zstd: Any = None
        self._zstd_head = b""
        if self.cipher is None and self.expected:
            self._start_zstd()

    @property
    def plain(self) -> int:
        """Plain bytes written to the caller's sink so far."""
        return self._out.count

    def _start_zstd(self) -> None:
        reader = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        self._zstd = reader.stream_writer(self._out, write_size=PIECE, write_return_read=True)

    def _damaged(self, why: str) -> IntegrityError:
        if self.cipher is not None and self._check_tag is not None:
            # decrypted bytes that do not decompress: they never came from the key holder under this name
            return not_authentic(f"the object {self.name}")
        return ChecksumMismatch(f"the stored object {self.name} {why}")

    def _plain(self, data: Any) -> None:
        """Bytes after decryption: into the decompressor, or to the sink."""
        if self._zstd is None:
            self._out.write(data)
            return
        if len(self._zstd_head) < 18:
            self._zstd_head += bytes(data[:18 - len(self._zstd_head)])
        try:
            self._zstd.write(data)
        except zstandard.ZstdError as exc:
            raise self._damaged(f"is not a valid zstd frame ({exc})") from None

    def write(self, data: Any) -> int:
        n = len(data)
        self.stored += n
        if self.cipher is None:
            self._plain(data)
            return n
        view = memoryview(data)
        if len(self._head) < PREFIX_BYTES:
            take = PREFIX_BYTES - len(self._head)
            self._head += bytes(view[:take])
            view = view[take:]
            if len(self._head) < PREFIX_BYTES:
                return n
            self._open_frame()
        if len(view) >= TAG_BYTES:
            if self._tail:
                self._plain(self._decrypt.update(self._tail))
            for plain in decrypted(self._decrypt, view[:-TAG_BYTES]):
                self._plain(plain)
            self._tail = bytes(view[-TAG_BYTES:])
        else:
            held = self._tail + bytes(view)
            if len(held) > TAG_BYTES:
                self._plain(self._decrypt.update(held[:-TAG_BYTES]))
            self._tail = held[-TAG_BYTES:]
        return n

    def _open_frame(self) -> None:
        assert self.cipher is not None
        header, nonce = self._head[:HEADER_BYTES], self._head[HEADER_BYTES:PREFIX_BYTES]
        if header[:len(MAGIC)] != MAGIC or header[-1] & ~_FLAGS:
            raise self._damaged("is not an encrypted blobstate object (the repository is encrypted)")
        compressed = bool(header[-1] & FLAG_ZSTD)
        if self.expected is not None and compressed != self.expected:
            # the key holder never writes a frame its index entry contradicts: another object's bytes, or forged
            raise not_authentic(f"the object {self.name}")
        self._decrypt, self._check_tag = self.cipher.decryptor(self.name, header, nonce)
        if compressed:
            self._start_zstd()

    def finish(self) -> int:
        """Check the end of the object (the tag, a complete zstd frame); returns the plain bytes written."""
        if self.cipher is not None:
            if len(self._head) < PREFIX_BYTES or len(self._tail) < TAG_BYTES:
                raise self._damaged(f"is cut short ({self.stored} bytes)")
            self._check_tag(self._tail)
        if self._zstd is not None:
            try:
                self._zstd.flush()
            except zstandard.ZstdError as exc:
                raise self._damaged(f"is not a valid zstd frame ({exc})") from None
            declared = zstandard.frame_content_size(self._zstd_head) if len(self._zstd_head) >= 6 else -1
            if declared < 0 or declared != self.plain:
                raise self._damaged(f"holds a cut or damaged zstd frame ({self.plain} bytes decoded)")
        return self.plain

    # -- what a retry needs: rewind to the start -------------------------------------------------------------
    def tell(self) -> int:
        return self.stored

    def seekable(self) -> bool:
        return self._start is not None

    def seek(self, pos: int, whence: int = 0) -> int:
        if pos != 0 or whence != 0 or self._start is None:
            raise OSError("a decoding sink only rewinds to its start")
        self.sink.seek(self._start)
        self._reset()
        return 0

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass


def decode(name: str, stored: bytes, sink: BinaryIO, *, cipher: ObjectCipher | None) -> int:
    """Decode a whole metadata object (an index, a changelog) into ``sink`` (bounded by the caller); returns the
    plain bytes. Encrypted: authenticated whole before anything is decompressed. Unencrypted: a zstd frame is
    recognised by its magic (the plain forms never start with it)."""
    if cipher is not None:
        if len(stored) < OVERHEAD or stored[:len(MAGIC)] != MAGIC or stored[len(MAGIC)] & ~_FLAGS:
            raise ChecksumMismatch(f"the stored object {name} is not an encrypted blobstate object (the repository "
                                   "is encrypted)")
        header, nonce = stored[:HEADER_BYTES], stored[HEADER_BYTES:PREFIX_BYTES]
        decrypt, check_tag = cipher.decryptor(name, header, nonce)
        body = b"".join(decrypted(decrypt, memoryview(stored)[PREFIX_BYTES:-TAG_BYTES]))
        check_tag(stored[-TAG_BYTES:])
        stored, compressed = body, bool(header[-1] & FLAG_ZSTD)
    else:
        compressed = stored[:len(ZSTD_MAGIC)] == ZSTD_MAGIC
    if not compressed:
        sink.write(stored)
        return len(stored)
    decoder = DecodingSink(sink, name, cipher=None, compressed=True)
    decoder.write(stored)
    return decoder.finish()
