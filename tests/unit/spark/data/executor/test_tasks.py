"""The pure parts of ``blobstate.spark.data.executor.tasks`` (no Spark): entries into Arrow record batches (typed
columns, anything else in the raw columns) and back into a store exactly (``row_entries``, ``fill``, on a real RocksDB),
with keys that arrive twice and rows that cannot be stored reported, never written."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from rocksdict import Rdict  # noqa: E402

from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.restoring import entries  # noqa: E402
from blobstate.restoring.entries import Undecoded  # noqa: E402
from blobstate.spark.data.executor.tasks import ReadPlan, RepositoryRef, arrow_batch, column_type, fill, row_entries  # noqa: E402

PLAN = ReadPlan(RepositoryRef("file:///nowhere"), StoreKey("j", "group", "s"), (), "string", "bigint")
PICKLE = Undecoded(b"\x06" + b"\x80\x04K\x01.")  # a pickle of 1, as rocksdict stores it


def test_entries_of_every_type_go_through_arrow_and_back_into_a_store_exactly(tmp_path):
    keys = ["a", "b", 7, b"\x00k", "c", "d", "e"]
    values = [1, 2**70, "text", True, 2.5, PICKLE, -(2**63)]
    batch = arrow_batch({"partition": 3}, keys, values, PLAN)
    assert batch.schema.names == ["partition", "key", "value", "key_raw", "value_raw"]
    assert batch.column("partition").to_pylist() == [3] * 7
    assert batch.column("key").to_pylist() == ["a", "b", None, None, "c", "d", "e"]
    assert batch.column("value").to_pylist() == [1, None, None, None, None, None, -(2**63)]
    assert batch.column("value_raw").to_pylist()[1] == entries.encode(2**70)  # past 64 bits: raw, exact
    assert batch.column("value_raw").to_pylist()[3] == b"\x05\x01"  # a bool is not a bigint
    path = str(tmp_path / "db")
    db = Rdict(path)
    try:
        assert fill(db, row_entries([batch])) == (7, [], False)
    finally:
        db.close()
    with entries.open_entries(path) as items:
        read = {(type(k), k): v for k, v in items}
    for key, value in zip(keys, values, strict=True):
        assert type(read[(type(key), key)]) is type(value) and read[(type(key), key)] == value, key


def test_a_key_twice_and_rows_no_store_holds_are_reported_and_never_written(tmp_path):
    db = Rdict(str(tmp_path / "db"))
    try:
        rows = [("k", 1), ("k", 2), "a row with a null value (key 'x')"]
        keys, problems, duplicates = fill(db, iter(rows))
        assert (keys, duplicates) == (1, True) and problems == ["key 'k' arrives twice", rows[2]]
    finally:
        db.close()
    batch = pa.RecordBatch.from_pydict({"key": [None, "b"], "value": ["v", None],
                                        "key_raw": [b"\x09x", None], "value_raw": [None, None]})
    assert [r for r in row_entries([batch])] == ["key Undecoded(data=b'\\tx'): raw bytes of no type rocksdict "
                                                 "stores", "a row with a null value (key 'b')"]
    assert column_type("long") == "bigint"
    with pytest.raises(Exception, match="not 'struct'"):
        column_type("struct")
