"""One batch, end to end on a real RocksDB with a virtual clock: TTL, timers, re-runs, schema changes, event time,
initial state, both flavours. The processors subclass pyspark's own ``StatefulProcessor``."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor

from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor.runner import ProcessorSpec, advance_watermark
from blobstate.spark.processor.store import TIMERS_BY_KEY, TIMERS_BY_TIME, TTL_INDEX, VALUES
from tests.unit.spark.processor.conftest import Batches, raw_keys


class Count(StatefulProcessor):
    """A running count with a TTL; a processing-time timer 1 s after each key's first row."""

    def init(self, handle):
        self.handle = handle
        self.count = handle.getValueState("count", "n long", ttlDurationMs=1000)

    def handleInputRows(self, key, rows, timerValues):
        seen = self.count.get()
        n = (seen[0] if seen else 0) + sum(len(pdf) for pdf in rows)
        if seen is None:
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 1000)
        self.count.update((n,))
        yield pd.DataFrame({"k": [key[0]], "n": [n], "fired": [False]})

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        seen = self.count.get()
        yield pd.DataFrame({"k": [key[0]], "n": [seen[0] if seen else -1], "fired": [True]})


SPEC = ProcessorSpec(("k",), "k string, n long, fired boolean", time_mode="ProcessingTime")


def rows(*keys):
    return pa.table({"k": list(keys), "v": list(range(len(keys)))})


def test_a_value_past_its_ttl_is_never_read_and_its_keys_leave_rocksdb_in_that_batch(db):
    b = Batches(db, Count, SPEC)
    assert b.run(rows("a", "a", "b"), at=0).output.to_pylist() == [
        {"k": "a", "n": 2, "fired": False}, {"k": "b", "n": 1, "fired": False}]
    assert b.run(rows("a"), at=999).output.to_pylist() == [{"k": "a", "n": 3, "fired": False}]  # a: now 1999
    result = b.run(rows("b"), at=1000)  # b expired at 1000: its count starts again
    assert {r["k"]: r["n"] for r in result.output.to_pylist() if not r["fired"]} == {"b": 1}
    # the timers of batch 0 (at 1000) fired after the input: a's count is still there, b's is the new one
    assert sorted((r["k"], r["n"]) for r in result.output.to_pylist() if r["fired"]) == [("a", 3), ("b", 1)]
    assert result.stats.values_expired == 0  # b's old value was overwritten, a's lives until 1999
    result = b.run(None, at=1999)  # a no-data batch: a expires, b (written at 1000) lives until 2000
    assert result.stats.values_expired == 1 and result.output.num_rows == 0
    assert len(raw_keys(db, VALUES)) == 1 and len(raw_keys(db, TTL_INDEX)) == 1
    b.run(None, at=2000)
    assert raw_keys(db, VALUES) == raw_keys(db, TTL_INDEX) == []


def test_a_timer_fires_once_at_its_time_and_never_again(db):
    b = Batches(db, Count, SPEC)
    first = b.run(rows("a"), at=0)
    assert (first.stats.next_timer_ms, first.stats.next_expiry_ms) == (1000, 1000)  # when a no-data batch has work
    assert b.run(None, at=999).stats.timers_fired == 0
    # the count written at 0 expired at 1000 too: the handler sees no value (invisible from its expiry on)
    assert b.run(None, at=1000).output.to_pylist() == [{"k": "a", "n": -1, "fired": True}]
    last = b.run(None, at=5000)
    assert last.stats.timers_fired == 0 and (last.stats.next_timer_ms, last.stats.next_expiry_ms) == (None, None)
    assert raw_keys(db, TIMERS_BY_KEY) == raw_keys(db, TIMERS_BY_TIME) == []


def test_a_rerun_with_the_same_times_gives_the_same_writes_and_output(db):
    b = Batches(db, Count, SPEC)
    b.run(rows("a", "b", "c"), at=0)
    first = b.run(rows("c", "a", "a", "d"), at=1000, commit=False)
    ops_first = b.last_ops
    second = b.run(rows("c", "a", "a", "d"), at=1000, commit=False)
    assert b.last_ops == ops_first and len(ops_first) > 0
    assert second.output.equals(first.output)


class Sessions(StatefulProcessor):
    """Event time: a session per key closed by an event-time timer 10 s after its last event."""

    def init(self, handle):
        self.handle = handle
        self.last = handle.getValueState("last", "ts timestamp, n long")

    def handleInputRows(self, key, rows, timerValues):
        pdf = pd.concat(list(rows))
        last = self.last.get()
        newest = pdf["ts"].max().to_pydatetime()
        if last is not None:
            self.handle.deleteTimer(int(last[0].timestamp() * 1000) + 10_000)
            newest = max(newest, last[0])
        self.last.update((newest, (last[1] if last else 0) + len(pdf)))
        self.handle.registerTimer(int(newest.timestamp() * 1000) + 10_000)
        return iter([])

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        ts, n = self.last.get()
        self.last.clear()
        yield pd.DataFrame({"k": [key[0]], "n": [n], "end": [expiredTimerInfo.getExpiryTimeInMs()],
                            "wm": [timerValues.getCurrentWatermarkInMs()]})


def events(*pairs):
    stamps = [dt.datetime.fromtimestamp(s, dt.UTC) for _, s in pairs]
    return pa.table({"k": [k for k, _ in pairs], "ts": pa.array(stamps, pa.timestamp("us", "UTC"))})


def test_event_time_timers_fire_at_the_watermark_and_late_rows_are_dropped(db):
    spec = ProcessorSpec(("k",), "k string, n long, end long, wm long", time_mode="EventTime", event_time_column="ts")
    b = Batches(db, Sessions, spec)
    assert b.run(events(("a", 100), ("a", 105), ("b", 100)), at=1, watermark=None).output.num_rows == 0
    wm = advance_watermark(None, 105_000, 5_000)
    assert wm == 100_000
    result = b.run(events(("a", 112), ("b", 90)), at=2, watermark=wm, late=wm)  # b@90 is late: dropped
    assert (result.stats.rows_late, result.output.num_rows) == (1, 0)
    wm = advance_watermark(wm, 112_000, 5_000)
    result = b.run(None, at=3, watermark=wm)  # 107 s: b's session (last event 100, end 110) is still open
    assert result.output.num_rows == 0
    result = b.run(None, at=4, watermark=advance_watermark(wm, 130_000, 5_000))  # 125 s: both close
    assert result.output.to_pylist() == [{"k": "b", "n": 1, "end": 110_000, "wm": 125_000},
                                         {"k": "a", "n": 3, "end": 122_000, "wm": 125_000}]
    assert advance_watermark(125_000, 1_000, 5_000) == 125_000  # never goes back


def test_a_schema_change_is_checked_before_anything_is_written(db):
    class V1(StatefulProcessor):
        schema = "n long"

        def init(self, handle):
            self.v = handle.getValueState("v", self.schema)

        def handleInputRows(self, key, rows, timerValues):
            self.v.update((1,) + (None,) * (len(self.schema.split(",")) - 1))
            return iter([])

    class Added(V1):
        schema = "n long, note string"

    class Retyped(V1):
        schema = "n int"

    spec = ProcessorSpec(("k",), "k string")
    Batches(db, V1, spec).run(rows("a"), at=0)
    b = Batches(db, Retyped, spec)
    with pytest.raises(StateSchemaError, match="'v'"):
        b.run(rows("a"), at=1, commit=False)
    Batches(db, Added, spec).run(rows("a"), at=2)  # a nullable field added: continues
    with pytest.raises(StateSchemaError):
        Batches(db, V1, spec).run(rows("a"), at=3)  # and the field cannot be dropped again


def test_initial_state_first_then_input_and_the_rows_flavour(db):
    class Seeded(StatefulProcessor):
        def init(self, handle):
            self.total = handle.getValueState("total", "n long")

        def handleInitialState(self, key, initialState, timerValues):
            self.total.update((initialState.n,))

        def handleInputRows(self, key, rows, timerValues):
            total = (self.total.get() or (0,))[0] + sum(r.v for r in rows)
            self.total.update((total,))
            yield Row(k=key[0], n=total)

    spec = ProcessorSpec(("k",), "k string, n long", flavour="rows")
    b = Batches(db, Seeded, spec)
    seed = pa.table({"k": ["a", "z"], "n": [100, 5]})
    out = b.run(pa.table({"k": ["a", "b"], "v": [1, 2]}), at=0, initial_state=seed).output
    assert out.to_pylist() == [{"k": "a", "n": 101}, {"k": "b", "n": 2}]  # z: initial state only, no call
    assert b.run(pa.table({"k": ["z"], "v": [1]}), at=1).output.to_pylist() == [{"k": "z", "n": 6}]


def test_a_handler_that_deletes_another_due_timer_and_re_registers_its_own(db):
    class Timers(StatefulProcessor):
        def init(self, handle):
            self.handle = handle

        def handleInputRows(self, key, rows, timerValues):
            self.handle.registerTimer(10)
            self.handle.registerTimer(20)
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            if expiredTimerInfo.getExpiryTimeInMs() == 10:
                self.handle.deleteTimer(20)
                self.handle.registerTimer(10)  # deleted again after this call, as Spark does
            yield pd.DataFrame({"k": [key[0]], "ts": [expiredTimerInfo.getExpiryTimeInMs()]})

    b = Batches(db, Timers, ProcessorSpec(("k",), "k string, ts long", time_mode="ProcessingTime"))
    b.run(rows("a"), at=0)
    assert b.run(None, at=100).output.to_pylist() == [{"k": "a", "ts": 10}]
    assert raw_keys(db, TIMERS_BY_TIME) == []


def test_misuse_is_a_typed_error(db):
    class NoKey(StatefulProcessor):
        def init(self, handle):
            self.v = handle.getValueState("v", "n long")
            self.v.get()

        def handleInputRows(self, key, rows, timerValues):
            return iter([])

    with pytest.raises(StateVariableError, match="grouping key"):
        Batches(db, NoKey, ProcessorSpec(("k",), "k string")).run(rows("a"), at=0)
    with pytest.raises(StateVariableError, match="flavour"):
        Batches(db, NoKey, ProcessorSpec(("k",), "k string", flavour="arrow")).run(rows("a"), at=0)
