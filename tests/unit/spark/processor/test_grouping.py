"""Arrow grouping by key (no Python call per row) and the per-key inputs of both flavours."""

from __future__ import annotations

import pyarrow as pa
import pytest

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.grouping import PandasInputs, RowInputs, as_table, group_by_key


def test_groups_by_several_columns_with_nulls_keeping_arrival_order():
    table = pa.table({"a": ["x", "y", None, "x", None, "x"], "b": [1, 1, 2, 2, 2, 1], "v": [0, 1, 2, 3, 4, 5]})
    groups = group_by_key(table, ["a", "b"])
    assert groups.keys == [("x", 1), ("x", 2), ("y", 1), (None, 2)]
    assert [groups.table.column("v").to_pylist()[s:e] for s, e in zip(groups.starts, groups.ends, strict=True)] \
        == [[0, 5], [3], [1], [2, 4]]


def test_dictionary_keys_and_empty_and_missing():
    table = pa.table({"k": pa.array(["b", "a", "b"]).dictionary_encode(), "v": [1, 2, 3]})
    assert group_by_key(table, ["k"]).keys == [("a",), ("b",)]
    assert len(group_by_key(table.slice(0, 0), ["k"])) == 0
    with pytest.raises(StateVariableError, match="nope"):
        group_by_key(table, ["nope"])
    batch = pa.record_batch({"k": [1]})
    assert as_table(batch).num_rows == 1 and as_table([batch, batch]).num_rows == 2 and as_table([]) is None


def test_pandas_inputs_are_chunked_frames_indexed_from_zero_and_independent():
    table = pa.table({"k": ["a"] * 5 + ["b"], "v": list(range(6))})
    groups = group_by_key(table, ["k"])
    inputs = PandasInputs(groups, max_records=2)
    frames = list(inputs.frames(0))
    assert [f["v"].tolist() for f in frames] == [[0, 1], [2, 3], [4]]
    assert all(list(f.index) == list(range(len(f))) for f in frames) and list(frames[0].columns) == ["k", "v"]
    frames[0]["extra"] = 1  # a frame of its own: the next key's frames are unchanged
    assert list(next(inputs.frames(1)).columns) == ["k", "v"]


def test_row_inputs_are_rows_with_the_input_columns():
    groups = group_by_key(pa.table({"k": ["b", "a", "b"], "v": [1, 2, 3]}), ["k"])
    rows = list(RowInputs(groups).rows(1))
    assert [(r.k, r.v) for r in rows] == [("b", 1), ("b", 3)] and rows[0].asDict() == {"k": "b", "v": 1}


def test_pandas_inputs_skipped_and_revisited_groups_are_the_right_rows():
    table = pa.table({"k": ["c", "a", "b", "c", "a", "d"], "v": list(range(6))})
    inputs = PandasInputs(group_by_key(table, ["k"]), max_records=10)
    assert next(inputs.frames(2))["v"].tolist() == [0, 3]  # groups 0 and 1 passed over by the splitter
    assert next(inputs.frames(0))["v"].tolist() == [1, 4]  # asked again out of key order: sliced directly
    last = next(inputs.frames(3))
    assert last["v"].tolist() == [5] and list(last.index) == [0]
    last.loc[0, "v"] = 99  # writing into a frame does not reach another key's
    assert next(inputs.frames(1))["v"].tolist() == [2]
