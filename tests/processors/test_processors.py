"""The five processors on blobstate's runtime (``run_batch`` over a real RocksDB, each batch committed) against the
plain-pandas reference of the same logic: every batch's output and the final state must agree. No Spark: the
processors only subclass pyspark's ``StatefulProcessor``."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor import ProcessorSpec, StateReader, advance_watermark
from blobstate.spark.processor.runner import BatchTimes, run_batch
from tests.processors import dedup, inputs, page_visits, reference, running_count, sessions, top_n
from tests.processors.reference import Batch, canonical


def run(tmp_path, make, spec, batches):
    """Each batch through ``run_batch``, committed; returns (outputs per batch, the StateReader of the end)."""
    db = Rdict(str(tmp_path / "db"))
    outputs = []
    for i, b in enumerate(batches):
        view = StagedWrites(db)
        data = None if b.data is None else pa.Table.from_pandas(b.data, preserve_index=False)
        result = run_batch(make(), view, data, spec, BatchTimes(i, b.at, b.watermark, b.late))
        apply_ops(db, view.ops())
        outputs.append(result.output.to_pylist())
    return outputs, StateReader(db)


def check(outputs, expected):
    assert len(outputs) == len(expected)
    for i, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert canonical(got) == canonical(want), f"batch {i}"


@pytest.mark.parametrize("flavour", ["pandas", "rows"])
def test_running_count(tmp_path, flavour):
    batches = [Batch(data, at=1000 * i) for i, data in enumerate(inputs.running_count())]
    make = running_count.RunningCount if flavour == "pandas" else running_count.RunningCountRows
    outputs, state = run(tmp_path, make, ProcessorSpec(("k",), running_count.OUTPUT, flavour=flavour), batches)
    expected, final = reference.running_count(batches)
    check(outputs, expected)
    assert {r["key"]["k"]: r["value"]["count"] for r in state.read_variable("count").to_pylist()} == final


def test_dedup_with_ttl(tmp_path):
    # 2500 ms apart: an id seen in batch i expires exactly at batch i + 4
    batches = [Batch(data, at=2500 * i) for i, data in enumerate(inputs.dedup())]
    batches.append(Batch(None, at=2500 * 10))  # a no-data batch: the sweep still runs
    spec = ProcessorSpec(("id",), dedup.OUTPUT, time_mode="ProcessingTime")
    outputs, state = run(tmp_path, dedup.Dedup, spec, batches)
    expected, final = reference.dedup_ref(batches)
    check(outputs, expected)
    assert any(len(rows) for rows in expected[4:])  # ids came back after their TTL: the case is exercised
    assert {r["key"]["id"] for r in state.read_variable("seen").to_pylist()} == set(final)


def test_sessions_closed_by_event_time_timers(tmp_path):
    batches, watermark, clock = [], None, inputs.BASE_MS
    for data in inputs.sessions_events():
        batches.append(Batch(data, at=len(batches), watermark=watermark, late=watermark))
        clock = clock + 20_000 if data is None else int(data["ts"].max().timestamp() * 1000)
        watermark = advance_watermark(watermark, clock, sessions.WATERMARK_DELAY_MS)
    spec = ProcessorSpec(("user",), sessions.OUTPUT, time_mode="EventTime", event_time_column="ts")
    outputs, state = run(tmp_path, sessions.Sessions, spec, batches)
    expected, final = reference.sessions_ref(batches)
    check(outputs, expected)
    assert sum(len(rows) for rows in expected) >= 5  # sessions did close
    late = [b for b in batches if b.data is not None and b.late is not None
            and (b.data["ts"].astype("int64") // 1_000_000 == b.late).any()]
    assert late  # some events sit exactly on the late-events watermark (dropped: at or below it is late)
    timers = {r["key"]["user"]: r["expiration_timestamp_ms"] for r in state.read_timers().to_pylist()}
    assert timers == {u: s[1] + sessions.GAP_MS for u, s in final.items()}


def test_top_n_in_a_list_state(tmp_path):
    batches = [Batch(data, at=i) for i, data in enumerate(inputs.top_n())]
    outputs, state = run(tmp_path, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), batches)
    expected, final = reference.top_n_ref(batches)
    check(outputs, expected)
    got: dict[str, list[int]] = {}
    for r in state.read_variable("top").to_pylist():
        got.setdefault(r["key"]["k"], []).append(r["list_element"]["score"])
    assert got == final


def test_page_visits_in_a_map_state_with_ttl(tmp_path):
    # entries written at 0, 2500, 7500, 12500 expire exactly at a later batch's time (TTL 5000)
    times = [0, 2000, 2500, 4000, 5000, 7500, 9000, 12500, 14000, 17500]
    batches = [Batch(data, at=at) for data, at in zip(inputs.page_visits(), times, strict=True)]
    spec = ProcessorSpec(("user",), page_visits.OUTPUT, time_mode="ProcessingTime")
    outputs, state = run(tmp_path, page_visits.PageVisits, spec, batches)
    expected, final = reference.page_visits_ref(batches)
    check(outputs, expected)
    got = {(r["key"]["user"], r["user_map_key"]["page"]): r["user_map_value"]["value"]["visits"]
           for r in state.read_variable("visits").to_pylist()}
    assert got == {k: v for k, (v, _) in final.items()}


def test_a_session_timestamp_round_trips_as_utc(tmp_path):
    ts = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batch = Batch(pd.DataFrame({"user": ["u"], "ts": pd.to_datetime([ts])}), at=0, watermark=None)
    spec = ProcessorSpec(("user",), sessions.OUTPUT, time_mode="EventTime", event_time_column="ts")
    _, state = run(tmp_path, sessions.Sessions, spec, [batch])
    assert state.read_timers().column("expiration_timestamp_ms").to_pylist() == [
        int(ts.timestamp() * 1000) + sessions.GAP_MS]
