"""Schemas read without a JVM (Spark's DDL and StructType), their value checks and the restart rule."""

from __future__ import annotations

import datetime as dt
import decimal

import numpy as np
import pytest

from blobstate.errors import EXIT_USAGE
from blobstate.spark.errors import StateSchemaError, StateVariableError
from blobstate.spark.processor.schema import Field, Schema, check_evolution, checker, parse


def test_ddl_reads_spark_spellings_into_canonical_types():
    s = parse("n long, i INTEGER NOT NULL, `odd name` string COMMENT 'x, y', d decimal(10, 2), b byte, "
              "ts timestamp, day date, f real")
    assert s.fields == (Field("n", "bigint"), Field("i", "int", False), Field("odd name", "string"),
                        Field("d", "decimal(10,2)"), Field("b", "tinyint"), Field("ts", "timestamp"),
                        Field("day", "date"), Field("f", "float"))
    assert parse(s.ddl()) == s  # the DDL it writes reads back the same
    assert parse("struct<a:int,b:double>") == Schema((Field("a", "int"), Field("b", "double")))
    assert parse("x decimal").fields[0].type == "decimal(10,0)"


def test_a_struct_type_reads_the_same_as_its_ddl():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    struct = StructType([StructField("n", LongType(), False), StructField("s", StringType())])
    assert parse(struct) == parse("n bigint NOT NULL, s string")


@pytest.mark.parametrize("ddl", ["a array<int>", "m map<string,int>", "s struct<x:int>", "a, b int", "", "a foo",
                                 "a int, a long"])
def test_what_the_runtime_does_not_store_is_refused_by_name(ddl):
    with pytest.raises(StateVariableError) as err:
        parse(ddl, what="state variable 'v'")
    assert "state variable 'v'" in str(err.value) and err.value.exit_code == EXIT_USAGE


def test_value_checks_follow_the_field_type():
    small = checker(Field("n", "tinyint"), what="v")
    assert small(127) == 127 and small(np.int64(5)) == 5 and type(small(np.int64(5))) is int
    for bad in (128, True, "1", 1.0):
        with pytest.raises(StateVariableError, match="'n'"):
            small(bad)
    assert checker(Field("x", "double"), what="v")(3) == 3.0
    assert checker(Field("x", "double"), what="v")(np.float32(0.5)) == 0.5
    with pytest.raises(StateVariableError, match="NOT NULL"):
        checker(Field("x", "string", False), what="v")(None)
    assert checker(Field("x", "string"), what="v")(None) is None
    assert checker(Field("x", "binary"), what="v")(bytearray(b"ab")) == b"ab"
    with pytest.raises(StateVariableError):
        checker(Field("x", "date"), what="v")(dt.datetime(2024, 1, 1))
    assert checker(Field("x", "decimal(5,2)"), what="v")(decimal.Decimal("1.25")) == decimal.Decimal("1.25")


def test_a_nullable_field_added_continues_and_anything_else_is_refused_naming_both_schemas():
    old = parse("n long, s string")
    check_evolution("count", "value", old, old)
    check_evolution("count", "value", old, parse("n long, s string, extra double"))
    check_evolution("count", "value", parse("n long NOT NULL"), parse("n long"))  # relaxing is fine
    refused = {"n long": "removed", "n int, s string": "changed type", "n long, s string, x int NOT NULL": "added",
               "n long NOT NULL, s string": "became NOT NULL", "m long, s string": "removed"}
    for new, why in refused.items():
        with pytest.raises(StateSchemaError) as err:
            check_evolution("count", "value", old, parse(new))
        message = str(err.value)
        assert why in message and "'count'" in message and old.ddl() in message and parse(new).ddl() in message
        assert err.value.exit_code == EXIT_USAGE


def test_arrow_types():
    import pyarrow as pa

    s = parse("n long, t timestamp, u timestamp_ntz, d decimal(12,3), b boolean")
    assert s.arrow().types == [pa.int64(), pa.timestamp("us", tz="UTC"), pa.timestamp("us"), pa.decimal128(12, 3),
                               pa.bool_()]
