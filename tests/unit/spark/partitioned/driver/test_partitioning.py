"""``blobstate.spark.partitioned.driver.partitioning``: the key columns a partitioned store's group records carry, and
the check that refuses (exit 2, ``PartitioningError``, a ``PartitionCountError``) a store opened with other columns,
another order or other Spark types, naming both partitionings."""

from __future__ import annotations

import pytest

from blobstate.errors import PartitionCountError
from blobstate.model import layout
from blobstate.model.records import DELTA, GROUP, Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.errors import PartitioningError
from blobstate.spark.partitioned.driver.partitioning import check_partitioning, recorded_partitioning

KEY = StoreKey("job", "0", "flights")
RECORDED = (("origin", "StringType()"), ("dest", "StringType()"))


def group(generation: int, key_columns=()) -> Checkpoint:
    entry = PartitionEntry(0, DELTA, f"p0-{generation}", generation, layout.blob_id(KEY, f"{generation:032x}"), 1, 2)
    return Checkpoint(KEY, f"g{generation}", generation, "", 0, 0, 1, batch_id=generation, kind=GROUP,
                      num_partitions=1, partitions=(entry,), key_columns=key_columns)


def snapshot(generation: int) -> Checkpoint:
    return Checkpoint(KEY, f"s{generation}", generation, layout.index_id(KEY, f"{generation:032x}"), 1, 2, 3)


def test_the_newest_group_record_naming_columns_gives_them():
    older = (("origin", "StringType()"),)
    assert recorded_partitioning([group(1, older), group(2, RECORDED), group(3), snapshot(4)]) == RECORDED
    assert recorded_partitioning([group(1, RECORDED), group(2, older)]) == older


def test_nothing_recorded_checks_nothing():
    assert recorded_partitioning([]) == () and recorded_partitioning([snapshot(1), group(2)]) == ()
    check_partitioning((), ["anything"], ["LongType()"], "store")


def test_the_same_columns_in_the_same_order_and_types_pass():
    check_partitioning(RECORDED, ["origin", "dest"], ["StringType()", "StringType()"], "store")
    check_partitioning(RECORDED, ("origin", "dest"), None, "store")  # types unknown: names and order only


@pytest.mark.parametrize("cols, types", [
    (["dest", "origin"], None), (["origin"], None), (["origin", "dest", "year"], None), (["origin", "Dest"], None),
    (["origin", "dest"], ["StringType()", "IntegerType()"]),
], ids=["another order", "fewer", "more", "another name", "another type"])
def test_any_other_partitioning_is_refused_naming_both(cols, types):
    with pytest.raises(PartitioningError) as info:
        check_partitioning(RECORDED, cols, types, "job/0/flights")
    message = str(info.value)
    assert message.startswith("job/0/flights is partitioned by (origin StringType(), dest StringType()), but it was "
                              f"opened with key_cols={list(cols)}")
    assert "key_cols=['origin', 'dest']" in message and "nothing was changed" in message
    assert (types is None) == ("of types" not in message)
    assert isinstance(info.value, PartitionCountError) and info.value.exit_code == 2
