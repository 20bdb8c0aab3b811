"""``blobstate.local.checksum`` on real files: CRC32C (Castagnoli's check value) and XXH3-128 in one streaming
pass, ranges, a sink that refuses a chunk larger than declared before writing it and rewinds its checksums on a
retry, and the checksum cache: a hit only while the stat key holds (ctime for what a restore keeps), persisted
atomically, a damaged cache file costing only re-reads."""

from __future__ import annotations

import io
import json
import os

import google_crc32c
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.errors import ChecksumMismatch
from blobstate.local import checksum as c
from blobstate.local.checksum import ChecksumCache, Crc32cSink, FileDigest

CHECK = b"123456789"  # CRC-32C's check value (RFC 3720, B.4): 0xE3069283


def write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def test_the_crc32c_is_castagnolis():
    assert c.crc32c_bytes(CHECK) == 0xE3069283 and c.crc32c_bytes(b"") == 0


@pytest.mark.parametrize("size", [0, 1, c.BUFFER_SIZE - 1, c.BUFFER_SIZE, c.BUFFER_SIZE + 1, 3 * c.BUFFER_SIZE + 7])
def test_a_file_is_digested_in_one_streaming_pass(tmp_path, size):
    data = os.urandom(size)
    path = write(tmp_path / "f", data)
    digest = c.digest_file(path)
    assert digest == FileDigest(size, google_crc32c.value(data), f"xxh3-128:{xxhash.xxh3_128_hexdigest(data)}")
    assert c.digest_file(path, content_hash=False) == FileDigest(size, google_crc32c.value(data), None)
    assert c.crc32c_file(path) == digest.crc32c


def test_the_content_hash_is_recorded_as_32_lowercase_hex():
    assert c.content_hash_of(xxhash.xxh3_128(b"")) == "xxh3-128:99aa06d3014798d86001c324468d497f"


@pytest.mark.parametrize("offset, length", [(0, 0), (0, 9), (3, 4), (8, 1), (9, 0), (5, None), (7, 100), (20, None)])
def test_a_range_of_a_file(tmp_path, offset, length):
    path = write(tmp_path / "f", CHECK)
    end = None if length is None else offset + length
    assert c.crc32c_file(path, offset, length) == google_crc32c.value(CHECK[offset:end])


def test_a_sink_keeps_the_checksums_of_what_passes_and_forwards_it():
    out = io.BytesIO()
    sink = Crc32cSink(out, content_hash=True)
    for piece in (b"1234", b"", b"56789"):
        assert sink.write(piece) == len(piece)
    sink.flush()
    assert (sink.size, sink.crc32c, out.getvalue()) == (9, 0xE3069283, CHECK)
    assert sink.content_hash == f"xxh3-128:{xxhash.xxh3_128_hexdigest(CHECK)}"
    assert sink.writable() and sink.seekable() and sink.tell() == 9


def test_a_sink_without_a_file_discards_and_without_content_hash_has_none():
    sink = Crc32cSink()
    sink.write(memoryview(CHECK))
    assert (sink.size, sink.crc32c, sink.content_hash, sink.tell()) == (9, 0xE3069283, None, 9)


def test_a_chunk_larger_than_declared_is_refused_before_it_is_written():
    out = io.BytesIO()
    sink = Crc32cSink(out)
    sink.write(b"before")
    sink.mark(limit=4)
    sink.write(b"abc")
    with pytest.raises(ChecksumMismatch, match="a blob holds more than the 4 bytes the index declares"):
        sink.write(b"de")
    assert out.getvalue() == b"beforeabc" and sink.size == 9
    sink.write(b"d")  # exactly the limit
    sink.mark()  # no limit
    sink.write(b"x" * 10_000)


def test_a_seek_back_to_the_mark_restores_the_checksums_and_nothing_else_is_allowed():
    out = io.BytesIO()
    sink = Crc32cSink(out, content_hash=True)
    sink.write(b"1234")
    sink.mark(limit=5)
    sink.write(b"5XXX")  # a download cut off half way, with wrong bytes
    assert sink.seek(4) == 4  # the retry rewrites the chunk
    sink.write(b"56789")
    assert (sink.size, sink.crc32c) == (9, 0xE3069283)
    assert sink.content_hash == f"xxh3-128:{xxhash.xxh3_128_hexdigest(CHECK)}"
    assert out.getvalue() == CHECK
    for pos, whence in [(0, 0), (5, 0), (0, 1), (0, 2)]:
        with pytest.raises(OSError, match="can only seek back to its mark"):
            sink.seek(pos, whence)


@settings(max_examples=50, deadline=None)
@given(pieces=st.lists(st.binary(max_size=300), max_size=12))
def test_any_piecing_gives_the_checksums_of_the_whole(pieces):
    sink = Crc32cSink(content_hash=True)
    for p in pieces:
        sink.write(p)
    whole = b"".join(pieces)
    assert (sink.size, sink.crc32c) == (len(whole), google_crc32c.value(whole))
    assert sink.content_hash == f"xxh3-128:{xxhash.xxh3_128_hexdigest(whole)}"


def test_the_stat_key_holds_device_inode_size_mtime_and_ctime(tmp_path):
    st_ = os.stat(write(tmp_path / "f", b"x"))
    assert c.stat_key(st_) == f"{st_.st_dev}:{st_.st_ino}:{st_.st_size}:{st_.st_mtime_ns}:{st_.st_ctime_ns}"
    assert c.stat_key(st_, ctime=False) == f"{st_.st_dev}:{st_.st_ino}:{st_.st_size}:{st_.st_mtime_ns}"


def rewrite_keeping_mtime(path: str, data: bytes) -> None:
    """Change the bytes in place and put the mtime back (what a careless tool or damage does): ctime moves."""
    before = os.stat(path)
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_file_is_read_once_and_again_only_when_its_stat_key_moves(tmp_path):
    path = write(tmp_path / "f", b"aaaa")
    cache = ChecksumCache()
    assert cache.crc32c(path) == (4, google_crc32c.value(b"aaaa")) and (cache.hits, cache.misses) == (0, 1)
    assert cache.crc32c(path) == (4, google_crc32c.value(b"aaaa")) and (cache.hits, cache.misses) == (1, 1)
    rewrite_keeping_mtime(path, b"bbbb")
    assert cache.crc32c(path) == (4, google_crc32c.value(b"bbbb"))  # strict: ctime moved, read again
    assert cache.misses == 2
    assert cache.crc32c(path, trust_cache=False) == (4, google_crc32c.value(b"bbbb")) and cache.misses == 3


def test_a_backup_scan_of_an_immutable_file_trusts_the_key_without_ctime(tmp_path):
    path = write(tmp_path / "f.sst", b"sst!")
    cache = ChecksumCache()
    assert cache.digest(path, mutable=False) == FileDigest(4, google_crc32c.value(b"sst!"))
    os.link(path, tmp_path / "checkpoint.sst")  # a new checkpoint hard-links it again: ctime moves
    assert cache.digest(str(tmp_path / "checkpoint.sst"), mutable=False).crc32c == google_crc32c.value(b"sst!")
    assert (cache.hits, cache.misses) == (1, 1)


def test_a_mutable_file_is_read_in_full_every_time(tmp_path):
    path = write(tmp_path / "MANIFEST", b"manifest")
    cache = ChecksumCache()
    for _ in range(3):
        digest = cache.digest(path, mutable=True)
        assert digest == FileDigest(8, google_crc32c.value(b"manifest"),
                                    f"xxh3-128:{xxhash.xxh3_128_hexdigest(b'manifest')}")
    assert (cache.hits, cache.misses) == (0, 3)


def test_the_cache_persists_retains_and_survives_damage(tmp_path):
    keep, drop = write(tmp_path / "keep", b"k"), write(tmp_path / "drop", b"d")
    cache_path = str(tmp_path / "cache" / "crc.json")
    cache = ChecksumCache(cache_path)
    cache.save()
    assert not os.path.exists(cache_path)  # nothing changed: nothing written
    cache.remember(keep, 11)
    cache.remember(drop, 22)
    cache.retain([keep, str(tmp_path / "missing")])
    cache.save()
    assert len(json.loads(open(cache_path).read())) == 2  # both keys of ``keep`` only
    again = ChecksumCache(cache_path)
    assert again.crc32c(keep) == (1, 11) and again.hits == 1
    assert again.crc32c(drop) == (1, google_crc32c.value(b"d")) and again.misses == 1
    for damage in ("{not json", "[1, 2]", '{"a": "x"}', ""):
        with open(cache_path, "w") as fh:
            fh.write(damage)
        damaged = ChecksumCache(cache_path)
        assert damaged.crc32c(keep) == (1, google_crc32c.value(b"k")) and damaged.misses == 1


def test_a_missing_file_is_an_error_not_a_cached_answer(tmp_path):
    with pytest.raises(FileNotFoundError):
        ChecksumCache().crc32c(str(tmp_path / "missing"))
