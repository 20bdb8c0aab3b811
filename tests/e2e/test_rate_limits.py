"""``--limit-upload`` / ``--limit-download``: a token bucket per direction, shared by every transfer of the process,
applied where bytes move (the fsspec store for file://, the obstore transport for S3). Each test asserts a lower
bound on the time a limited transfer takes (N bytes at R bytes/s, less the bucket's burst, take at least that
long): the limiter's effect, not a speed target."""

from __future__ import annotations

import io
import os
import time

import pytest

from blobstate import api
from blobstate.config.settings import Settings
from blobstate.plugin.interfaces import GetRequest, PutRequest
from blobstate.plugins.toolkit.transfer import RateLimiter, limiter
from blobstate.repository.backends import open_blob_store

KiB = 1024
RATE = 1024 * KiB  # bytes per second
SLACK_S = 0.05  # timer resolution and scheduling


def _burst() -> float:
    return RateLimiter(RATE).burst


def test_the_bucket_lets_through_its_rate_and_no_more():
    now = [0.0]
    slept = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    bucket = RateLimiter(1000, burst=100, clock=lambda: now[0], sleep=sleep)
    assert bucket.take(100) == 0  # the burst passes at once
    for _ in range(10):
        bucket.take(100)
    assert now[0] == pytest.approx(1.0)  # 1,100 bytes at 1,000/s with a burst of 100: one second of waiting


@pytest.mark.parametrize("where", ["file", pytest.param("s3", marks=pytest.mark.slow),
                                   pytest.param("azure", marks=pytest.mark.slow)])
def test_concurrent_uploads_and_downloads_share_one_limit(tmp_path, where, request):
    limited = Settings(limit_upload=RATE, limit_download=RATE)  # the limits the store is opened with
    if where in ("s3", "azure"):
        target = request.getfixturevalue(f"{where}_target")
        store = open_blob_store(target.url, settings=limited, storage_options=target.storage_options,
                                ttl_mode="native", max_concurrency=4)
    else:
        store = open_blob_store(f"file://{tmp_path}/repo", settings=limited, max_concurrency=4)
    parts = 4
    size = 384 * KiB  # four at once: 1.5 MiB
    src = tmp_path / "src.bin"
    src.write_bytes(os.urandom(size))
    from blobstate.plugin.interfaces import FileRange

    puts = [PutRequest(f"j/t/s/blobs/{i:032x}", FileRange(str(src), 0, size)) for i in range(parts)]
    t0 = time.monotonic()
    store.put_many(puts)
    up_s = time.monotonic() - t0
    sinks = [io.BytesIO() for _ in puts]
    t0 = time.monotonic()
    store.get_many([GetRequest(p.blob_id, sink) for p, sink in zip(puts, sinks, strict=True)])
    down_s = time.monotonic() - t0
    upload, download = limiter("upload", RATE), limiter("download", RATE)
    assert upload is not None and download is not None
    assert upload.taken >= parts * size and download.taken >= parts * size
    floor = (parts * size - _burst()) / RATE - SLACK_S  # one limit for all four transfers, not one each
    assert up_s >= floor, (up_s, floor)
    assert down_s >= floor, (down_s, floor)
    assert all(s.getvalue() == src.read_bytes() for s in sinks)
    store.close()


def test_the_cli_limits_a_restore(tmp_path, work_base, cli):
    size = 2048 * KiB
    src = tmp_path / "counts"
    src.mkdir()
    (src / "data.bin").write_bytes(os.urandom(size))
    url = f"file://{tmp_path}/repo"
    api.backup(str(src), repo=url, store_type="dir")
    other_host = tmp_path / "other-host"  # no local checkpoint to reuse: every byte is downloaded
    other_host.mkdir()
    t0 = time.monotonic()
    result = cli("restore", str(other_host / "out"), "--repo", url, "--store", "counts", "--store-type", "dir",
                 "--json", "-v", "--limit-download", "1MiB", work=other_host)
    elapsed = time.monotonic() - t0
    assert result.returncode == 0, result.stderr
    assert result.json()["bytesDownloaded"] == size, result.stdout
    assert f"downloads limited to {RATE} bytes/s" in result.stderr  # the option reached the transfers
    assert elapsed >= (size - _burst()) / RATE - SLACK_S, elapsed
    assert (other_host / "out" / "data.bin").read_bytes() == (src / "data.bin").read_bytes()
