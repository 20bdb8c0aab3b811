"""The five processors on blobstate's runtime (``run_batch`` over a real RocksDB, each batch committed) against the
plain-pandas reference of the same logic: every batch's output and the final state must agree. No Spark: the
processors only subclass pyspark's ``StatefulProcessor``."""

from __future__ import annotations

import datetime as dt
import random

import pandas as pd
import pyarrow as pa
import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor import ProcessorSpec, StateReader, advance_watermark
from blobstate.spark.processor.runner import BatchTimes, run_batch
from tests.processors import dedup, page_visits, reference, running_count, sessions, top_n
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


def keyed(rng, n, keys, **columns):
    return pd.DataFrame({"k": [rng.choice(keys) for _ in range(n)], **{c: f(n) for c, f in columns.items()}})


def check(outputs, expected):
    assert len(outputs) == len(expected)
    for i, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert canonical(got) == canonical(want), f"batch {i}"


@pytest.mark.parametrize("flavour", ["pandas", "rows"])
def test_running_count(tmp_path, flavour):
    rng = random.Random(1)
    keys = [f"k{i}" for i in range(40)]
    batches = [Batch(keyed(rng, 60, keys, v=lambda n: list(range(n))), at=1000 * i) for i in range(6)]
    make = running_count.RunningCount if flavour == "pandas" else running_count.RunningCountRows
    outputs, state = run(tmp_path, make, ProcessorSpec(("k",), running_count.OUTPUT, flavour=flavour), batches)
    expected, final = reference.running_count(batches)
    check(outputs, expected)
    assert {r["key"]["k"]: r["value"]["count"] for r in state.read_variable("count").to_pylist()} == final


def test_dedup_with_ttl(tmp_path):
    rng = random.Random(2)
    ids = [f"id{i}" for i in range(30)]
    batches = [Batch(pd.DataFrame({"id": [rng.choice(ids) for _ in range(25)],
                                   "value": [rng.randrange(1000) for _ in range(25)]}), at=2500 * i)
               for i in range(10)]  # 2500 ms apart: an id seen in batch i expires exactly at batch i + 4
    batches.append(Batch(None, at=2500 * 10))  # a no-data batch: the sweep still runs
    spec = ProcessorSpec(("id",), dedup.OUTPUT, time_mode="ProcessingTime")
    outputs, state = run(tmp_path, dedup.Dedup, spec, batches)
    expected, final = reference.dedup_ref(batches)
    check(outputs, expected)
    assert any(len(rows) for rows in expected[4:])  # ids came back after their TTL: the case is exercised
    assert {r["key"]["id"] for r in state.read_variable("seen").to_pylist()} == set(final)


def test_sessions_closed_by_event_time_timers(tmp_path):
    rng = random.Random(3)
    users = [f"u{i}" for i in range(20)]
    base = 1_700_000_000_000
    batches, watermark, clock = [], None, 0
    for i in range(16):
        clock += 5_000 * rng.randrange(1, 5)  # a 5 s grid: events land on the watermark and on timers exactly
        events = [(rng.choice(users), base + clock - 5_000 * rng.randrange(0, 4)) for _ in range(6)] if i < 10 else []
        if events and watermark is not None:
            events.append((users[i], watermark))  # exactly on the late-events watermark: late
        data = pd.DataFrame({"user": [u for u, _ in events],
                             "ts": pd.to_datetime([t for _, t in events], unit="ms", utc=True)}) if events else None
        batches.append(Batch(data, at=i, watermark=watermark, late=watermark))
        if events:
            watermark = advance_watermark(watermark, max(t for _, t in events), sessions.WATERMARK_DELAY_MS)
        else:
            watermark = advance_watermark(watermark, base + clock, sessions.WATERMARK_DELAY_MS)
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
    rng = random.Random(4)
    keys = [f"k{i}" for i in range(15)]
    batches = [Batch(keyed(rng, 30, keys, score=lambda n: [rng.randrange(10_000) for _ in range(n)]), at=i)
               for i in range(8)]
    outputs, state = run(tmp_path, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), batches)
    expected, final = reference.top_n_ref(batches)
    check(outputs, expected)
    got: dict[str, list[int]] = {}
    for r in state.read_variable("top").to_pylist():
        got.setdefault(r["key"]["k"], []).append(r["list_element"]["score"])
    assert got == final


def test_page_visits_in_a_map_state_with_ttl(tmp_path):
    rng = random.Random(5)
    users, pages = [f"u{i}" for i in range(6)], [f"/p{i}" for i in range(5)]
    batches = [Batch(pd.DataFrame({"user": [rng.choice(users) for _ in range(20)],
                                   "page": [rng.choice(pages) for _ in range(20)]}), at=at)
               for i, at in enumerate([0, 2000, 2500, 4000, 5000, 7500, 9000, 12500, 14000, 17500])]
    # entries written at 0, 2500, 7500, 12500 expire exactly at a later batch's time (TTL 5000)
    spec = ProcessorSpec(("user",), page_visits.OUTPUT, time_mode="ProcessingTime")
    outputs, state = run(tmp_path, page_visits.PageVisits, spec, batches)
    expected, final = reference.page_visits_ref(batches)
    check(outputs, expected)
    got = {(r["key"]["user"], r["user_map_key"]["page"]): r["user_map_value"]["visits"]
           for r in state.read_variable("visits").to_pylist()}
    assert got == {k: v for k, (v, _) in final.items()}


def test_a_session_timestamp_round_trips_as_utc(tmp_path):
    ts = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    batch = Batch(pd.DataFrame({"user": ["u"], "ts": pd.to_datetime([ts])}), at=0, watermark=None)
    spec = ProcessorSpec(("user",), sessions.OUTPUT, time_mode="EventTime", event_time_column="ts")
    _, state = run(tmp_path, sessions.Sessions, spec, [batch])
    assert state.read_timers().column("expiration_timestamp_ms").to_pylist() == [
        int(ts.timestamp() * 1000) + sessions.GAP_MS]
