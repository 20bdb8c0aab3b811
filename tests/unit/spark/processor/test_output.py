"""Emitted rows gathered into an Arrow table of the output schema (both flavours, Spark's matching rules)."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor import output
from blobstate.spark.processor.output import OutputCollector
from blobstate.spark.processor.schema import parse

SCHEMA = parse("k string, n long")


def test_pandas_frames_by_name_or_position_in_chunks(monkeypatch):
    monkeypatch.setattr(output, "CHUNK_FRAMES", 2)
    out = OutputCollector(SCHEMA, "pandas")
    out.add(iter([pd.DataFrame({"n": [1], "k": ["a"], "extra": [0]}), pd.DataFrame([["b", 2]])]), where="h")
    out.add(None, where="h")
    out.add([pd.DataFrame({"k": ["c"], "n": [3.0]}), pd.DataFrame({"k": [], "n": []})], where="h")
    table = out.table()
    assert table.schema == SCHEMA.arrow() and table.to_pylist() == [
        {"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "c", "n": 3}]


def test_pandas_chunk_of_mixed_shapes_joins_as_pandas_concat(monkeypatch):
    monkeypatch.setattr(output, "CHUNK_FRAMES", 3)
    out = OutputCollector(SCHEMA, "pandas")  # chunk 1: one shape (NumPy join); chunk 2: dtypes differ (concat)
    out.add([pd.DataFrame({"k": ["a"], "n": [1]}), pd.DataFrame({"k": ["b", "c"], "n": [2, 3]}),
             pd.DataFrame({"k": ["d"], "n": [4]})], where="h")
    out.add([pd.DataFrame({"k": ["e"], "n": [5]}), pd.DataFrame({"k": ["f"], "n": [6.0]}),
             pd.DataFrame({"n": [7], "k": ["g"]})], where="h")
    assert out.table().to_pylist() == [{"k": k, "n": n} for n, k in enumerate("abcdefg", start=1)]


def test_pandas_chunk_of_one_numpy_shape_joins_without_pandas_concat(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a chunk of one NumPy shape joins by numpy.concatenate, not pandas.concat")

    monkeypatch.setattr(pd, "concat", refuse)
    out = OutputCollector(parse("k string, n long, x double, ok boolean"), "pandas")
    out.add([pd.DataFrame({"k": ["a"], "n": [1], "x": [0.5], "ok": [True]}),
             pd.DataFrame({"k": ["b", None], "n": [2, 3], "x": [1.5, float("nan")], "ok": [False, True]})], where="h")
    assert out.table().to_pylist() == [{"k": "a", "n": 1, "x": 0.5, "ok": True},
                                       {"k": "b", "n": 2, "x": 1.5, "ok": False},
                                       {"k": None, "n": 3, "x": None, "ok": True}]


@pytest.mark.parametrize("emitted, match", [([{"k": "a"}], "DataFrame"), ([pd.DataFrame({"k": ["a"]})], "'n'"),
                                            ([pd.DataFrame([[1, 2, 3]])], "3 unnamed"),
                                            ([pd.DataFrame({"k": ["a"], "n": ["x"]})], "output schema")])
def test_pandas_frames_that_do_not_fit_are_refused(emitted, match):
    out = OutputCollector(SCHEMA, "pandas")
    with pytest.raises(StateVariableError, match=match):
        out.add(emitted, where="handleInputRows")
        out.table()


def test_rows_by_field_name_dict_or_position():
    from pyspark.sql import Row

    out = OutputCollector(SCHEMA, "rows")
    out.add([Row(n=1, k="a"), {"k": "b", "n": 2}, ("c", 3)], where="h")
    assert out.table().to_pylist() == [{"k": "a", "n": 1}, {"k": "b", "n": 2}, {"k": "c", "n": 3}]
    assert OutputCollector(SCHEMA, "rows").table().num_rows == 0
    bad = OutputCollector(SCHEMA, "rows")
    bad.add([("c", "not a number")], where="h")
    with pytest.raises(StateVariableError):
        bad.table()
    assert isinstance(OutputCollector(SCHEMA, "pandas").table(), pa.Table)
