"""Rows sent to partitions by key-group range: the Spark side of ``blobstate.model.keygroups``.

A plain partitioned store sends a row to ``pmod(hash(key_cols), N)`` (``repartition(N, *key_cols)``). A key-grouped
store of ``K`` key groups sends it to the partition whose range holds its key group: ``kg = pmod(hash(key_cols),
K)`` (the very hash ``repartition`` uses: Spark SQL's ``hash``, Murmur3 of the typed columns, seed 42, computed in
the JVM), partition ``kg * N div K``. Spark cannot repartition to a computed partition number, only by a hash, so
each partition ``p`` is given a *route*: a long ``r_p`` that Spark's own hash sends to ``p`` (``pmod(hash(r_p), N)
== p``), found once per ``N`` by a tiny Spark query (``route_values``: Spark decides, nothing of its hash is
re-implemented here); ``by_key_group_range`` then repartitions by the route of each row's partition, so the shuffle
is Spark's ordinary hash shuffle (exchange reuse, no Python in it) and its partition ``p`` holds exactly the rows of
``p``'s key groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from blobstate.errors import ConfigurationError
from blobstate.model.keygroups import check_key_groups

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

KEY_GROUP_COLUMN = "__blobstate_key_group"  # a row's key group, kept for the task when asked
ROUTE_COLUMN = "__blobstate_route"  # dropped again after the shuffle
CANDIDATES_PER_PARTITION = 64  # longs tried per partition: every one of N is hit unless e^-64 luck


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def key_group_expr(key_cols: Sequence[str], key_groups: int) -> Column:
    """A row's key group: ``pmod(hash(key_cols...), key_groups)`` (an int column)."""
    from pyspark.sql import functions as F

    return F.expr(f"pmod(hash({', '.join(_quoted(c) for c in key_cols)}), {int(key_groups)})")


def route_values(spark: SparkSession, num_partitions: int) -> tuple[int, ...]:
    """For each partition ``p`` of ``num_partitions``, the smallest long Spark's hash partitioning sends to ``p``
    (one small Spark job). Raises ``ConfigurationError`` if some partition got none (never seen)."""
    from pyspark.sql import functions as F

    found = (spark.range(0, CANDIDATES_PER_PARTITION * num_partitions)
             .select(F.expr(f"pmod(hash(id), {int(num_partitions)})").alias("p"), "id")
             .groupBy("p").agg(F.min("id").alias("route")).collect())
    routes = {int(row["p"]): int(row["route"]) for row in found}
    if sorted(routes) != list(range(num_partitions)):
        raise ConfigurationError(f"no route found for partitions {sorted(set(range(num_partitions)) - set(routes))}")
    return tuple(routes[p] for p in range(num_partitions))


def by_key_group_range(df: DataFrame, key_cols: Sequence[str], key_groups: int, num_partitions: int,
                       routes: Sequence[int], *, keep_key_group: bool = False) -> DataFrame:
    """``df`` repartitioned into ``num_partitions`` so that partition ``p`` holds exactly the rows whose key group
    (``key_group_expr``) lies in ``p``'s range (``blobstate.model.keygroups.key_group_range``); ``routes`` from
    ``route_values`` for the same count. ``keep_key_group``: the key group as a last column ``KEY_GROUP_COLUMN``.
    Raises ``ConfigurationError`` for counts ``check_key_groups`` refuses or routes of another count."""
    from pyspark.sql import functions as F

    check_key_groups(key_groups, num_partitions)
    if len(routes) != num_partitions:
        raise ConfigurationError(f"{len(routes)} routes for {num_partitions} partitions")
    key_group = key_group_expr(key_cols, key_groups)
    # blobstate.model.keygroups:partition_of_key_group in Spark SQL (one plan, no Python per row)
    partition = F.expr(f"({_quoted(KEY_GROUP_COLUMN)} * {int(num_partitions)}) div {int(key_groups)}")
    route = F.element_at(F.array(*[F.lit(int(r)).cast("long") for r in routes]), (partition + 1).cast("int"))
    shuffled = (df.withColumn(KEY_GROUP_COLUMN, key_group).withColumn(ROUTE_COLUMN, route)
                .repartition(num_partitions, ROUTE_COLUMN).drop(ROUTE_COLUMN))
    return shuffled if keep_key_group else shuffled.drop(KEY_GROUP_COLUMN)


__all__ = ["KEY_GROUP_COLUMN", "ROUTE_COLUMN", "by_key_group_range", "key_group_expr", "route_values"]
