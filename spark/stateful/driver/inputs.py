"""The query's input as a stateful processor query reads it, and a batch's input as the processor sees it.

* ``watermarked``: the stream with Spark's watermark on the event-time column (EventTime mode), so Spark tracks
  the watermark the batches' times come from (``times``);
* ``initial_rows``: an initial state's rows added to the query's first batch, keyed like the input;
* the heartbeat (an option): with ``foreachBatch`` Spark runs no batch without input, so a processing-time timer
  or a TTL expiry of a key that gets no more input would wait for the next row. ``with_heartbeat`` unions Spark's
  ``rate`` source (one row a second) into the stream, each heartbeat row marked and its other columns null, so
  batches keep coming at the trigger interval (at most one a second when idle); ``without_heartbeat`` drops them
  from every batch before the processor sees it. A batch with heartbeat rows only runs as a no-data batch (its
  timers, its TTL sweep) under the batch id Spark gave it, and its output goes to the sink under that id. Adding or
  removing the heartbeat changes the query's sources: Spark refuses that on an existing checkpoint location.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blobstate.errors import ConfigurationError
from blobstate.spark.stateful.executor.task import INITIAL, INITIAL_PREFIX

HEARTBEAT = "__blobstate_heartbeat"
HEARTBEAT_ROWS_PER_SECOND = 1


def watermarked(df: Any, event_time_column: str | None, delay_ms: int) -> Any:
    """``df`` with Spark's watermark on ``event_time_column`` (``delay_ms`` late rows allowed); ``df`` when None."""
    if event_time_column is None:
        return df
    return df.withWatermark(event_time_column, f"{int(delay_ms)} milliseconds")


def with_heartbeat(df: Any) -> Any:
    """``df`` with a ``rate`` source unioned in (see the module docstring); its rows marked ``HEARTBEAT``."""
    from pyspark.sql import functions as F

    beat = df.sparkSession.readStream.format("rate").option("rowsPerSecond", HEARTBEAT_ROWS_PER_SECOND).load()
    beat = beat.select(*[F.lit(None).cast(f.dataType).alias(f.name) for f in df.schema.fields],
                       F.lit(True).alias(HEARTBEAT))
    return df.withColumn(HEARTBEAT, F.lit(False)).unionByName(beat)


def without_heartbeat(batch: Any) -> Any:
    """A batch's DataFrame without the heartbeat's rows and column (as it is when there is no heartbeat)."""
    if HEARTBEAT not in batch.columns:
        return batch
    from pyspark.sql import functions as F

    return batch.filter(~F.col(HEARTBEAT)).drop(HEARTBEAT)




def initial_rows(initial_state: Any, key_cols: list[str]) -> tuple[Callable[[Any], Any], tuple[str, ...]]:
    """``(add, columns)``: ``add(batch)`` is the batch's DataFrame with ``initial_state``'s rows (a DataFrame with
    the key columns) unioned in, marked ``INITIAL`` and their other ``columns`` renamed under ``INITIAL_PREFIX``,
    so that a repartition by the key columns sends both to the key's partition
    (``blobstate.spark.stateful.executor.task.split_initial`` takes them apart)."""
    missing = [c for c in key_cols if c not in initial_state.columns]
    if missing:
        raise ConfigurationError(f"the initial state has no key column(s) {missing} (its columns: "
                                 f"{initial_state.columns})")
    columns = tuple(c for c in initial_state.columns if c not in key_cols)

    def add(batch: Any) -> Any:
        from pyspark.sql import functions as F

        rows = initial_state.select(*[F.col(c) for c in key_cols],
                                    *[F.col(c).alias(INITIAL_PREFIX + c) for c in columns],
                                    F.lit(True).alias(INITIAL))
        return batch.withColumn(INITIAL, F.lit(False)).unionByName(rows, allowMissingColumns=True)

    return add, columns


__all__ = ["HEARTBEAT", "initial_rows", "watermarked", "with_heartbeat", "without_heartbeat"]
