"""State as data: a variable in Spark's state data source shapes, the timers, a batch's changes."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql.streaming import StatefulProcessor

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.readers import StateReader
from blobstate.spark.processor.runner import ProcessorSpec
from tests.unit.spark.processor.conftest import Batches


class All(StatefulProcessor):
    def init(self, handle):
        self.handle = handle
        self.last = handle.getValueState("last", "v long", ttlDurationMs=100)
        self.seen = handle.getListState("seen", "v long")
        self.per = handle.getMapState("per", "tag string", "c long")

    def handleInputRows(self, key, rows, timerValues):
        for pdf in rows:
            for v, tag in zip(pdf["v"], pdf["tag"], strict=True):
                self.last.update((int(v),))
                self.seen.appendValue((int(v),))
                old = self.per.getValue((tag,))
                self.per.updateValue((tag,), ((old.c if old else 0) + 1,))
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 50)
        return iter([pd.DataFrame({"k": [key[0]]})])


def run(db):
    b = Batches(db, All, ProcessorSpec(("k",), "k string", time_mode="ProcessingTime"))
    b.run(pa.table({"k": ["a", "a", "b"], "v": [1, 2, 3], "tag": ["x", "y", "x"]}), at=10)
    return b


def test_each_kind_in_the_state_data_source_shape(db):
    run(db)
    reader = StateReader(db)
    assert reader.read_variable("last").to_pylist() == [  # with a TTL: Spark's shape, the value and its expiry
        {"key": {"k": "a"}, "value": {"value": {"v": 2}, "ttlExpirationMs": 110}},
        {"key": {"k": "b"}, "value": {"value": {"v": 3}, "ttlExpirationMs": 110}}]
    assert reader.read_variable("last", as_of_ms=110).num_rows == 0  # expired by then
    assert reader.read_variable("seen").to_pylist() == [
        {"key": {"k": "a"}, "list_element": {"v": 1}}, {"key": {"k": "a"}, "list_element": {"v": 2}},
        {"key": {"k": "b"}, "list_element": {"v": 3}}]
    assert reader.read_variable("per").to_pylist() == [
        {"key": {"k": "a"}, "user_map_key": {"tag": "x"}, "user_map_value": {"c": 1}},
        {"key": {"k": "a"}, "user_map_key": {"tag": "y"}, "user_map_value": {"c": 1}},
        {"key": {"k": "b"}, "user_map_key": {"tag": "x"}, "user_map_value": {"c": 1}}]
    assert reader.read_timers().to_pylist() == [{"key": {"k": "a"}, "expiration_timestamp_ms": 60},
                                                {"key": {"k": "b"}, "expiration_timestamp_ms": 60}]
    with pytest.raises(StateVariableError, match="last, per, seen"):
        reader.read_variable("nope")


def test_the_changes_of_one_variable_in_a_batch(db):
    b = run(db)
    b.run(None, at=200)  # last expires (TTL sweep), the timers fire
    reader = StateReader(db)
    assert reader.changes(b.last_ops, "last").to_pylist() == [
        {"change_type": "delete", "key": {"k": "a"}, "value": None},
        {"change_type": "delete", "key": {"k": "b"}, "value": None}]
    assert reader.changes(b.last_ops, "per").num_rows == 0
    first = run(db)
    assert [r["list_value"] for r in reader.changes(first.last_ops, "seen").to_pylist()] == [
        [{"v": 1}, {"v": 2}, {"v": 1}, {"v": 2}], [{"v": 3}, {"v": 3}]]
