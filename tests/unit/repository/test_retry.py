"""``call_with_retry`` makes the first attempt itself and hands tenacity only a call whose first attempt failed
transiently (issue 31: tenacity's import is left out of a command whose calls all succeed): the attempts, the
retried-call log lines and the errors are those of a ``Retrying`` around every attempt. ``is_transient`` tells the
faults a retry may cure; ``RetryingBlobStore`` around a real ``file://`` store whose calls fail first rewinds a
download's sink to where it began, gives a sink that cannot rewind one attempt, turns a storage fault into its
one-line error and retries a batch per item unless the store has its own batch call."""

from __future__ import annotations

import errno
import io
import logging

import pytest

from blobstate.errors import BlobNotFound, BucketNotFoundError, ChecksumMismatch, StorageError, TransientStorageError
from blobstate.plugin.interfaces import BoundedSink, GetRequest, PutRequest
from blobstate.plugins.fsspec_store import FsspecBlobStore
from blobstate.repository.retry import RetryingBlobStore, call_with_retry, is_transient


class Flaky:
    """Raises ``faults`` in turn, then returns ``"ok"``; counts its calls."""

    def __init__(self, *faults: BaseException) -> None:
        self.faults = list(faults)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.faults:
            raise self.faults.pop(0)
        return "ok"


def test_a_call_that_succeeds_is_made_once():
    fn = Flaky()
    assert call_with_retry(fn, "read of x", attempts=3) == "ok"
    assert fn.calls == 1


def test_a_transient_first_attempt_is_retried_with_one_log_line_per_retry(caplog):
    fn = Flaky(TransientStorageError("slow down"), ConnectionError("reset"))
    with caplog.at_level(logging.INFO, logger="blobstate.repository.retry"):
        assert call_with_retry(fn, "read of x", attempts=3) == "ok"
    assert fn.calls == 3
    assert [r.getMessage() for r in caplog.records] == ["retrying read of x after TransientStorageError: slow down",
                                                        "retrying read of x after ConnectionError: reset"]


def test_transient_faults_outlasting_the_attempts_become_one_storage_error():
    fn = Flaky(*(ConnectionError(f"down {i}") for i in range(5)))
    with pytest.raises(StorageError, match=r"^read of x failed after 3 attempts: ConnectionError: down 2$") as info:
        call_with_retry(fn, "read of x", attempts=3)
    assert fn.calls == 3
    assert isinstance(info.value.__cause__, ConnectionError)


def test_a_single_attempt_that_fails_transiently_is_not_retried():
    fn = Flaky(ConnectionError("down"))
    with pytest.raises(StorageError, match="failed after 1 attempts"):
        call_with_retry(fn, "read of x", attempts=1)
    assert fn.calls == 1


@pytest.mark.parametrize("first", [True, False], ids=["first attempt", "after a retry"])
def test_a_permanent_fault_passes_through_at_once(first):
    missing = BlobNotFound("no such blob")
    fn = Flaky(missing) if first else Flaky(TransientStorageError("slow down"), missing)
    with pytest.raises(BlobNotFound) as info:
        call_with_retry(fn, "read of x", attempts=5)
    assert info.value is missing
    assert fn.calls == (1 if first else 2)


def test_an_sdk_error_becomes_a_storage_error_naming_the_call():
    fn = Flaky(ZeroDivisionError("boom"))
    with pytest.raises(StorageError, match=r"^read of x failed: ZeroDivisionError: boom$"):
        call_with_retry(fn, "read of x", attempts=5)
    assert fn.calls == 1


# -- is_transient and RetryingBlobStore (issue 40: the rest of the module) -------------------------------------------


class ThrottledError(Exception):
    """An SDK's error type whose name says it is transient (as botocore's ``Throttling`` codes, aiohttp's)."""


@pytest.mark.parametrize("exc, transient", [
    (TransientStorageError("x"), True), (ConnectionResetError(), True), (TimeoutError(), True),
    (OSError(errno.EAGAIN, "again"), True), (OSError(errno.ETIMEDOUT, "t"), True), (ThrottledError(), True),
    (type("ServiceUnavailableError", (Exception,), {})(), True),
    (BlobNotFound("b"), False), (ChecksumMismatch("c"), False), (StorageError("s"), False),
    (FileNotFoundError(), False), (FileExistsError(), False), (PermissionError(), False),
    (IsADirectoryError(), False), (OSError(errno.ENOSPC, "full"), False), (ValueError("bug"), False),
])
def test_which_faults_a_retry_may_cure(exc, transient):
    assert is_transient(exc) is transient


class FlakyStore(FsspecBlobStore):
    """A real ``file://`` store whose calls named in ``faults`` fail first: each entry is the exception to raise,
    after ``partial`` bytes of a download were written (a connection cut in the middle)."""

    def __init__(self, url: str, **faults: list) -> None:
        super().__init__(url)
        self.faults = faults
        self.calls: dict[str, int] = {}

    def _fault(self, name: str) -> BaseException | None:
        self.calls[name] = self.calls.get(name, 0) + 1
        pending = self.faults.get(name) or []
        return pending.pop(0) if pending else None

    def get(self, blob_id, sink):
        fault = self._fault("get")
        if fault is not None:
            sink.write(b"GARBAGE-")  # part of a response, then the connection drops
            raise fault
        return super().get(blob_id, sink)

    def get_bounded(self, blob_id, sink):
        fault = self._fault("get_bounded")
        if fault is not None:
            sink.write(b"GARBAGE-")
            raise fault
        return super().get_bounded(blob_id, sink)

    def put(self, request):
        fault = self._fault("put")
        if fault is not None:
            raise fault
        return super().put(request)


def blob(n: int) -> str:
    return f"job/0/s/blobs/{n:032x}"


def test_a_retried_download_rewrites_the_same_byte_range_of_a_seekable_sink(tmp_path):
    inner = FlakyStore(f"file://{tmp_path}", get=[ConnectionResetError("reset"), TimeoutError("slow")])
    store = RetryingBlobStore(inner)
    store.put(PutRequest(blob(1), b"the blob"))
    sink = io.BytesIO()
    sink.write(b"chunk0|")  # the file's earlier chunks: never truncated
    assert store.get(blob(1), sink) == 8
    assert sink.getvalue() == b"chunk0|the blob" and inner.calls["get"] == 3


def test_a_download_into_a_sink_that_cannot_rewind_gets_one_attempt(tmp_path):
    class Stream(io.RawIOBase):
        def writable(self):
            return True

        def write(self, data):
            return len(data)

    inner = FlakyStore(f"file://{tmp_path}", get=[ConnectionResetError("reset")])
    store = RetryingBlobStore(inner)
    store.put(PutRequest(blob(1), b"x"))
    with pytest.raises(StorageError, match=rf"download of {blob(1)} failed after 1 attempts: ConnectionResetError"):
        store.get(blob(1), Stream())
    assert inner.calls["get"] == 1


def test_a_retried_bounded_read_starts_its_sink_again(tmp_path):
    store = RetryingBlobStore(FlakyStore(f"file://{tmp_path}", get_bounded=[ConnectionResetError("reset")]))
    store.put(PutRequest(blob(2), b"index"))
    sink = BoundedSink(10, "the index")  # the first attempt's 8 bytes and the index's 5 would not fit
    assert store.get_bounded(blob(2), sink) == b"index" and sink.getvalue() == b"index"


def test_a_storage_fault_becomes_its_one_line_error_with_the_sdks_as_cause(tmp_path):
    cause = RuntimeError("An error occurred (NoSuchBucket) when calling the PutObject operation")
    store = RetryingBlobStore(FlakyStore(f"file://{tmp_path}", put=[cause]))
    with pytest.raises(BucketNotFoundError) as info:
        store.put(PutRequest(blob(3), b"x"))
    assert isinstance(info.value.__cause__, StorageError) and info.value.__cause__.__cause__ is cause


def test_batches_without_a_native_call_retry_each_item(tmp_path):
    inner = FlakyStore(f"file://{tmp_path}", put=[ConnectionResetError("1"), ConnectionResetError("2")])
    store = RetryingBlobStore(inner)
    store.put_many([PutRequest(blob(i), f"b{i}".encode()) for i in range(4)])
    sinks = [io.BytesIO() for _ in range(4)]
    assert store.get_many([GetRequest(blob(i), s) for i, s in enumerate(sinks)]) == [2] * 4
    assert [s.getvalue() for s in sinks] == [b"b0", b"b1", b"b2", b"b3"] and inner.calls["put"] == 6
    store.delete_many([blob(0), blob(1)])
    assert sorted(i.blob_id for i in store.list("job/0/s")) == [blob(2), blob(3)]


def test_a_native_batch_call_is_one_retried_call(tmp_path):
    class Bulk(FlakyStore):
        def delete_many(self, blob_ids):
            self.calls["delete_many"] = self.calls.get("delete_many", 0) + 1
            if self.calls["delete_many"] == 1:
                raise ConnectionResetError("reset")
            for b in blob_ids:
                self.delete(b)

    inner = Bulk(f"file://{tmp_path}")
    store = RetryingBlobStore(inner)
    store.put_many([PutRequest(blob(i), b"x") for i in range(3)])
    store.delete_many(iter([blob(0), blob(1)]))
    store.delete_many([])  # nothing: no call
    assert inner.calls["delete_many"] == 2 and [i.blob_id for i in store.list("job/0/s")] == [blob(2)]


def test_the_attempts_come_from_the_settings_the_store_was_opened_with(tmp_path):
    from blobstate.config.settings import Settings
    from blobstate.repository.backends import open_blob_store

    settings = Settings.from_environ({"BLOBSTATE_RETRY_ATTEMPTS": "2"})
    store = open_blob_store(f"file://{tmp_path}", settings=settings)
    assert isinstance(store, RetryingBlobStore) and store.attempts == 2
    fn = Flaky(*(ConnectionResetError("down") for _ in range(5)))
    with pytest.raises(StorageError, match="failed after 2 attempts"):
        store._call(fn, "read of x")
    assert fn.calls == 2
    assert open_blob_store(f"file://{tmp_path}").attempts == 5  # no settings handed in: the defaults
