"""Rows with pyspark's Row contract, with or without pyspark."""

from __future__ import annotations

import builtins

from blobstate.spark.processor.rows import as_dict, row_class


def test_with_pyspark_it_is_pysparks_row():
    from pyspark.sql import Row

    row = row_class(["a", "b"])(1, 2)
    assert isinstance(row, Row) and row.b == 2 and row.asDict() == {"a": 1, "b": 2}


def test_without_pyspark_a_tuple_with_the_same_contract(monkeypatch):
    real_import = builtins.__import__

    def no_pyspark(name, *args, **kwargs):
        if name.startswith("pyspark"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyspark)
    row = row_class(["a", "b"])(1, 2)
    assert row == (1, 2) and row.a == 1 and row.asDict() == {"a": 1, "b": 2}
    assert as_dict(row, ["x", "y"]) == {"a": 1, "b": 2}


def test_output_rows_by_name_position_or_dict():
    assert as_dict((1, 2), ["x", "y"]) == {"x": 1, "y": 2}
    assert as_dict({"y": 2}, ["x", "y"]) == {"y": 2}
