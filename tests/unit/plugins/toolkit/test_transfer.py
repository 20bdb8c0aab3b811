"""``blobstate.plugins.toolkit.transfer``: the obstore transport on obstore's own in-memory store (the real
``object_store`` code, no server; S3 through moto in tests/contract), with sizes made small so that every path
runs: one request, multipart upload, ranged reads written in order, within the byte budget; the conditional writes;
obstore's errors as the store's; the transfer budget option; the rate limiter on a virtual clock."""

from __future__ import annotations

import io
import os

import pytest
from obstore.exceptions import GenericError
from obstore.store import MemoryStore

from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, StorageError, TransientStorageError
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import FileRange
from blobstate.plugins.toolkit.transfer import (
    Limits,
    MiB,
    ObjectTooLarge,
    ObstoreTransport,
    RateLimiter,
    ThrottledSink,
    _errors,
    budget_from,
    first_line,
    limiter,
    read_exact,
)

PART = 1024  # bytes per part and per ranged read here


@pytest.fixture
def transport():
    """A transport on an in-memory store: blobs above 2 KiB are multipart uploads and ranged reads of 1 KiB, at
    most 2 in flight, within a budget of 8 KiB."""
    t = ObstoreTransport(MemoryStore(), ByteBudget(8 * PART), part_size=PART, part_concurrency=2, pool_size=2)
    t.single_request_max = 2 * PART
    yield t
    t.close()


def payload(n: int) -> bytes:
    return os.urandom(n)


def test_small_bytes_and_file_ranges_go_up_in_one_request_and_come_back_whole(transport, tmp_path):
    data = payload(1500)
    transport.put("repo/a", data)
    (tmp_path / "f").write_bytes(b"head" + data + b"tail")
    transport.put("repo/b", FileRange(str(tmp_path / "f"), 4, len(data)))
    for key in ("repo/a", "repo/b"):
        sink = io.BytesIO()
        assert transport.get(key, sink) == len(data) and sink.getvalue() == data


def test_a_large_file_goes_up_in_parts_and_comes_down_as_ranged_reads_in_order_within_the_budget(transport, tmp_path):
    data = payload(7 * PART + 123)  # 8 parts, the last one short
    (tmp_path / "big").write_bytes(data)
    transport.put("repo/big", FileRange(str(tmp_path / "big"), 0, len(data)))
    sink = io.BytesIO()
    assert transport.get("repo/big", sink) == len(data) and sink.getvalue() == data
    assert transport.budget.used == 0 and transport.budget.peak <= transport.budget.limit


def test_a_file_that_shrank_while_it_was_uploaded_is_a_storage_error(transport, tmp_path):
    (tmp_path / "f").write_bytes(payload(100))
    with pytest.raises(StorageError, match="shrank while it was uploaded"):
        transport.put("repo/f", FileRange(str(tmp_path / "f"), 0, 200))
    assert not transport.exists("repo/f")
    with pytest.raises(StorageError, match="x shrank"):
        read_exact(io.BytesIO(b"abc"), 4, "x")


def test_a_read_over_max_size_is_refused_before_its_body_and_a_missing_object_is_file_not_found(transport):
    transport.put("repo/a", payload(300))
    tags: list[str] = []
    with pytest.raises(ObjectTooLarge, match="300 bytes, more than 299"):
        transport.get("repo/a", io.BytesIO(), max_size=299, tags=tags)
    assert tags and tags[0]  # the GET's entity tag, for a conditional rewrite
    with pytest.raises(FileNotFoundError):
        transport.get("repo/missing", io.BytesIO())


def test_create_only_and_conditional_replace(transport):
    transport.put_exclusive("repo/m", b"one")
    with pytest.raises(FileExistsError):
        transport.put_exclusive("repo/m", b"two")  # If-None-Match: *
    tags: list[str] = []
    transport.get("repo/m", io.BytesIO(), tags=tags)
    transport.put_exclusive("repo/m", b"three", version=tags[0])  # If-Match the version read
    with pytest.raises(FileExistsError):
        transport.put_exclusive("repo/m", b"four", version=tags[0])  # that version is gone
    sink = io.BytesIO()
    transport.get("repo/m", sink)
    assert sink.getvalue() == b"three"


def test_listing_existence_and_bulk_deletes(transport):
    for key in ("repo/x/1", "repo/x/2", "repo/y/1"):
        transport.put(key, b"data")
    assert sorted(i["name"] for i in transport.list("repo/x")) == ["repo/x/1", "repo/x/2"]
    assert {i["size"] for i in transport.list("")} == {4} and len(transport.list("")) == 3
    assert transport.exists("repo/y/1") and not transport.exists("repo/y/2")
    transport.delete(["repo/x/1", "repo/y/1", "repo/never-there"])  # missing keys are fine
    transport.delete([])
    assert [i["name"] for i in transport.list("")] == ["repo/x/2"]


@pytest.mark.parametrize("status, error", [("403 Forbidden", StorageError), ("404 Not Found", StorageError),
                                           ("429 Too Many Requests", TransientStorageError),
                                           ("408 Request Timeout", TransientStorageError),
                                           ("503 Slow Down", TransientStorageError)])
def test_a_services_answer_is_final_for_a_4xx_and_transient_otherwise(status, error):
    with pytest.raises(error) as info, _errors():
        raise GenericError(f"Generic S3 error: status code: {status}\nDebug source: a long dump")
    assert type(info.value) is error and "\n" not in str(info.value) and status in str(info.value)


def test_a_fault_without_a_status_is_transient_and_messages_keep_their_first_line():
    with pytest.raises(TransientStorageError), _errors():
        raise GenericError("connection reset by peer")
    assert first_line(ValueError("  one\ntwo\nthree")) == "one"


@pytest.mark.parametrize("raw, budget", [(None, 5 * MiB), ("96MiB", 96 * MiB), (2 * MiB, 2 * MiB)])
def test_the_transfer_budget_option_is_taken_out_of_the_options(raw, budget):
    options = {"anon": True} if raw is None else {"anon": True, "transfer_budget": raw}
    assert budget_from(options, 5 * MiB) == budget and options == {"anon": True}


@pytest.mark.parametrize("raw, why", [("lots", "must be a size"), ("1KiB", "at least 1048576 bytes")])
def test_a_transfer_budget_that_is_no_size_or_under_one_mib_is_refused(raw, why):
    with pytest.raises(ConfigurationError, match=why):
        budget_from({"transfer_budget": raw})


class Clock:
    """Virtual time: ``sleep`` moves it on."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_the_rate_limiter_lets_a_burst_pass_then_spaces_the_bytes_at_its_rate():
    clock = Clock()
    bucket = RateLimiter(1000, burst=100, clock=clock, sleep=clock.sleep)
    assert bucket.take(100) == 0.0  # the burst
    assert bucket.take(500) == pytest.approx(0.5)  # 500 bytes at 1000 B/s
    clock.now += 10  # idle: the bucket fills up again, but never above its burst
    assert bucket.take(100) == 0.0 and bucket.take(100) == pytest.approx(0.1)
    assert bucket.take(0) == 0.0 and bucket.taken == 800 and clock.slept == [0.5, 0.1]
    with pytest.raises(ConfigurationError, match="at least 1 byte per second"):
        RateLimiter(0)


def test_one_limiter_per_direction_and_rate_shared_by_the_process():
    assert limiter("upload", None) is None
    assert limiter("upload", 12_345) is limiter("upload", 12_345)
    assert limiter("download", 12_345) is not limiter("upload", 12_345)
    limits = Limits.of(Settings(limit_upload=12_345))
    assert limits.upload is limiter("upload", 12_345) and limits.download is None
    assert Limits.of(None).upload is None


def test_a_throttled_sink_takes_every_write_from_its_bucket():
    clock = Clock()
    bucket = RateLimiter(1000, burst=1000, clock=clock, sleep=clock.sleep)
    sink = ThrottledSink(io.BytesIO(), bucket)
    assert sink.write(b"x" * 600) == 600 and sink.write(b"y" * 600) == 600
    assert bucket.taken == 1200 and clock.slept == [pytest.approx(0.2)]
    assert sink.getvalue() == b"x" * 600 + b"y" * 600  # everything else is the sink's own
