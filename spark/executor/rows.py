"""What a blobstate Spark task reads and hands back: its rows out of Arrow, and its one answer as a pickled row.

- ``arrow_rows``: a ``mapInArrow`` task's input as ``pyspark.sql.Row``s, one record batch converted at a time, with
  ``collect()``'s values (Spark's own Arrow-to-Row conversion);
- ``arrow_input`` / ``takes_arrow``: an ``update`` that asked for its input as the task's ``pyarrow.RecordBatch``es
  themselves (no ``Row`` made per row: its per-row cost goes);
- ``pickled_batch``: a task's answer (a ``Prepare``, a ``SnapshotResult``, a ``Written``) as the one row of
  ``OUTPUT_SCHEMA`` it outputs; ``collect_pickled``, the driver's half: the answers back. Under Spark Connect a
  ``mapInArrow`` row is the only way back from a task; the RDD path returns the objects themselves.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

OUTPUT_SCHEMA = "prepare binary"  # one row per task: its pickled answer
ARROW_INPUT = "__blobstate_arrow_input__"  # the mark ``arrow_input`` sets on an update function


def arrow_input(update: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``update(db, batches, ctx)`` as taking its partition's rows as ``pyarrow.RecordBatch``es: Spark's Arrow
    batches of the shuffled partition (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
    default), never converted to ``Row``s, so that the update reads whole columns and the store in bulk
    (``StagedWrites.get_many`` / ``put_many``). Usable as a decorator; returns ``update`` itself (a callable that
    takes no attribute, a bound method, is wrapped). An unmarked update keeps the ``Row`` iterator it always had.

    Such an update's batch runs through the ``mapInArrow`` path on classic PySpark too (the RDD path hands over
    Rows), which has no task placement: a partition whose copy is on another host is restored there."""
    try:
        setattr(update, ARROW_INPUT, True)
        return update
    except (AttributeError, TypeError):
        @functools.wraps(update)
        def marked(db: Any, batches: Any, ctx: Any) -> Any:
            return update(db, batches, ctx)
        setattr(marked, ARROW_INPUT, True)
        return marked


def takes_arrow(update: Callable[..., Any] | None) -> bool:
    """Whether ``update`` (or the function a ``functools.partial`` wraps) was marked by ``arrow_input``."""
    while isinstance(update, functools.partial):
        update = update.func
    return bool(getattr(update, ARROW_INPUT, False))


def collect_pickled(out: DataFrame) -> list[Any]:
    """``collect()`` a ``mapInArrow`` output of schema ``OUTPUT_SCHEMA`` and unpickle its rows."""
    return [pickle.loads(row.prepare) for row in out.collect()]


def pickled_batch(obj: Any) -> pa.RecordBatch:
    """One ``OUTPUT_SCHEMA`` row holding ``obj`` pickled: what a ``mapInArrow`` task hands back to the driver."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({"prepare": [pickle.dumps(obj)]},
                                      schema=pa.schema([pa.field("prepare", pa.binary())]))


def arrow_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[Any]:
    """``pyspark.sql.Row``s of ``batches``, one record batch converted at a time, with ``collect()``'s values
    (Spark's own Arrow-to-Row conversion: timestamps as local naive datetimes, structs as ``Row``, ...)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    convert = _converter()
    schema = None
    for batch in batches:
        if schema is None:
            schema = from_arrow_schema(batch.schema)
        yield from convert(pa.Table.from_batches([batch]), schema)


def _converter() -> Any:
    """Spark's Arrow table to ``Row`` list conversion (``pyspark.sql.conversion`` since 4.0, before in
    ``pyspark.sql.connect.conversion``)."""
    try:
        from pyspark.sql.conversion import ArrowTableToRowsConversion
    except ImportError:  # PySpark 3.5
        from pyspark.sql.connect.conversion import ArrowTableToRowsConversion
    return ArrowTableToRowsConversion.convert


__all__ = ["ARROW_INPUT", "OUTPUT_SCHEMA", "arrow_input", "arrow_rows", "collect_pickled", "pickled_batch",
           "takes_arrow"]
