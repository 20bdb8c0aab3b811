"""``blobstate.codec.store.CodecBlobStore`` over a real ``file://`` blob store (``tmp_path``): what each kind of
object looks like on disk (compressed, encrypted or as handed), that every read gives the plain bytes back, that
bytes moved to another name do not read, that a bounded read stops at the declared size whatever the stored form,
and that the plugin's leases are sealed when the repository is encrypted."""

from __future__ import annotations

import io
import os

import pytest

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.codec.store import CodecBlobStore, LeaseSeal, is_layout_object
from blobstate.errors import ChecksumMismatch, CorruptIndexError
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import BoundedSink, FileRange, GetRequest, PutRequest
from blobstate.plugins.fsspec_store import FsspecBlobStore

KEY = StoreKey("job", "0", "store")
BLOB = layout.blob_id(KEY, "a" * 32)
BLOB2 = layout.blob_id(KEY, "b" * 32)
INDEX = layout.index_id(KEY, "c" * 32)
TEXT = b'{"files": "the same words again and again"} ' * 2000  # compressible, as an index is


@pytest.fixture
def root(tmp_path):
    return tmp_path / "repo"


def codec_store(root, *, cipher=None, compress=True):
    return CodecBlobStore(FsspecBlobStore(f"file://{root}"), cipher=cipher, compress=compress)


def on_disk(root, blob_id: str) -> bytes:
    return (root / blob_id).read_bytes()


def test_the_layout_objects_are_blobs_and_indexes_only():
    assert is_layout_object(BLOB) and is_layout_object(INDEX)
    for other in (layout.MARKER, layout.record_id(KEY, 1), layout.lease_id(BLOB), "job/0/store/blobs/short",
                  "job/0/store/indexes/" + "c" * 32, layout.scratch_prefix("ab" * 16) + "/x", ""):
        assert not is_layout_object(other), other


def test_without_a_key_an_index_is_stored_compressed_and_a_data_blob_as_its_request_says(root):
    store = codec_store(root)
    store.put(PutRequest(INDEX, TEXT))
    store.put(PutRequest(BLOB, TEXT))  # no codec: the planner chose to store it as it is
    store.put(PutRequest(BLOB2, TEXT, codec=frame.ZSTD))
    assert on_disk(root, INDEX).startswith(frame.ZSTD_MAGIC) and len(on_disk(root, INDEX)) < len(TEXT) // 10
    assert on_disk(root, BLOB) == TEXT
    assert on_disk(root, BLOB2).startswith(frame.ZSTD_MAGIC)
    out = io.BytesIO()
    assert store.get_blob(BLOB2, out, frame.ZSTD) == len(TEXT) and out.getvalue() == TEXT
    out = io.BytesIO()
    assert store.get_blob(BLOB, out, None) == len(TEXT) and out.getvalue() == TEXT
    assert store.get_bounded(INDEX, BoundedSink(len(TEXT), "the index")) == TEXT


def test_with_compression_off_an_index_is_stored_as_it_is(root):
    store = codec_store(root, compress=False)
    store.put(PutRequest(INDEX, TEXT))
    assert on_disk(root, INDEX) == TEXT
    assert store.get_bounded(INDEX, BoundedSink(len(TEXT), "the index")) == TEXT


def test_a_changelog_asks_for_its_codec_whatever_the_store_wide_switch(root):
    store = codec_store(root, compress=False)
    store.put(PutRequest(BLOB, TEXT, codec=frame.ZSTD))
    assert on_disk(root, BLOB).startswith(frame.ZSTD_MAGIC)
    assert store.get_bounded(BLOB, BoundedSink(len(TEXT), "the changelog")) == TEXT


@pytest.mark.parametrize("codec", [None, frame.ZSTD])
def test_with_a_key_every_layout_object_is_encrypted_and_reads_back(root, codec, tmp_path):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    source = tmp_path / "file"
    source.write_bytes(b"head" + TEXT)
    store.put(PutRequest(BLOB, FileRange(str(source), 4, len(TEXT)), codec=codec))
    store.put(PutRequest(INDEX, TEXT))
    for blob_id in (BLOB, INDEX):
        stored = on_disk(root, blob_id)
        assert stored.startswith(frame.MAGIC) and TEXT[:64] not in stored
    out = io.BytesIO()
    assert store.get_blob(BLOB, out, codec) == len(TEXT) and out.getvalue() == TEXT
    out = io.BytesIO()
    assert store.get(BLOB, out) == len(TEXT) and out.getvalue() == TEXT  # the frame says how it is stored
    assert store.get_bytes(INDEX) == TEXT
    assert store.get_bounded(INDEX, BoundedSink(len(TEXT), "the index")) == TEXT


def test_an_encrypted_object_under_another_name_does_not_read(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    store.put(PutRequest(BLOB, b"secret state"))
    (root / BLOB2).parent.mkdir(parents=True, exist_ok=True)
    (root / BLOB2).write_bytes(on_disk(root, BLOB))  # someone with write access copies it under another name
    with pytest.raises(ChecksumMismatch, match=BLOB2):
        store.get_blob(BLOB2, io.BytesIO(), None)


def test_an_encrypted_repository_refuses_a_blob_written_in_the_clear(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    (root / BLOB).parent.mkdir(parents=True)
    (root / BLOB).write_bytes(b"planted plaintext, no frame")
    with pytest.raises(ChecksumMismatch):
        store.get_blob(BLOB, io.BytesIO(), None)


@pytest.mark.parametrize("cipher", [None, ObjectCipher(new_key(), "repo-1")], ids=["compressed", "encrypted"])
def test_a_bounded_read_refuses_more_than_the_declared_plain_size(root, cipher):
    store = codec_store(root, cipher=cipher)
    store.put(PutRequest(INDEX, TEXT))
    with pytest.raises(CorruptIndexError, match="the index"):
        store.get_bounded(INDEX, BoundedSink(len(TEXT) - 1, "the index"))


def test_objects_outside_the_layout_pass_through_as_they_are_even_encrypted(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    marker = b'{"format": 2}'
    store.put_exclusive(layout.MARKER, marker)
    record = layout.record_id(KEY, 1)
    store.put(PutRequest(record, b"a record the log wrapper sealed"))
    assert on_disk(root, layout.MARKER) == marker and store.get_bytes(layout.MARKER) == marker
    assert on_disk(root, record) == b"a record the log wrapper sealed"
    assert store.get_bounded(record, BoundedSink(100, "record")) == b"a record the log wrapper sealed"


def test_put_exclusive_encrypts_a_layout_object_and_stays_exclusive(root):
    plain = codec_store(root)
    plain.put_exclusive(INDEX, b"an index")
    assert on_disk(root, INDEX) == b"an index"  # no key: put_exclusive hands the bytes as they are
    encrypted = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    encrypted.put_exclusive(BLOB, b"a blob")
    assert on_disk(root, BLOB).startswith(frame.MAGIC) and encrypted.get_bytes(BLOB) == b"a blob"
    with pytest.raises(FileExistsError):
        encrypted.put_exclusive(BLOB, b"again")


def test_many_puts_and_gets_give_each_object_its_own_bytes(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    ids = [layout.blob_id(KEY, f"{i:032x}") for i in range(20)]
    store.put_many([PutRequest(b, f"blob {i}".encode() * (i + 1), codec=frame.ZSTD if i % 2 else None)
                    for i, b in enumerate(ids)])
    sinks = [io.BytesIO() for _ in ids]
    sizes = store.get_many([GetRequest(b, s) for b, s in zip(ids, sinks, strict=True)])
    assert [s.getvalue() for s in sinks] == [f"blob {i}".encode() * (i + 1) for i in range(20)]
    assert sizes == [len(s.getvalue()) for s in sinks]


def test_many_puts_without_encoding_go_to_the_inner_store_as_they_are(root):
    store = codec_store(root)
    store.put_many([PutRequest(BLOB, b"one"), PutRequest(BLOB2, b"two")])
    assert (on_disk(root, BLOB), on_disk(root, BLOB2)) == (b"one", b"two")
    sinks = [io.BytesIO(), io.BytesIO()]
    assert store.get_many([GetRequest(BLOB, sinks[0]), GetRequest(BLOB2, sinks[1])]) == [3, 3]


def test_the_plugins_leases_are_sealed_in_an_encrypted_repository(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    store.put(PutRequest(BLOB, b"x", ttl_ms=60_000))
    assert store.has_ttl(BLOB)
    lease = on_disk(root, layout.lease_id(BLOB))
    assert BLOB.encode() not in lease  # the lease's body (which blob, when it expires) is sealed
    with pytest.raises(Exception):  # noqa: B017 - whatever the lease parser says: it is not a clear lease
        layout.Lease.from_bytes(lease)
    assert store.expired(KEY.prefix, layout.now_ms() + 120_000) == [BLOB]
    store.remove_ttl(BLOB)
    assert not store.has_ttl(BLOB) and not os.path.exists(root / layout.lease_id(BLOB))


def test_a_lease_sealed_under_one_name_does_not_open_under_another():
    seal = LeaseSeal(ObjectCipher(new_key(), "repo-1"))
    stored = seal.seal("job/0/store/ttl/x", b"lease body")
    assert seal.open("job/0/store/ttl/x", stored) == b"lease body"
    with pytest.raises(ChecksumMismatch):
        seal.open("job/0/store/ttl/y", stored)


def test_the_rest_is_the_inner_stores(root):
    store = codec_store(root, cipher=ObjectCipher(new_key(), "repo-1"))
    store.put(PutRequest(BLOB, b"x"))
    assert [i.blob_id for i in store.list(KEY.prefix)] == [BLOB]
    store.delete_many([BLOB])
    assert list(store.list(KEY.prefix)) == []
    assert store.url == f"file://{root}"
