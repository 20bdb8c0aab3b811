"""``blobstate.plugin.interfaces``: the pieces of the backend interfaces that are logic of their own (a file
range read in pieces, a bounded sink, the content version, the defaults a plugin inherits: ``rewrite``'s check,
``map_concurrent``'s order and first error, a log's ``forget``/``drop``/``histories``)."""

from __future__ import annotations

import hashlib
import io
import threading

import pytest

from blobstate.errors import BlobNotFound, ChecksumMismatch, CorruptIndexError, ObjectChangedError, StorageError
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.interfaces import (
    BlobStore,
    BoundedSink,
    CheckpointLog,
    FileRange,
    PutRequest,
    content_version,
)

KEY = StoreKey("job", "0", "counts")


class _DictStore(BlobStore):
    """The abstract calls over a dict, to drive the defaults ``BlobStore`` gives every plugin."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.max_concurrency = 4

    def put(self, request: PutRequest) -> None:
        assert isinstance(request.source, bytes)
        self.blobs[request.blob_id] = request.source

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        if blob_id in self.blobs:
            raise FileExistsError(blob_id)
        self.blobs[blob_id] = data

    def get(self, blob_id, sink):  # noqa: ANN001, ANN201
        if blob_id not in self.blobs:
            raise BlobNotFound(blob_id)
        return sink.write(self.blobs[blob_id])

    def delete(self, blob_id: str) -> None:
        self.blobs.pop(blob_id, None)

    def remove_ttl(self, blob_id: str) -> None:
        pass

    def list(self, prefix):  # noqa: ANN001, ANN201
        return iter(())

    def expired(self, prefix, now_ms):  # noqa: ANN001, ANN201
        return []

    def has_ttl(self, blob_id: str) -> bool:
        return False


def test_a_file_range_is_read_in_pieces_of_at_most_size_bytes(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(range(100)))
    rng = FileRange(str(path), 10, 25)
    pieces = list(rng.pieces(10))
    assert [len(p) for p in pieces] == [10, 10, 5] and b"".join(pieces) == bytes(range(10, 35))
    assert PutRequest("x", rng).size == 25 and PutRequest("x", b"abc").size == 3


def test_a_file_that_shrank_under_its_range_is_a_storage_error(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    with pytest.raises(StorageError, match="shrank"):
        list(FileRange(str(path), 5, 20).pieces(4))


def test_a_bounded_sink_refuses_the_write_that_would_pass_its_limit():
    sink = BoundedSink(5, "the marker")
    assert sink.write(b"abc") == 3 and sink.write(b"de") == 2
    with pytest.raises(CorruptIndexError, match="the marker is larger than 5 bytes"):
        sink.write(b"f")
    assert sink.getvalue() == b"abcde"
    custom = BoundedSink(1, "a lease", error=ChecksumMismatch, why="leases are small")
    assert isinstance(custom.too_large(), ChecksumMismatch) and "leases are small" in str(custom.too_large())


def test_the_content_version_is_the_sha256_of_the_bytes():
    assert content_version(b"abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert content_version(b"abc") != content_version(b"abd")


def test_the_default_rewrite_writes_only_while_the_version_read_is_current():
    store = _DictStore()
    store.rewrite("marker", b"one", expected=None)  # only while absent
    with pytest.raises(ObjectChangedError):
        store.rewrite("marker", b"two", expected=None)
    data, version = store.get_versioned("marker", BoundedSink(100, "marker"))
    assert data == b"one" and version == content_version(b"one")
    store.put(PutRequest("marker", b"changed by another writer"))
    with pytest.raises(ObjectChangedError):
        store.rewrite("marker", b"two", expected=version)
    assert store.blobs["marker"] == b"changed by another writer"
    store.rewrite("marker", b"three", expected=content_version(b"changed by another writer"))
    assert store.get_bytes("marker") == b"three"
    with pytest.raises(ObjectChangedError):
        store.rewrite("gone", b"x", expected=version)  # vanished since it was read


def test_map_concurrent_keeps_the_input_order_and_raises_the_first_error_after_the_batch_stopped():
    store = _DictStore()
    assert store.map_concurrent(lambda n: n * n, range(20)) == [n * n for n in range(20)]
    gate = threading.Event()
    started, finished = set(), set()

    def work(n: int) -> int:
        started.add(n)
        if n == 3:
            gate.set()
            raise ValueError("item 3")
        gate.wait(timeout=10)  # the others run until the failing item has raised
        finished.add(n)
        return n

    with pytest.raises(ValueError, match="item 3"):
        store.map_concurrent(work, range(8))
    assert started - {3} == finished  # every started item was waited for: nothing still in flight
    assert len(started) < 8 or finished  # the batch stopped: pending items were cancelled or all ran


def test_the_many_calls_apply_the_single_call_to_each_item():
    store = _DictStore()
    store.put_many([PutRequest(f"b{n}", bytes([n])) for n in range(5)])
    sinks = [io.BytesIO() for _ in range(5)]
    from blobstate.plugin.interfaces import GetRequest

    assert store.get_many([GetRequest(f"b{n}", s) for n, s in enumerate(sinks)]) == [1] * 5
    assert [s.getvalue() for s in sinks] == [bytes([n]) for n in range(5)]
    store.delete_many(["b0", "b1", "missing"])
    assert sorted(store.blobs) == ["b2", "b3", "b4"]
    assert store.sweep_expired("", 0) == [] and store.temporaries("") == [] and store.location_exists() is None


def _record(generation: int) -> Checkpoint:
    return Checkpoint(store_key=KEY, checkpoint_id=f"1700000000000-{generation:08x}", generation=generation,
                      index_blob_id="", index_crc32c=0, index_size=0, created_time_ms=1)


class _ListLog(CheckpointLog):
    """The abstract calls over a list, to drive ``CheckpointLog``'s defaults."""

    def __init__(self, generations: int) -> None:
        self.records = [_record(g) for g in range(1, generations + 1)]

    def latest(self, key):  # noqa: ANN001, ANN201
        return self.records[-1] if self.records else None

    def history(self, key):  # noqa: ANN001, ANN201
        return list(self.records)

    def append(self, checkpoint, expected_generation):  # noqa: ANN001, ANN201
        raise NotImplementedError

    def prune(self, key, keep, *, below=None):  # noqa: ANN001, ANN201
        dropped = [cp for cp in self.records[:-keep] if below is None or cp.generation < below]
        self.records = [cp for cp in self.records if cp not in dropped]
        return dropped


class _ForgettingLog(_ListLog):
    def forget(self, key, records):  # noqa: ANN001, ANN201
        self.records = [cp for cp in self.records if cp not in records]
        return list(records)


def test_a_log_without_forget_keeps_interior_records_and_drop_only_prunes():
    log = _ListLog(5)
    assert log.can_forget is False
    with pytest.raises(NotImplementedError):
        log.forget(KEY, [log.records[2]])
    removed = log.drop(KEY, [log.records[0], log.records[2]], first_kept=2)
    assert [cp.generation for cp in removed] == [1]
    assert [cp.generation for cp in log.records] == [2, 3, 4, 5]


def test_a_log_with_forget_drops_the_interior_records_too():
    log = _ForgettingLog(5)
    assert log.can_forget is True
    removed = log.drop(KEY, [log.records[0], log.records[2]], first_kept=2)
    assert [cp.generation for cp in removed] == [1, 3]
    assert [cp.generation for cp in log.records] == [2, 4, 5]


def test_histories_reads_each_key_given_and_none_by_default():
    log = _ListLog(2)
    assert log.histories() == {} and log.keys() == []
    assert [cp.generation for cp in log.histories([KEY])[KEY]] == [1, 2]
