"""``blobstate.spark.partitioned.driver.routing``: what it checks before it builds a Spark plan (no Spark session:
the DataFrame handed in is a bare object, so any use of it before the refusal fails the test). The routing itself
(rows in their key group's partition, routes Spark's own hash sends where they should) is checked on a real Spark
by tests/e2e/test_spark_keygroups.py."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from blobstate.errors import ConfigurationError  # noqa: E402
from blobstate.model.keygroups import MAX_KEY_GROUPS  # noqa: E402
from blobstate.spark.partitioned.driver import routing  # noqa: E402


class Untouchable:
    """A DataFrame stand-in that fails on any use: the checks must come first."""

    def __getattr__(self, name: str):  # noqa: ANN204
        raise AssertionError(f"the DataFrame was used ({name}) before the arguments were checked")


@pytest.mark.parametrize("routes", [(), (1, 2, 3), (1, 2, 3, 4, 5)])
def test_routes_of_another_partition_count_are_refused_before_spark_is_asked(routes):
    with pytest.raises(ConfigurationError, match=f"{len(routes)} routes for 4 partitions"):
        routing.by_key_group_range(Untouchable(), ["k"], 16, 4, routes)


@pytest.mark.parametrize(("key_groups", "partitions"), [(0, 1), (MAX_KEY_GROUPS + 1, 4), (8, 9), (8, 0), (True, 1)])
def test_counts_the_key_groups_cannot_hold_are_refused_before_spark_is_asked(key_groups, partitions):
    with pytest.raises(ConfigurationError):
        routing.by_key_group_range(Untouchable(), ["k"], key_groups, partitions, tuple(range(max(partitions, 0))))


def test_column_names_are_quoted_for_spark_sql_with_backticks_doubled():
    assert routing._quoted("k") == "`k`"
    assert routing._quoted("a`b") == "`a``b`"
    assert routing._quoted("a b.c") == "`a b.c`"


def test_the_helper_columns_cannot_clash_with_each_other():
    assert routing.KEY_GROUP_COLUMN != routing.ROUTE_COLUMN
    assert all(name.startswith("__blobstate_") for name in (routing.KEY_GROUP_COLUMN, routing.ROUTE_COLUMN))
