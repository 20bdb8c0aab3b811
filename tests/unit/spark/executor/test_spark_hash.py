"""Spark SQL's ``hash`` in Python (``blobstate.spark.executor.spark_hash``): the values Spark 4's ``SELECT hash(...)``
returned for these inputs (read from a local Spark session; ``tests/e2e/test_spark_keygroups.py`` compares thousands
more against the live session), and the refusals."""

from __future__ import annotations

import pytest

from blobstate.errors import ConfigurationError
from blobstate.spark.executor.spark_hash import check_types, spark_hash

# (values, types, what Spark SQL's hash gave)
SPARK = [
    ([1], ["integer"], -559580957),
    ([1], ["long"], -1712319331),  # the type decides, not the value
    (["a"], ["string"], 1485273170),  # a tail of one byte: not reference Murmur3's answer
    (["abcde"], ["string"], 814637928),
    (["é✓"], ["string"], 80179236),  # UTF-8, bytes above 127 in the tail taken as signed
    ([True], ["boolean"], -559580957),  # as the int 1
    ([None, "x"], ["string", "string"], -80340190),  # a null leaves the seed as it was
    (["JFK", "LAX"], ["string", "string"], 1355865342),
    ([-7, -1], ["integer", "long"], 109662796),
    ([b"\x00\xff\x80"], ["binary"], -2052482636),
    ([""], ["string"], 142593372),
]


@pytest.mark.parametrize(("values", "types", "expected"), SPARK)
def test_the_hash_is_the_one_spark_sql_computes(values, types, expected):
    assert spark_hash(values, types) == expected


@pytest.mark.parametrize(("values", "types"), [
    ([1.5], ["double"]), (["x"], ["integer"]), ([1], ["string"]), ([True], ["integer"]), ([1, 2], ["integer"]),
    ([1], ["decimal(10,2)"]),
])
def test_a_type_or_value_it_cannot_hash_as_spark_does_is_refused(values, types):
    with pytest.raises(ConfigurationError):
        spark_hash(values, types)


def test_check_types_names_the_type():
    check_types(["string", "LONG", "boolean", "binary", "short"])
    with pytest.raises(ConfigurationError, match="'timestamp'"):
        check_types(["string", "timestamp"])
