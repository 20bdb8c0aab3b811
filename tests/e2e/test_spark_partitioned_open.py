"""Partitions kept open between tasks by an executor's Python worker (``blobstate.spark.executor.open_partitions``,
issue 30), with real RocksDB files and real processes, no Spark: another process asking for a partition gets it from its
owner, which stays alive; an idle partition is closed; a partition directory removed under an open handle is never
written by that handle; RocksDB's info LOG files stay bounded however often a partition is opened."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("rocksdict")

from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark.executor import open_partitions  # noqa: E402
from blobstate.spark.partitioned.executor.partition import LocalPartition, partition_dir  # noqa: E402

KEY = StoreKey("j", "group", "s")

OWNER = textwrap.dedent("""
    import sys
    from blobstate.model.records import StoreKey
    from blobstate.spark.executor import open_partitions
    from blobstate.spark.partitioned.executor.partition import LocalPartition
    with LocalPartition(sys.argv[1], StoreKey("j", "group", "s"), 0) as local:
        db = local.open_db()
        db[b"owner"] = b"wrote this"
        db.flush_wal(True)
    print("HELD", open_partitions.held(), flush=True)
    sys.stdin.readline()  # stays alive, idle, until told
    print("AFTER", open_partitions.held(), flush=True)
""")


@pytest.fixture
def reuse(monkeypatch):
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")  # as in a Spark Python worker that Spark reuses
    yield
    open_partitions.close_all()


def test_a_partition_another_process_keeps_open_is_handed_over_on_request(reuse, tmp_path):
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=dict(os.environ, SPARK_REUSE_WORKER="1"))
    try:
        assert owner.stdout.readline().startswith("HELD ['")  # the owner keeps it open between its tasks
        t0 = time.monotonic()
        with LocalPartition(str(tmp_path), KEY, 0) as local:  # asks the owner to let go, then owns it
            assert local.open_db()[b"owner"] == b"wrote this"
        assert time.monotonic() - t0 < 10
        assert open_partitions.held() == [partition_dir(str(tmp_path), KEY, 0)]
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "AFTER []"  # the owner let go and lived on
        assert owner.wait(timeout=30) == 0
    finally:
        owner.kill()
        owner.wait()


ORPHAN = textwrap.dedent("""
    import os, subprocess, sys
    if sys.argv[2] == "parent":  # starts the owner, then dies: the owner's parent (its executor) is gone
        child = subprocess.Popen([sys.executable, "-c", sys.argv[3], sys.argv[1], "owner", sys.argv[3]],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                 text=True)
        print(child.stdout.readline().strip(), child.pid, flush=True)
        os._exit(0)
    from blobstate.model.records import StoreKey
    from blobstate.spark.executor import open_partitions
    from blobstate.spark.partitioned.executor.partition import LocalPartition
    with LocalPartition(sys.argv[1], StoreKey("j", "group", "s"), 0) as local:
        local.open_db()[b"k"] = b"v"
    print("HELD", flush=True)
    import time
    time.sleep(120)  # idle, open, until killed: only the keeper can let go
""")


def test_a_partition_is_closed_when_its_process_loses_its_parent(tmp_path):
    parent = subprocess.run([sys.executable, "-c", ORPHAN, str(tmp_path), "parent", ORPHAN], capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, SPARK_REUSE_WORKER="1"))
    said, pid = parent.stdout.split()
    assert said == "HELD"
    from blobstate.local.files import try_lock

    path = os.path.join(partition_dir(str(tmp_path), KEY, 0), open_partitions.OPEN)
    try:
        deadline, fd = time.monotonic() + 30, None
        while fd is None and time.monotonic() < deadline:  # nobody asks (no RELEASE): the keeper sees the orphan
            fd = try_lock(path)
            time.sleep(0.05)  # polling the orphan's keeper, bounded by the deadline
        assert fd is not None
        os.close(fd)
        assert not os.path.exists(os.path.join(os.path.dirname(path), open_partitions.RELEASE))
    finally:
        os.kill(int(pid), 9)


def test_an_idle_partition_is_closed_and_its_lock_let_go(reuse, tmp_path, monkeypatch):
    monkeypatch.setattr(open_partitions, "IDLE_CLOSE_S", 0.3)
    with LocalPartition(str(tmp_path), KEY, 0) as local:
        local.open_db()[b"k"] = b"v"
    path = partition_dir(str(tmp_path), KEY, 0)
    assert open_partitions.held() == [path]
    deadline = time.monotonic() + 30
    while open_partitions.held() and time.monotonic() < deadline:
        time.sleep(0.05)  # polling the keeper thread's work, bounded by the deadline
    assert open_partitions.held() == []
    from blobstate.local.files import try_lock

    fd = try_lock(os.path.join(path, open_partitions.OPEN))
    assert fd is not None  # the OPEN lock is free: any process may take the partition now
    os.close(fd)


def test_a_handle_whose_directory_was_removed_never_writes_into_the_new_one(reuse, tmp_path):
    path = partition_dir(str(tmp_path), KEY, 0)
    with LocalPartition(str(tmp_path), KEY, 0) as local:
        local.open_db()[b"old"] = b"unflushed"  # in the memtable: a close would flush it
    shutil.rmtree(str(tmp_path / "j"))  # someone wipes the host's copies under the open handle
    os.makedirs(os.path.join(path, "db"))
    with open(os.path.join(path, "db", "SENTINEL"), "w") as fh:
        fh.write("the new copy")
    before = sorted(os.listdir(os.path.join(path, "db")))
    open_partitions.close_all()  # the stale handle closes: its flush must not land in the new directory
    assert sorted(os.listdir(os.path.join(path, "db"))) == before
    with LocalPartition(str(tmp_path), KEY, 0) as local:  # a new handle on the new directory
        assert local.marker() is None
        assert local.open_db().get(b"old") is None


def test_the_info_log_files_stay_bounded_across_many_opens(tmp_path):
    for i in range(40):
        with LocalPartition(str(tmp_path), KEY, 0, keep_open=False) as local:
            local.open_db()[f"k{i}".encode()] = b"v"
    names = os.listdir(os.path.join(partition_dir(str(tmp_path), KEY, 0), "db"))
    logs = [n for n in names if n == "LOG" or n.startswith("LOG.old")]
    assert 1 <= len(logs) <= open_partitions.KEEP_LOG_FILES, sorted(names)
