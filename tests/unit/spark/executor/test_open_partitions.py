"""``blobstate.spark.executor.open_partitions`` with real RocksDB files and real ``flock`` locks, no Spark: a
partition kept open between tasks only when Spark reuses its Python workers, one owner per partition directory (a
second waits, asks the owner to let go, and gets it), a directory wiped under a live handle never written by it,
and the marker of the record the copy is at."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from blobstate.errors import CommitInProgressError
from blobstate.spark.executor import open_partitions as op


@pytest.fixture
def partition(tmp_path):
    path = tmp_path / "partition-0"
    path.mkdir()
    yield str(path)
    op.close_all()


def test_without_worker_reuse_a_partition_is_closed_at_the_end_of_its_task(partition, monkeypatch):
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    entry = op.take(partition, time.monotonic() + 5)
    entry.open_db()["k"] = 1
    op.give_back(entry)
    assert op.held() == [] and entry.db is None and entry.lock_fd is None
    again = op.take(partition, time.monotonic() + 5)  # the OPEN lock was let go
    assert again is not entry and again.open_db()["k"] == 1
    op.give_back(again, close=True)


def test_with_worker_reuse_the_next_task_gets_the_open_handle(partition, monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    entry = op.take(partition, time.monotonic() + 5)
    db = entry.open_db()
    db["k"] = "v"
    op.give_back(entry)
    assert op.held() == [partition] and not entry.in_use
    again = op.take(partition, time.monotonic() + 5)
    assert again is entry and again.open_db() is db and again.in_use
    op.give_back(again)
    assert op.close_all() == 1 and op.held() == [] and entry.db is None


def test_a_second_owner_is_refused_at_its_deadline_and_asks_the_owner_to_let_go(partition, monkeypatch):
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    owner = op.OpenPartition(partition)
    owner.acquire(time.monotonic() + 5)
    other = op.OpenPartition(partition)
    with pytest.raises(CommitInProgressError, match="keeps .* open"):
        other.acquire(time.monotonic() + 0.05)
    assert owner.release_requested()
    owner.close()
    other.acquire(time.monotonic() + 5)
    assert not other.release_requested()  # the request is withdrawn once taken
    other.close()


def test_an_idle_owner_kept_open_lets_go_when_asked(partition, monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    entry = op.take(partition, time.monotonic() + 5)
    entry.open_db()
    op.give_back(entry)  # kept open; the keeper thread watches for RELEASE
    other = op.OpenPartition(partition)
    other.acquire(time.monotonic() + 10)  # asks, and the keeper closes the idle owner
    assert op.held() == [] and entry.lock_fd is None
    other.close()


def test_a_directory_wiped_under_a_live_handle_is_never_written_by_it(partition, monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    stale = op.take(partition, time.monotonic() + 5)
    stale.set_marker({"checkpointId": "c1", "batchId": 1})
    op.give_back(stale)
    shutil.rmtree(partition)
    os.mkdir(partition)
    assert not stale.current()
    with pytest.raises(FileNotFoundError):  # its directory is gone: nothing reaches the new one
        stale.set_marker({"checkpointId": "stale", "batchId": 9})
    fresh = op.take(partition, time.monotonic() + 5)
    assert fresh is not stale and fresh.marker is None and os.listdir(partition) == ["OPEN"]
    op.give_back(fresh, close=True)


def test_the_marker_and_the_staged_ops(partition):
    entry = op.OpenPartition(partition)
    entry.acquire(time.monotonic() + 5)
    assert entry.read_marker() is None
    entry.set_marker({"checkpointId": "c7", "batchId": 7})
    assert entry.read_marker() == {"checkpointId": "c7", "batchId": 7}
    entry.set_marker(None)
    assert entry.read_marker() is None
    entry.stage("c8", [("put", "k", 1)])
    assert entry.staged_ops("c8") == [("put", "k", 1)] and entry.staged_ops("c9") is None
    entry.close()


def test_why_the_keeper_closes_a_partition(partition):
    entry = op.OpenPartition(partition)
    # a whole number of seconds: (now + IDLE_CLOSE_S) - now is then exactly IDLE_CLOSE_S (with any monotonic value
    # it may round a hair below it, and the keeper rightly says "not yet")
    now = float(int(time.monotonic()))
    entry.last_used = now
    assert op._close_reason(False, now, entry) is None
    assert op._close_reason(True, now, entry) == "the executor is gone"
    assert op._close_reason(False, now + op.IDLE_CLOSE_S, entry) == "idle"
    entry.close()
