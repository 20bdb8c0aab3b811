"""Each of the five processors on Spark's own ``transformWithStateInPandas`` (local Spark, RocksDB state store with
changelog checkpointing; one input file per micro-batch), then on blobstate's runtime over the same input with the
times Spark's offset log recorded for each batch (its batch timestamp, its watermark): every batch's output and the
final state (Spark's state data source with ``stateVarName`` / ``readRegisteredTimers``) must be the same.

Slow (a streaming query per processor): ``python -m pytest -n 0 tests/processors/test_against_spark.py``."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet  # noqa: F401 (pa.parquet)
import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor import BatchTimes, ProcessorSpec, StateReader, run_batch
from tests.processors import dedup, inputs, page_visits, running_count, sessions, top_n
from tests.processors.reference import canonical

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-processors")]

ROCKSDB = {"spark.sql.streaming.stateStore.providerClass":
           "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
           "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
           "spark.sql.streaming.fileSource.log.compactInterval": "1000",
           "spark.sql.session.timeZone": "UTC"}


@pytest.fixture
def spark(spark_session):
    yield from with_rocksdb(spark_session)


def with_rocksdb(spark_session: Any) -> Any:
    """A fixture's body: ``spark_session`` with Spark's RocksDB provider and changelog checkpointing, then as it
    was."""
    before = {k: spark_session.conf.get(k, None) for k in ROCKSDB}
    for k, v in ROCKSDB.items():
        spark_session.conf.set(k, v)
    yield spark_session
    for k, v in before.items():
        if v is None:
            spark_session.conf.unset(k)
        else:
            spark_session.conf.set(k, v)


def on_spark(spark: Any, tmp_path: Any, make: Callable[[], Any], frames: list[Any], keys: list[str], output: str,
             time_mode: str, watermark: tuple[str, str] | None = None) -> tuple[dict[int, list[dict]], str, dict]:
    """Run ``make()`` on Spark over ``frames`` (one Parquet file each, one per trigger); returns the output rows by
    batch id, the checkpoint location and the input file of each batch id."""
    stream = input_stream(spark, write_inputs(tmp_path / "in", frames))
    if watermark is not None:
        stream = stream.withWatermark(*watermark)
    outputs: dict[int, list[dict]] = {}

    def sink(df: Any, batch_id: int) -> None:
        outputs[batch_id] = [r.asDict() for r in df.collect()]

    checkpoint = str(tmp_path / "checkpoint")
    query = (stream.groupBy(*keys).transformWithStateInPandas(make(), outputStructType=output, outputMode="Update",
                                                              timeMode=time_mode)
             .writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).start())
    # neither availableNow nor processAllAvailable: in ProcessingTime mode Spark runs a no-data batch after every
    # batch (a timer may be due at any time), so neither ever sees the end. The query stops once a committed batch
    # has read the last file (its commit file, waited on), and only committed batches count.
    last = sum(1 for f in frames if f is not None) - 1
    try:
        run_until(query, lambda: read_everything(checkpoint, last), "Spark did not read every file")
    finally:
        query.stop()
    committed = committed_batches(checkpoint)
    return {b: rows for b, rows in outputs.items() if b in committed}, checkpoint, files_by_batch(checkpoint)


def write_inputs(source: Any, frames: list[Any]) -> Any:
    """``frames`` (None: a no-data batch, skipped) as one Parquet file each in ``source`` (created), in order."""
    source.mkdir()
    for i, frame in enumerate(f for f in frames if f is not None):
        path = source / f"part-{i:04d}.parquet"
        pa.parquet.write_table(pa.Table.from_pandas(frame, preserve_index=False), str(path),
                               coerce_timestamps="us")  # Spark reads no nanosecond timestamps
        os.utime(path, (1_000_000 + i, 1_000_000 + i))  # the file source takes files in modification order
    return source


def input_stream(spark: Any, source: Any) -> Any:
    """The streaming DataFrame of ``write_inputs``'s files, one file per micro-batch."""
    schema = pa.parquet.read_schema(str(source / "part-0000.parquet"))
    spark_type = {True: "timestamp", False: "bigint"}
    ddl = ", ".join(f"`{n}` {'string' if pa.types.is_string(t) else spark_type[pa.types.is_timestamp(t)]}"
                    for n, t in zip(schema.names, schema.types, strict=True))
    return spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(str(source))


def run_until(query: Any, done: Callable[[], bool], what: str, timeout_s: float = 600) -> None:
    """Wait until ``done()`` (a file of the checkpoint location: the condition, never a sleep) while ``query``
    runs; fails with ``what`` after ``timeout_s``, or with the query's error once it died."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"{what} in {timeout_s:.0f} s"
        assert query.isActive, query.exception()
        query.awaitTermination(1)  # returns at once when the query dies


def committed_batches(checkpoint: str) -> set[int]:
    folder = os.path.join(checkpoint, "commits")
    return {int(n) for n in os.listdir(folder) if n.isdigit()} if os.path.isdir(folder) else set()


def read_everything(checkpoint: str, last_offset: int) -> bool:
    """Whether a committed batch's file source offset is ``last_offset`` (every file read)."""
    for batch_id in committed_batches(checkpoint):
        if json.loads(_log(os.path.join(checkpoint, "offsets", str(batch_id)))[2])["logOffset"] >= last_offset:
            return True
    return False


def _log(path: str) -> list[str]:
    with open(path) as fh:
        return fh.read().splitlines()


def files_by_batch(checkpoint: str) -> dict[int, str]:
    """Which input file each batch read: the file source's log offset in the batch's offsets file, and the files
    that offset added in the source's own log."""
    out, seen = {}, -1
    for batch_id in sorted(committed_batches(checkpoint)):
        offset = json.loads(_log(os.path.join(checkpoint, "offsets", str(batch_id)))[2])["logOffset"]
        if offset > seen:
            entries = [json.loads(line) for line in _log(os.path.join(checkpoint, "sources", "0", str(offset)))[1:]]
            assert len(entries) == 1
            out[batch_id] = entries[0]["path"]
            seen = offset
    return out


def batch_times(checkpoint: str) -> list[tuple[int, int, int]]:
    """``(batch id, batch timestamp, watermark)`` of every batch in Spark's offset log."""
    out = []
    for batch_id in sorted(committed_batches(checkpoint)):
        meta = json.loads(_log(os.path.join(checkpoint, "offsets", str(batch_id)))[1])
        out.append((batch_id, meta["batchTimestampMs"], meta["batchWatermarkMs"]))
    return out


def on_blobstate(tmp_path: Any, make: Callable[[], Any], checkpoint: str, files: dict[int, str], keys: list[str],
                 output: str, time_mode: str, event_time: str | None = None) -> tuple[dict[int, list[dict]], Any]:
    db = Rdict(str(tmp_path / "blobstate-db"))
    spec = ProcessorSpec(tuple(keys), output, time_mode=time_mode, event_time_column=event_time)
    outputs, previous_watermark = {}, None
    for batch_id, timestamp, watermark in batch_times(checkpoint):
        data = pa.parquet.read_table(files[batch_id].removeprefix("file://")) if batch_id in files else None
        times = BatchTimes(batch_id, timestamp, watermark if time_mode == "EventTime" else None,
                           previous_watermark if time_mode == "EventTime" else None)
        view = StagedWrites(db)
        result = run_batch(make(), view, data, spec, times)
        apply_ops(db, view.ops())
        outputs[batch_id] = result.output.to_pylist()
        previous_watermark = watermark
    return outputs, StateReader(db)


def spark_state(spark: Any, checkpoint: str, **options: Any) -> list[dict]:
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    return [{k: v for k, v in r.asDict(recursive=True).items() if k != "partition_id"}
            for r in reader.load(checkpoint).collect()]


def compare(spark_out: dict[int, list[dict]], ours: dict[int, list[dict]]) -> None:
    assert sorted(ours) == sorted(spark_out)
    for batch_id in sorted(ours):
        assert canonical(ours[batch_id]) == canonical(spark_out[batch_id]), f"batch {batch_id}"


CASES = {
    "running_count": (running_count.RunningCount, inputs.running_count, ["k"], running_count.OUTPUT, "None", None,
                      {"stateVarName": "count"}),
    "dedup": (dedup.Dedup, inputs.dedup, ["id"], dedup.OUTPUT, "ProcessingTime", None, {"stateVarName": "seen"}),
    "sessions": (sessions.Sessions, inputs.sessions_events, ["user"], sessions.OUTPUT, "EventTime",
                 ("ts", "10 seconds"), {"readRegisteredTimers": "true"}),
    "top_n": (top_n.TopN, inputs.top_n, ["k"], top_n.OUTPUT, "None", None, {"stateVarName": "top"}),
    "page_visits": (page_visits.PageVisits, inputs.page_visits, ["user"], page_visits.OUTPUT, "ProcessingTime", None,
                    {"stateVarName": "visits"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_same_outputs_and_state_as_spark(spark, tmp_path, name):
    make, frames, keys, output, time_mode, watermark, state_options = CASES[name]
    spark_out, checkpoint, files = on_spark(spark, tmp_path, make, frames(), keys, output, time_mode, watermark)
    ours, reader = on_blobstate(tmp_path, make, checkpoint, files, keys, output, time_mode,
                                event_time=watermark[0] if watermark else None)
    compare(spark_out, ours)
    assert sum(len(rows) for rows in spark_out.values()) > 0  # not vacuous (sessions: its timers fired)
    expected = spark_state(spark, checkpoint, **state_options)
    if "readRegisteredTimers" in state_options:
        got = reader.read_timers().to_pylist()
    else:
        got = reader.read_variable(state_options["stateVarName"]).to_pylist()
    assert canonical([_flat(r) for r in got]) == canonical([_flat(r) for r in expected])


def _flat(row: dict) -> dict:
    """A state row with its structs as sorted tuples (comparable across Spark's Rows and Arrow's dicts)."""
    return {k: tuple(sorted(v.items())) if isinstance(v, dict) else v for k, v in row.items()}
