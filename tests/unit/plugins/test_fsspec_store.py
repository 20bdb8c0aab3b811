"""``blobstate.plugins.fsspec_store`` on ``file://`` and fsspec's ``memory://``: blob ids that climb out refused,
the lease written before its blob and removed by ``remove_ttl``, expiry by the lease's time, a lease naming another
object ignored (never used to delete), a torn lease expiring only once old, exclusive creates, bounded reads,
and listings that hide TTL bookkeeping and temporary files."""

from __future__ import annotations

import io

import pytest

from blobstate.errors import BlobNotFound, ConfigurationError, CorruptIndexError
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import BoundedSink, FileRange, PutRequest
from blobstate.plugins.fsspec_store import TORN_LEASE_GRACE_MS, FsspecBlobStore, check_blob_id, leased

KEY, OTHER = StoreKey("job", "0", "s"), StoreKey("job", "1", "t")


@pytest.fixture
def store(tmp_path):
    blob_store = FsspecBlobStore(f"file://{tmp_path}/repo")
    yield blob_store
    blob_store.close()


@pytest.mark.parametrize("bad", ["", "/abs", "a//b", "a/../b", "./a", "a/."])
def test_a_blob_id_that_climbs_out_is_refused(bad):
    with pytest.raises(ConfigurationError, match="invalid blob id"):
        check_blob_id(bad)
    assert check_blob_id("job/0/s/blobs/x") == "job/0/s/blobs/x"


def test_only_blobs_and_indexes_carry_leases():
    assert leased(layout.new_blob_id(KEY)) and leased(layout.new_index_id(KEY))
    assert not leased(layout.record_id(KEY, 1)) and not leased(layout.MARKER)


def test_a_blob_with_a_ttl_expires_by_its_lease_until_the_ttl_is_removed(store):
    blob = layout.new_blob_id(KEY)
    store.put(PutRequest(blob, b"payload", ttl_ms=1000))
    assert store.has_ttl(blob) and store.get_bytes(blob) == b"payload"
    now = layout.now_ms()
    assert store.expired(KEY.prefix, now) == [] and store.expired(KEY.prefix, now + 2000) == [blob]
    assert [i.blob_id for i in store.list(KEY.prefix)] == [blob]  # the lease is bookkeeping, never listed
    objects, with_ttl, expired = store.list_with_ttl(KEY.prefix, now + 2000)
    assert [i.blob_id for i in objects] == [blob] and with_ttl == expired == {blob}
    store.remove_ttl(blob)
    store.remove_ttl(blob)  # idempotent
    assert not store.has_ttl(blob) and store.expired(KEY.prefix, layout.FAR_FUTURE_MS) == []


def test_a_lease_naming_another_object_is_ignored(store):
    victim = layout.new_blob_id(OTHER)
    store.put(PutRequest(victim, b"another store's blob"))
    mine = layout.new_blob_id(KEY)
    hostile = layout.Lease(victim, 1).to_bytes()
    store.put(PutRequest(layout.lease_id(mine), hostile))
    assert store.expired(KEY.prefix, layout.FAR_FUTURE_MS) == []
    assert store.foreign_leases == [layout.lease_id(mine)] and store.get_bytes(victim)


def test_a_torn_lease_stands_for_its_blob_and_expires_only_once_old(store):
    blob = layout.new_blob_id(KEY)
    store.put(PutRequest(blob, b"x"))
    store.put(PutRequest(layout.lease_id(blob), b"{torn"))
    now = layout.now_ms()
    assert store.expired(KEY.prefix, now) == []
    assert store.expired(KEY.prefix, now + TORN_LEASE_GRACE_MS + 60_000) == [blob]


def test_exclusive_create_and_bounded_and_ranged_reads(store, tmp_path):
    store.put_exclusive("checkpoints/a.json", b"first")
    with pytest.raises(FileExistsError):
        store.put_exclusive("checkpoints/a.json", b"second")
    assert store.get_bytes("checkpoints/a.json") == b"first"
    with pytest.raises(CorruptIndexError, match="larger than 3 bytes"):
        store.get_bounded("checkpoints/a.json", BoundedSink(3, "a record"))
    with pytest.raises(BlobNotFound):
        store.get("missing/blob", io.BytesIO())
    source = tmp_path / "source"
    source.write_bytes(bytes(range(200)))
    store.put(PutRequest("ranged/blob", FileRange(str(source), 50, 100)))
    assert store.get_bytes("ranged/blob") == bytes(range(50, 150))
    store.delete("ranged/blob")
    store.delete("ranged/blob")  # idempotent
    assert not list(store.list("ranged"))


def test_a_memory_filesystem_works_through_fsspec_too():
    mem = FsspecBlobStore("memory://blobstate-unit-test-fsspec-store")
    try:
        blob = layout.new_blob_id(KEY)
        mem.put(PutRequest(blob, b"in memory", ttl_ms=10))
        assert mem.get_bytes(blob) == b"in memory" and mem.has_ttl(blob)
        assert [i.blob_id for i in mem.list(KEY.prefix)] == [blob]
        mem.delete(blob)
        assert list(mem.list(KEY.prefix)) == [] and not mem.has_ttl(blob)
    finally:
        mem.close()


def test_native_ttl_is_refused_where_the_store_has_none(tmp_path):
    with pytest.raises(ConfigurationError, match="does not support ttl mode 'native'"):
        FsspecBlobStore(f"file://{tmp_path}/repo", ttl_mode="native")
