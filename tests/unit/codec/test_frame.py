"""``blobstate.codec.frame`` and ``cipher``: every stored form round-trips in any piecing, a decompression bomb stops
at the declared size, and an encrypted object read under another name, flag, key or repository, or cut short, is
refused (``ChecksumMismatch``) before its plain bytes are used."""

from __future__ import annotations

import io
import os
import random

import pytest

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.errors import ChecksumMismatch
from blobstate.plugin.interfaces import BoundedSink, FileRange

NAME = "job/0/store/blobs/" + "ab" * 16
CIPHER = ObjectCipher(new_key(), "repo-1")
TEXT = b"the quick brown fox jumps over the lazy dog; " * 5000


def stream(stored: bytes, *, cipher: ObjectCipher | None, compressed: bool | None, seed: int = 0,
           name: str = NAME) -> bytes:
    """Decode ``stored`` through a ``DecodingSink`` fed in random pieces (as a transport delivers them)."""
    out = io.BytesIO()
    sink = frame.DecodingSink(out, name, cipher=cipher, compressed=compressed)
    rnd, pos = random.Random(seed), 0
    while pos < len(stored):
        n = rnd.choice([1, 3, 16, 17, 100, 4096, 1 << 20])
        sink.write(stored[pos:pos + n])
        pos += n
    assert sink.finish() == len(out.getvalue())
    return out.getvalue()


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("cipher", [None, CIPHER])
@pytest.mark.parametrize("data", [b"", b"x", TEXT, os.urandom(300_000)], ids=["empty", "byte", "text", "random"])
def test_every_form_round_trips_streamed_and_whole(compress, cipher, data):
    stored = frame.encode(NAME, data, compress=compress, cipher=cipher)
    assert len(stored) <= frame.stored_bound(len(data))
    if cipher is not None:
        assert stored[:4] == frame.MAGIC
        assert len(data) < 16 or data[:64] not in stored  # no plaintext (a byte or two may recur by chance)
    for seed in range(3):
        assert stream(stored, cipher=cipher, compressed=compress if cipher is None else None, seed=seed) == data
    out = io.BytesIO()
    assert frame.decode(NAME, stored, out, cipher=cipher) == len(data) and out.getvalue() == data


def test_a_file_range_encodes_only_its_bytes(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"0123456789" + TEXT)
    stored = frame.encode(NAME, FileRange(str(path), 10, len(TEXT)), compress=True, cipher=CIPHER)
    assert stream(stored, cipher=CIPHER, compressed=True) == TEXT


class _Pieces(BoundedSink):
    """A bounded sink that remembers the largest piece it was handed."""

    largest = 0

    def write(self, data):  # noqa: ANN001, ANN201
        self.largest = max(self.largest, len(data))
        return super().write(data)


@pytest.mark.parametrize("cipher", [None, CIPHER], ids=["plain", "encrypted"])
def test_a_decompression_bomb_stops_at_the_declared_size(cipher):
    stored = frame.encode(NAME, bytes(64 << 20), compress=True, cipher=cipher)  # 64 MiB of zeros in a few KiB
    assert len(stored) < 16 << 10
    sink = _Pieces(1 << 20, "a changelog", error=ChecksumMismatch)
    with pytest.raises(ChecksumMismatch, match="larger than 1048576"):
        frame.decode(NAME, stored, sink, cipher=cipher)
    # refused at its first piece past the declared size: never decoded whole, never handed over whole
    assert len(sink.getvalue()) <= 1 << 20 and sink.largest <= frame.PIECE


def test_an_encrypted_object_is_bound_to_its_name_flags_key_and_repository():
    stored = frame.encode(NAME, TEXT, compress=True, cipher=CIPHER)
    other_name = NAME[:-1] + "c"
    for cipher, name in [(CIPHER, other_name), (ObjectCipher(new_key(), "repo-1"), NAME),
                         (ObjectCipher(CIPHER._key, "repo-2"), NAME)]:
        with pytest.raises(ChecksumMismatch, match="does not authenticate"):
            frame.decode(name, stored, io.BytesIO(), cipher=cipher)
        with pytest.raises(ChecksumMismatch, match="does not authenticate"):
            stream(stored, cipher=cipher, compressed=None, name=name)
    flipped = bytearray(stored)
    flipped[4] ^= frame.FLAG_ZSTD  # claims to be stored as it is
    with pytest.raises(ChecksumMismatch, match="does not authenticate"):
        frame.decode(NAME, bytes(flipped), io.BytesIO(), cipher=CIPHER)
    with pytest.raises(ChecksumMismatch, match="does not authenticate"):
        stream(stored, cipher=CIPHER, compressed=False)  # the index says plain, the frame says zstd
    body = bytearray(stored)
    body[40] ^= 1
    with pytest.raises(ChecksumMismatch):
        stream(bytes(body), cipher=CIPHER, compressed=None)


@pytest.mark.parametrize("cut", [1, frame.TAG_BYTES, len(frame.MAGIC) + 3])
def test_a_cut_object_is_refused(cut):
    stored = frame.encode(NAME, TEXT, compress=True, cipher=CIPHER)
    short = stored[:-cut] if cut != len(frame.MAGIC) + 3 else stored[:cut]
    with pytest.raises(ChecksumMismatch):
        stream(short, cipher=CIPHER, compressed=None)
    with pytest.raises(ChecksumMismatch):
        frame.decode(NAME, short, io.BytesIO(), cipher=CIPHER)
    packed = frame.encode(NAME, TEXT, compress=True, cipher=None)
    with pytest.raises(ChecksumMismatch):
        stream(packed[:len(packed) // 2], cipher=None, compressed=True)


def test_plaintext_in_an_encrypted_repository_is_refused():
    with pytest.raises(ChecksumMismatch, match="not an encrypted blobstate object"):
        frame.decode(NAME, b'{"schemaVersion":3}' + bytes(40), io.BytesIO(), cipher=CIPHER)
    with pytest.raises(ChecksumMismatch, match="not an encrypted blobstate object"):
        stream(TEXT, cipher=CIPHER, compressed=None)


def test_a_retry_rewinds_the_decoder_and_the_sink():
    data = TEXT + os.urandom(5000)
    stored = frame.encode(NAME, data, compress=True, cipher=CIPHER)
    out = io.BytesIO()
    out.write(b"before")
    sink = frame.DecodingSink(out, NAME, cipher=CIPHER, compressed=True)
    sink.write(stored[:1000])  # a first attempt breaks off ...
    assert sink.tell() == 1000 and sink.seekable()
    sink.seek(0)  # ... the retry rewinds (what RetryingBlobStore.get does)
    sink.write(stored)
    sink.finish()
    assert out.getvalue() == b"before" + data
    with pytest.raises(OSError):
        sink.seek(5)


def test_every_object_gets_its_own_nonce():
    stored = [frame.encode(NAME, b"same bytes", compress=False, cipher=CIPHER) for _ in range(2000)]
    nonces = {s[frame.HEADER_BYTES:frame.PREFIX_BYTES] for s in stored}
    assert len(nonces) == len(stored) and len(set(stored)) == len(stored)


def test_compression_is_chosen_per_file_from_a_sample(tmp_path):
    text, noise, tiny, big = (tmp_path / n for n in ("text", "noise", "tiny", "big"))
    text.write_bytes(TEXT)
    noise.write_bytes(os.urandom(500_000))
    tiny.write_bytes(b"a" * (frame.MIN_COMPRESS_BYTES - 1))
    big.write_bytes(os.urandom(200_000) + bytes(400_000) + os.urandom(200_000))  # its start, middle, end sampled
    assert frame.choose(str(text), text.stat().st_size) == "zstd"
    assert frame.choose(str(noise), noise.stat().st_size) is None
    assert frame.choose(str(tiny), tiny.stat().st_size) is None
    assert frame.choose(str(big), big.stat().st_size) == "zstd"
