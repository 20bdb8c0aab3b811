"""``blobstate.spark.data.executor.keys``, the rescale's key mapping (no Spark): every stored key turned into the key
columns by the user's ``key_of``, from its typed column or its raw bytes, and a key that cannot be mapped named with
why, never guessed."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from blobstate.spark.data.executor.keys import KeyPlan, key_row, map_keys  # noqa: E402
from blobstate.worker import entries  # noqa: E402


def route(key):
    origin, dest = key.split("-")
    return origin, dest


def test_keys_mapped_to_key_columns_with_their_problems_named():
    plan = KeyPlan(route, (("origin", "string", True), ("dest", "string", True)), (pa.string(), pa.string()))
    assert key_row(plan, "JFK-LAX") == (("JFK", "LAX"), None)
    values, problem = key_row(plan, "nodash")
    assert values == (None, None) and "key 'nodash': key_of raised ValueError" in problem
    batch = pa.RecordBatch.from_pydict({"key": ["JFK-LAX", None], "value": ["1", "2"],
                                        "key_raw": [None, entries.encode("EWR-SFO")], "value_raw": [None, None]})
    (out,) = map_keys(plan, [batch])
    assert out.schema.names == ["origin", "dest", "key", "value", "key_raw", "value_raw", "_error"]
    assert out.column("origin").to_pylist() == ["JFK", "EWR"] and out.column("_error").to_pylist() == [None, None]
