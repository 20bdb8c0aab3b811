"""``blobstate.spark.executor.rows``, without a Spark session: a task's answer goes back as the one row of
``OUTPUT_SCHEMA`` and comes out whole; a task's Arrow input becomes ``Row``s with ``collect()``'s values, one record
batch at a time."""

from __future__ import annotations

import datetime
import functools
from types import SimpleNamespace

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from blobstate.spark.executor.rows import (  # noqa: E402
    OUTPUT_SCHEMA,
    arrow_input,
    arrow_rows,
    collect_pickled,
    pickled_batch,
    takes_arrow,
)


class _Collected:
    """What ``DataFrame.collect()`` of a ``mapInArrow`` output gives: a row per record batch row."""

    def __init__(self, batches: list) -> None:
        self.batches = batches

    def collect(self) -> list:
        return [SimpleNamespace(prepare=value) for b in self.batches for value in b.column(0).to_pylist()]


def test_an_answer_comes_back_whole_through_its_one_row():
    answers = [{"partition": 0, "entry": ("delta", b"\x00\xff")}, {"partition": 1, "skipped": "busy"}]
    batches = [pickled_batch(a) for a in answers]
    assert all(b.num_rows == 1 and b.schema.names == [OUTPUT_SCHEMA.split()[0]] for b in batches)
    assert collect_pickled(_Collected(batches)) == answers


def test_arrow_input_becomes_rows_with_collects_values_batch_by_batch():
    when = datetime.datetime(2013, 1, 1, 5, 15)
    schema = pa.schema([("origin", pa.string()), ("n", pa.int64()), ("at", pa.timestamp("us"))])
    first = pa.RecordBatch.from_pydict({"origin": ["JFK", "EWR"], "n": [3, 1], "at": [when, when]}, schema=schema)
    second = pa.RecordBatch.from_pydict({"origin": ["LGA"], "n": [None], "at": [None]}, schema=schema)
    seen = []

    def batches():
        for b in (first, second):
            seen.append(b.num_rows)
            yield b

    rows = arrow_rows(batches())
    assert next(rows).asDict() == {"origin": "JFK", "n": 3, "at": when} and seen == [2]  # one batch at a time
    assert [r.origin for r in rows] == ["EWR", "LGA"] and seen == [2, 1]


def test_an_update_marked_for_arrow_input_is_told_apart_from_one_taking_rows():
    def fold(db, batches, ctx):
        return ("fold", db)

    def plain(db, rows, ctx):
        return None

    assert arrow_input(fold) is fold and takes_arrow(fold)
    assert takes_arrow(functools.partial(functools.partial(fold), None))  # a partial of a marked update
    assert not takes_arrow(plain) and not takes_arrow(functools.partial(plain)) and not takes_arrow(None)

    class Job:
        def update(self, db, batches, ctx):
            return ("method", db)

    marked = arrow_input(Job().update)  # a bound method takes no attribute: it is wrapped, and still called
    assert takes_arrow(marked) and marked(7, iter(()), None) == ("method", 7)
    assert not takes_arrow(Job().update)
