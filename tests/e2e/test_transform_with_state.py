"""``blobstate.spark.transform_with_state`` end to end on local Spark: the five processors of ``tests/processors``
(written only against Spark's API) run through it on the driver's store and on N=4 partitions, over the same input
files as Spark's own ``transformWithStateInPandas`` (RocksDB provider, changelog checkpointing).

* time-insensitive processors (running count, top-N: time mode None; sessions: EventTime, whose times are Spark's
  watermark, the same in both runs): the output rows per batch id and the final state (Spark's state data source
  at its last batch with input, before its trailing no-data batches) are Spark's;
* processing-time TTL processors (dedup, page visits): each run has its own clock, so our output and final state
  are checked against the plain-Python reference (``tests/processors/reference.py``, itself checked against Spark
  with Spark's times) fed with the batch timestamps our own query's offset log recorded.

Slow (a few streaming queries per case): ``python -m pytest -n 0 tests/e2e/test_transform_with_state.py``.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any

import pandas as pd
import pytest
from rocksdict import Rdict

from blobstate import api
from blobstate.spark.processor import StateReader
from tests.processors import dedup, page_visits, reference, running_count, sessions
from tests.processors.reference import Batch, canonical
from tests.processors.test_against_spark import (
    CASES,
    _flat,
    _log,
    committed_batches,
    input_stream,
    on_spark,
    read_everything,
    run_until,
    spark_state,
    with_rocksdb,
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-processors")]

@pytest.fixture
def spark(spark_session):
    yield from with_rocksdb(spark_session)


WATERMARK_MS = {"sessions": sessions.WATERMARK_DELAY_MS}
STATE_VAR = {"running_count": "count", "dedup": "seen", "top_n": "top", "page_visits": "visits"}


def run_ours(spark: Any, tmp_path: Any, name: str, source: Any, partitions: int | None, *, flavour: str = "pandas",
             make: Any = None, last_file: int) -> tuple[dict[int, list[dict]], str]:
    """``name``'s processor through ``transform_with_state`` over ``source`` until a committed batch read file
    ``last_file``; returns the output rows by batch id and the checkpoint location."""
    from blobstate.spark import transform_with_state

    make_default, _, keys, output, time_mode, watermark, _ = CASES[name]
    outputs: dict[int, list[dict]] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]  # an overwrite by batch id: idempotent

    checkpoint = str(tmp_path / "ours-checkpoint")
    query = transform_with_state(
        input_stream(spark, source), (make or make_default)(), key_cols=keys, output_schema=output,
        time_mode=time_mode, sink=sink, repo=f"file://{tmp_path}/repo", checkpoint_location=checkpoint, job="tws",
        store=name, num_partitions=partitions, flavour=flavour, state_dir=str(tmp_path / "driver-state"),
        local_dir=str(tmp_path / "local"), event_time_column=watermark[0] if watermark else None,
        watermark_delay_ms=WATERMARK_MS.get(name, 0))
    try:
        run_until(query, lambda: read_everything(checkpoint, last_file), "blobstate's query did not read every file")
    finally:
        query.close()
    committed = committed_batches(checkpoint)
    return {b: rows for b, rows in outputs.items() if b in committed}, checkpoint


def our_state(tmp_path: Any, name: str, partitions: int | None, *, as_of_ms: int | None = None,
              timers: bool = False) -> list[dict]:
    """The final state of ``name``'s processor, restored from the repository and read with ``StateReader``."""
    dest = tmp_path / "restored"
    repo = f"file://{tmp_path}/repo"
    if partitions is None:
        api.restore(str(dest / "0"), repo=repo, job="tws", task="0", store=name)
        dirs = [dest / "0"]
    else:
        api.restore_partitions(str(dest), repo=repo, job="tws", task="group", store=name)
        dirs = [dest / str(p) for p in range(partitions)]
    rows: list[dict] = []
    for d in dirs:
        db = Rdict(str(d))
        try:
            reader = StateReader(db)
            if reader.metadata.variables:
                rows += reader.read_timers().to_pylist() if timers else \
                    reader.read_variable(STATE_VAR[name], as_of_ms=as_of_ms).to_pylist()
        finally:
            db.close()
    return [_flat(r) for r in rows]


def offsets(checkpoint: str, batch_id: int) -> dict:
    return json.loads(_log(os.path.join(checkpoint, "offsets", str(batch_id)))[1])


@pytest.mark.parametrize(("name", "partitions"), [
    pytest.param(name, partitions, id=f"{name}-{'driver' if partitions is None else 'n4'}",
                 # the suite keeps every processor partitioned and the running count on the driver too
                 marks=[pytest.mark.long] if partitions is None and name != "running_count" else [])
    for name in ("running_count", "top_n", "sessions") for partitions in (None, 4)])
def test_the_same_outputs_and_state_as_sparks_operator(spark, tmp_path, name, partitions):
    make, frames, keys, output, time_mode, watermark, state_options = CASES[name]
    spark_out, spark_checkpoint, files = on_spark(spark, tmp_path, make, frames(), keys, output, time_mode,
                                                  watermark)
    last_file = len(files) - 1
    ours, _ = run_ours(spark, tmp_path, name, tmp_path / "in", partitions, last_file=last_file)
    last_data = max(files)  # Spark's batch that read the last file; later ones are its trailing no-data batches
    # input always waiting, Spark runs no no-data batch before the last file: batch for batch on both sides
    assert sorted(ours) == sorted(b for b in spark_out if b <= last_data)
    for batch_id in ours:
        assert canonical(ours[batch_id]) == canonical(spark_out[batch_id]), f"batch {batch_id}"
    assert any(ours.values())
    expected = spark_state(spark, spark_checkpoint, batchId=last_data, **state_options)
    got = our_state(tmp_path, name, partitions, timers="readRegisteredTimers" in state_options)
    assert canonical(got) == canonical([_flat(r) for r in expected])
    # the same state as data, through blobstate.spark.read_state(state_var=) / read_timers: Spark's columns
    assert canonical(as_data(spark, tmp_path, name, state_options)) == canonical([_flat(r) for r in expected])
    if name == "running_count":  # and the change feed (readChangeFeed with stateVarName), batch by batch
        # blobstate's feed holds the batches whose deltas the repository retains (the driver store's snapshots
        # let retention drop the older ones): compared with Spark's over the same batches, up to the last one
        ours_changes = as_data(spark, tmp_path, name, state_options, changes=True)
        batches = {row["batch_id"] for row in ours_changes}
        assert ours_changes and max(batches) == last_data, sorted(batches)
        assert batches == set(range(min(batches), last_data + 1)), sorted(batches)
        spark_changes = spark_state(spark, spark_checkpoint, readChangeFeed="true", changeStartBatchId=min(batches),
                                    changeEndBatchId=last_data, **state_options)
        assert canonical(ours_changes) == canonical([_flat(r) for r in spark_changes]) and spark_changes


def as_data(spark: Any, tmp_path: Any, name: str, state_options: dict, *, changes: bool = False) -> list[dict]:
    """``name``'s final state (``changes``: its change feed) read with ``blobstate.spark.read_state`` /
    ``read_timers`` / ``read_changes``, without ``partition_id`` (Spark's own has its own partitioning)."""
    from blobstate.spark import read_changes, read_state, read_timers

    where = {"repo": f"file://{tmp_path}/repo", "job": "tws", "store": name}
    if changes:
        df = read_changes(spark, **where, state_var=state_options["stateVarName"])
    elif "readRegisteredTimers" in state_options:
        df = read_timers(spark, **where)
    else:
        df = read_state(spark, **where, state_var=state_options["stateVarName"])
    assert df.columns[-1] == "partition_id"
    return [_flat({k: v for k, v in r.asDict(recursive=True).items() if k != "partition_id"}) for r in df.collect()]


@pytest.mark.parametrize("partitions", [None, 4], ids=["driver", "n4"])
@pytest.mark.parametrize("name", ["dedup", "page_visits"])
def test_ttl_processors_follow_spark_semantics_on_their_own_batch_times(spark, tmp_path, name, partitions):
    from tests.processors.test_against_spark import write_inputs

    _, frames, *_ = CASES[name]
    data = frames()
    source = write_inputs(tmp_path / "in", data)
    ours, checkpoint = run_ours(spark, tmp_path, name, source, partitions, last_file=len(data) - 1)
    assert sorted(ours) == list(range(len(data)))  # foreachBatch: one batch per file, no no-data batches
    batches = [Batch(frame, offsets(checkpoint, b)["batchTimestampMs"]) for b, frame in enumerate(data)]
    ref = {"dedup": reference.dedup_ref, "page_visits": reference.page_visits_ref}[name]
    expected_out, expected_state = ref(batches)
    for batch_id, rows in enumerate(expected_out):
        assert canonical(ours[batch_id]) == canonical(rows), f"batch {batch_id}"
    got = our_state(tmp_path, name, partitions, as_of_ms=batches[-1].at)
    if name == "dedup":
        assert {r["key"][0][1]: dict(r["value"])["ttlExpirationMs"] for r in got} == expected_state
        assert expected_state and all(e > batches[-1].at for e in expected_state.values())
        assert max(expected_state.values()) <= batches[-1].at + dedup.TTL_MS
    else:
        assert {(r["key"][0][1], r["user_map_key"][0][1]): (dict(dict(r["user_map_value"])["value"])["visits"],
                                                             dict(r["user_map_value"])["ttlExpirationMs"])
                for r in got} == expected_state
        assert expected_state and max(e for _, e in expected_state.values()) <= batches[-1].at + page_visits.TTL_MS


def sessions_expected(checkpoint: str, data: list[Any]) -> tuple[dict[int, list[dict]], dict]:
    """What the sessions processor must emit per batch of our query, and its final state, by the reference
    (``reference.sessions_ref``) fed with our query's times: the watermark Spark recorded in ``offsets/N`` for the
    timers, the previous batch's for the late rows."""
    batches, previous = [], None
    for b, frame in enumerate(data):
        meta = offsets(checkpoint, b)
        batches.append(Batch(frame, meta["batchTimestampMs"], meta["batchWatermarkMs"], previous))
        previous = meta["batchWatermarkMs"]
    out, state = reference.sessions_ref(batches)
    return dict(enumerate(out)), state


@pytest.mark.parametrize("partitions", [pytest.param(None, id="driver", marks=pytest.mark.long),
                                        pytest.param(4, id="n4")])
def test_a_timer_fires_exactly_once_across_a_sigkill_between_commit_and_sink(tmp_path, partitions):
    """The query is SIGKILLed right after the commit point of its 4th batch (its record appended; foreachBatch
    not returned, so the sink never saw that batch), then restarted: Spark re-runs the batch from the state before
    it with the same times, the sink gets the same rows once (an overwrite by batch id), and every session closed
    by a timer is emitted exactly once."""
    import signal

    from tests.processors import inputs
    from tests.processors.test_against_spark import write_inputs
    from tests.support.spark_fixtures import child_env, run_in_group

    data = [f for f in inputs.sessions_events() if f is not None]
    source = write_inputs(tmp_path / "in", data)
    config = {"source": str(source), "checkpoint": str(tmp_path / "checkpoint"), "repo": f"file://{tmp_path}/repo",
              "out": str(tmp_path / "out"), "partitions": partitions, "state_dir": str(tmp_path / "driver-state"),
              "local": str(tmp_path / "local"), "last_file": len(data) - 1}
    path = tmp_path / "child.json"
    path.write_text(json.dumps(config))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = os.path.join(root, "tests", "support", "stateful_child.py")
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join([root, env["PYTHONPATH"]])  # the executors unpickle tests.processors
    kind = "delta" if partitions is None else "group"
    killed = dict(env, BLOBSTATE_PLUGINS="kill_plugin", BLOBSTATE_TEST_KILL_AT=f"CheckpointWritten:4:{kind}",
                  BLOBSTATE_TEST_KILL_GROUP="1")
    code, out, err = run_in_group([sys.executable, child, str(path)], killed, timeout=600)
    assert code == -signal.SIGKILL, (code, out, err)
    done = sorted(committed_batches(config["checkpoint"]))
    assert done == [0, 1, 2]  # batch 3 committed in blobstate, never in Spark
    assert not os.path.exists(tmp_path / "out" / "3.json")  # killed before its sink
    code, out, err = run_in_group([sys.executable, child, str(path)], env, timeout=600)
    assert code == 0 and "not killed" in out, (code, out, err)

    got = {int(n[:-5]): json.loads((tmp_path / "out" / n).read_text())
           for n in os.listdir(tmp_path / "out") if n.endswith(".json")}
    expected, state = sessions_expected(config["checkpoint"], data)
    assert sorted(got) == sorted(expected)
    for b in expected:
        assert canonical(got[b]) == canonical(expected[b]), f"batch {b}"
    assert got[3]  # the killed batch fires a timer (the watermark of the input files' events reaches one)
    closed = [(r["user"], r["start_ms"]) for rows in got.values() for r in rows]
    assert closed and len(closed) == len(set(closed))  # each timer's session emitted exactly once
    assert any(got[3])  # the re-run batch fired timers and its output reached the sink
    timers = our_state(tmp_path, "sessions", partitions, timers=True)
    assert sorted(dict(r["key"])["user"] for r in timers) == sorted(state)


def test_the_rows_flavour_on_four_partitions(spark, tmp_path):
    """``flavour="rows"`` (Spark's ``transformWithState``: ``Row``s in and out) through the partitioned state: the
    running count, batch for batch and its final state, as the reference counts it."""
    from tests.processors import inputs, running_count
    from tests.processors.test_against_spark import write_inputs

    data = inputs.running_count()
    source = write_inputs(tmp_path / "in", data)
    ours, _ = run_ours(spark, tmp_path, "running_count", source, 4, flavour="rows",
                       make=running_count.RunningCountRows, last_file=len(data) - 1)
    expected, counts = reference.running_count([Batch(frame, 0) for frame in data])
    assert sorted(ours) == list(range(len(data)))
    for batch_id, rows in enumerate(expected):
        assert canonical(ours[batch_id]) == canonical(rows), f"batch {batch_id}"
    got = our_state(tmp_path, "running_count", 4)
    assert {dict(r["key"])["k"]: dict(r["value"])["count"] for r in got} == counts


def test_the_heartbeat_keeps_batches_coming_so_timers_fire_without_input(spark, tmp_path):
    """``heartbeat=True``: once the last file is read, batches of heartbeat rows only keep coming (Spark's batch ids,
    no input for the processor): the watermark the last file moved fires the sessions' timers there, every batch's
    rows as the reference gives them for that batch's input and times."""
    from blobstate.spark import transform_with_state
    from tests.processors import inputs
    from tests.processors.test_against_spark import write_inputs

    data = [f for f in inputs.sessions_events() if f is not None]
    source = write_inputs(tmp_path / "in", data)
    outputs: dict[int, list[dict]] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]

    checkpoint = str(tmp_path / "ours-checkpoint")
    query = transform_with_state(
        input_stream(spark, source), sessions.Sessions(), key_cols=["user"], output_schema=sessions.OUTPUT,
        time_mode="EventTime", sink=sink, repo=f"file://{tmp_path}/repo", checkpoint_location=checkpoint,
        job="tws", store="sessions", state_dir=str(tmp_path / "driver-state"), event_time_column="ts",
        watermark_delay_ms=sessions.WATERMARK_DELAY_MS, heartbeat=True)

    def file_of(batch_id: int) -> int:
        return json.loads(_log(os.path.join(checkpoint, "offsets", str(batch_id)))[2])["logOffset"]

    def idle_batch_committed() -> bool:  # a batch after the one that read the last file
        done = sorted(committed_batches(checkpoint))
        last = next((b for b in done if file_of(b) >= len(data) - 1), None)
        return last is not None and done[-1] > last

    try:
        run_until(query, idle_batch_committed, "no batch without input came")
    finally:
        query.close()
    done = sorted(committed_batches(checkpoint))
    batches, seen, previous = [], -1, None
    for b in done:
        meta, offset = offsets(checkpoint, b), file_of(b)
        batches.append(Batch(data[offset] if offset > seen else None, meta["batchTimestampMs"],
                             meta["batchWatermarkMs"], previous))
        seen, previous = max(seen, offset), meta["batchWatermarkMs"]
    expected, _ = reference.sessions_ref(batches)
    assert any(b.data is None and rows for b, rows in zip(batches, expected, strict=True))  # fired without input
    for b, rows in zip(done, expected, strict=True):
        assert canonical(outputs[b]) == canonical(rows), f"batch {b}"


INITIAL_SEED = [("k0", 100), ("k1", 200), ("k39", 7), ("only-initial", 5)]  # the last key never gets input


def _collect_into(outputs: dict) -> Any:
    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]
    return sink


@pytest.fixture(scope="module")
def sparks_initial_run(spark_session, tmp_path_factory):
    """Spark's own ``transformWithStateInPandas(..., initialState=seed.groupBy("k"))`` of the running count over two
    input files, once for the module: ``(input folder, output by batch id, final state rows)``."""
    from tests.processors import inputs, running_count
    from tests.processors.test_against_spark import write_inputs

    tmp_path = tmp_path_factory.mktemp("initial")
    conf = with_rocksdb(spark_session)
    spark = next(conf)
    try:
        data = inputs.running_count(2)
        source = write_inputs(tmp_path / "in", data)
        initial = spark.createDataFrame(INITIAL_SEED, "k string, count long")
        outputs: dict[int, list[dict]] = {}
        checkpoint = str(tmp_path / "spark-checkpoint")
        query = (input_stream(spark, source).groupBy("k").transformWithStateInPandas(
            running_count.RunningCountFrom(), outputStructType=running_count.OUTPUT, outputMode="Update",
            timeMode="None", initialState=initial.groupBy("k"))
            .writeStream.foreachBatch(_collect_into(outputs)).option("checkpointLocation", checkpoint).start())
        try:
            run_until(query, functools.partial(read_everything, checkpoint, len(data) - 1),
                      "Spark did not read every file")
        finally:
            query.stop()
        state = [_flat(r) for r in spark_state(spark, checkpoint, stateVarName="count")]
    finally:
        next(conf, None)  # the session's settings as they were
    return source, {b: rows for b, rows in outputs.items() if b < len(data)}, state


@pytest.mark.parametrize("partitions", [None, 4], ids=["driver", "n4"])
def test_an_initial_state_is_handed_to_handle_initial_state_per_key_as_sparks_operator_does(
        spark, tmp_path, sparks_initial_run, partitions):
    """``initial_state=df``: in the query's first batch each key of ``df`` goes to ``handleInitialState`` (keys with
    input and keys without), then its input; every batch's output and the final state equal Spark's
    ``transformWithStateInPandas(..., initialState=df.groupBy(key))`` over the same files."""
    from blobstate.spark import read_state, transform_with_state
    from tests.processors import running_count

    source, spark_out, spark_rows = sparks_initial_run
    assert ("only-initial", 5) in {(dict(r["key"])["k"], dict(r["value"])["count"]) for r in spark_rows}
    outputs: dict[int, list[dict]] = {}
    checkpoint = str(tmp_path / "checkpoint")
    ours = transform_with_state(
        input_stream(spark, source), running_count.RunningCountFrom(), key_cols=["k"],
        output_schema=running_count.OUTPUT, sink=_collect_into(outputs), repo=f"file://{tmp_path}/repo",
        checkpoint_location=checkpoint, job="tws", store="counts", num_partitions=partitions,
        state_dir=str(tmp_path / "driver-state"), local_dir=str(tmp_path / "local"),
        initial_state=spark.createDataFrame(INITIAL_SEED, "k string, count long"))
    try:
        run_until(ours, functools.partial(read_everything, checkpoint, len(spark_out) - 1),
                  "blobstate did not read every file")
    finally:
        ours.close()
    assert sorted(b for b in outputs if b in committed_batches(checkpoint)) == sorted(spark_out)
    for batch_id, rows in spark_out.items():
        assert canonical(outputs[batch_id]) == canonical(rows), batch_id
    got = read_state(spark, repo=f"file://{tmp_path}/repo", job="tws", store="counts", state_var="count")
    assert canonical([_flat({k: v for k, v in r.asDict(recursive=True).items() if k != "partition_id"})
                      for r in got.collect()]) == canonical(spark_rows)


class CountAsText(running_count.RunningCount):
    """The running count's variable redeclared with its field retyped: incompatible."""

    def init(self, handle: Any) -> None:
        self.count = handle.getValueState("count", "count string")


class CountWithNote(running_count.RunningCount):
    """The running count's variable with a nullable field added: compatible (old values read it as None)."""

    def init(self, handle: Any) -> None:
        self.count = handle.getValueState("count", "count long, note string")

    def handleInputRows(self, key, rows, timerValues):
        count = self.count.get()[0] if self.count.exists() else 0
        for pdf in rows:
            count += len(pdf)
        self.count.update((count, None))
        yield pd.DataFrame({"k": [key[0]], "count": [count]})


def test_a_restart_with_an_incompatible_state_schema_is_refused_before_anything_changes(spark, tmp_path):
    """A store of the running count, restarted with ``count`` retyped: ``transform_with_state`` raises
    ``StateSchemaError`` (exit 2, naming the variable and both schemas) before the query starts, the repository
    and Spark's checkpoint left as they were; restarted with a nullable field added, it continues from the count
    it had."""
    from blobstate.spark import read_state, transform_with_state
    from blobstate.spark.errors import StateSchemaError
    from tests.processors import inputs
    from tests.processors.test_against_spark import write_inputs

    data = inputs.running_count(3)
    source = write_inputs(tmp_path / "in", data[:2])
    outputs: dict[int, list[dict]] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]

    checkpoint = str(tmp_path / "checkpoint")
    where = dict(key_cols=["k"], output_schema=running_count.OUTPUT, sink=sink, repo=f"file://{tmp_path}/repo",
                 checkpoint_location=checkpoint, job="tws", store="counts", state_dir=str(tmp_path / "state"))

    def run(processor: Any, last_file: int) -> None:
        query = transform_with_state(input_stream(spark, source), processor, **where)
        try:
            run_until(query, functools.partial(read_everything, checkpoint, last_file), "not every file read")
        finally:
            query.close()

    run(running_count.RunningCount(), 1)
    before = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file() and "state" not in p.parts}
    with pytest.raises(StateSchemaError) as refused:
        transform_with_state(input_stream(spark, source), CountAsText(), **where)
    assert refused.value.exit_code == 2 and refused.value.variable == "count"
    assert "count bigint" in str(refused.value) and "count string" in str(refused.value)
    after = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file() and "state" not in p.parts}
    assert after == before  # nothing restored, written or run: the repository and Spark's checkpoint as they were

    write_inputs(tmp_path / "more", data[2:])  # the third file, newer than the first two
    (tmp_path / "more" / "part-0000.parquet").rename(source / "part-0002.parquet")
    os.utime(source / "part-0002.parquet", (1_000_002, 1_000_002))  # the file source takes files in mtime order
    run(CountWithNote(), 2)
    expected, counts = reference.running_count([Batch(frame, 0) for frame in data])
    assert canonical(outputs[2]) == canonical(expected[2])  # the counts continued from batch 1's
    got = read_state(spark, repo=f"file://{tmp_path}/repo", job="tws", store="counts", state_var="count").collect()
    assert {r.key.k: (r.value["count"], r.value["note"]) for r in got} == {k: (n, None) for k, n in counts.items()}
