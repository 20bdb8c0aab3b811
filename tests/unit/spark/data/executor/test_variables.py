"""``blobstate.spark.data.executor.variables``: a processor's state variable, timers and change feed as the Arrow
batches a read task yields, on a real RocksDB written by the processor runtime (no Spark)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.restoring.state import Change
from blobstate.spark.data.executor.variables import VariableRead, change_batches, output_schema, state_batches
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import BatchTimes, ProcessorSpec, StateReader, run_batch
from tests.processors import page_visits, running_count, top_n

BASE = 1_700_000_000_000


def run(db: Rdict, make, spec: ProcessorSpec, frames: list[pd.DataFrame]) -> list[list]:
    """Each frame as a committed batch (one second apart); the ops of each batch."""
    out = []
    for i, frame in enumerate(frames):
        view = StagedWrites(db)
        table = pa.Table.from_pandas(frame, preserve_index=False)
        run_batch(make(), view, table, spec, BatchTimes(i, BASE + 1_000 * i))
        apply_ops(db, view.ops())
        out.append(view.ops())
    return out


@pytest.fixture
def db(tmp_path):
    handle = Rdict(str(tmp_path / "db"))
    yield handle
    handle.close()


def read_of(db: Rdict, name: str | None, *, timers: bool = False, changes: bool = False) -> VariableRead:
    meta = StateReader(db).metadata
    return VariableRead(name, timers, meta, output_schema(meta, name, timers=timers, changes=changes))


def test_the_columns_are_spark_state_data_source_s(db):
    run(db, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), [pd.DataFrame({"k": ["a"], "score": [1]})])
    meta = StateReader(db).metadata
    assert output_schema(meta, "top").names == ["key", "list_element", "partition_id"]
    assert output_schema(meta, "top", changes=True).names == ["batch_id", "change_type", "key", "list_value",
                                                              "partition_id"]
    assert output_schema(meta, None, timers=True).names == ["key", "expiration_timestamp_ms", "partition_id"]


def test_an_unknown_variable_is_a_typed_error_naming_the_variables_there_are(db):
    run(db, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), [pd.DataFrame({"k": ["a"], "score": [1]})])
    with pytest.raises(StateVariableError, match=r"no state variable 'count'.*it has: top"):
        output_schema(StateReader(db).metadata, "count")


def test_a_list_gives_one_row_per_element_with_the_partition(db):
    frames = [pd.DataFrame({"k": ["a", "a", "b"], "score": [5, 9, 2]}), pd.DataFrame({"k": ["a"], "score": [7]})]
    run(db, top_n.TopN, ProcessorSpec(("k",), top_n.OUTPUT), frames)
    rows = [r for b in state_batches(read_of(db, "top"), db, 3) for r in b.to_pylist()]
    assert sorted((r["key"]["k"], r["list_element"]["score"], r["partition_id"]) for r in rows) == [
        ("a", 5, 3), ("a", 7, 3), ("a", 9, 3), ("b", 2, 3)]


def test_a_map_with_a_ttl_gives_one_row_per_user_key_with_its_expiry(db):
    spec = ProcessorSpec(("user",), page_visits.OUTPUT, time_mode="ProcessingTime")
    run(db, page_visits.PageVisits, spec, [pd.DataFrame({"user": ["u", "u", "v"], "page": ["/a", "/a", "/b"]})])
    rows = [r for b in state_batches(read_of(db, "visits"), db, None) for r in b.to_pylist()]
    assert sorted((r["key"]["user"], r["user_map_key"]["page"], r["user_map_value"]["value"]["visits"],
                   r["user_map_value"]["ttlExpirationMs"], r["partition_id"]) for r in rows) == [
        ("u", "/a", 2, BASE + page_visits.TTL_MS, None), ("v", "/b", 1, BASE + page_visits.TTL_MS, None)]


def test_a_partition_that_never_ran_a_batch_gives_no_rows(db, tmp_path):
    run(db, running_count.RunningCount, ProcessorSpec(("k",), running_count.OUTPUT), [pd.DataFrame({"k": ["a"]})])
    read = read_of(db, "count")
    empty = Rdict(str(tmp_path / "empty"))
    try:
        assert list(state_batches(read, empty, 1)) == []
    finally:
        empty.close()


def test_the_change_feed_of_a_value_is_one_update_per_key_and_batch(db):
    frames = [pd.DataFrame({"k": ["a", "b", "a"]}), pd.DataFrame({"k": ["b"]})]
    ops = run(db, running_count.RunningCount, ProcessorSpec(("k",), running_count.OUTPUT), frames)
    changes = [Change(b, 2, "delete" if op == b"D" else "put", key, value)
               for b, batch in enumerate(ops) for op, key, value in batch]
    rows = [r for b in change_batches(read_of(db, "count", changes=True), changes, 2) for r in b.to_pylist()]
    assert [(r["batch_id"], r["change_type"], r["key"]["k"], r["value"]["count"], r["partition_id"])
            for r in rows] == [(0, "update", "a", 2, 2), (0, "update", "b", 1, 2), (1, "update", "b", 2, 2)]
