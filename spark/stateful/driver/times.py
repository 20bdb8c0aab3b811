"""A batch's times, fixed for every run of it: read from what Spark wrote into ``offsets/<batch id>`` when it
planned the batch, so a batch re-run after a crash gets the same processing time and watermarks, hence the same
state and the same output.

* processing time of batch N: Spark's ``batchTimestampMs`` in ``offsets/N``;
* event-time watermark of batch N (timers, EventTime mode): Spark's ``batchWatermarkMs`` in ``offsets/N``. The
  query's input carries ``withWatermark(event_time_column, delay)`` (``transform_with_state`` adds it), so Spark
  itself tracks the largest event time the batches up to N-1 saw and writes ``max - delay`` (never going back) into
  ``offsets/N`` before N runs: Spark's own rule, recorded by Spark, with nothing of ours to commit;
* late-events watermark of batch N: the event-time watermark of batch N-1 (``offsets/N-1``; none for the query's
  first batch), as Spark's ``transformWithState`` drops input at or below the previous batch's watermark.

Spark's own operator runs a no-data batch (timers, TTL sweep, no input) only when no input is waiting: while input
keeps coming, batch N handles its input, then the timers due at its times, as here. With ``foreachBatch`` Spark runs
no batch without input at all; the heartbeat (``inputs``) gives a query those idle batches: one with heartbeat rows
only runs with no data, as Spark's no-data batch does.
"""

from __future__ import annotations

from typing import Any

from blobstate.errors import StorageError
from blobstate.spark.processor import BatchTimes


def batch_times(batch_id: int, meta: dict[str, Any], previous: dict[str, Any] | None, time_mode: str) -> BatchTimes:
    """The ``BatchTimes`` of ``batch_id`` from its offsets metadata ``meta`` and the previous batch's (``previous``,
    None for the first batch). Watermarks are given in EventTime mode only (Spark's ``TimerValues`` carry none
    otherwise). Times in ms since the epoch."""
    processing = int(meta["batchTimestampMs"])
    if time_mode.lower() != "eventtime":
        return BatchTimes(batch_id, processing)
    watermark = int(meta.get("batchWatermarkMs", 0))
    late = None if previous is None else int(previous.get("batchWatermarkMs", 0))
    return BatchTimes(batch_id, processing, watermark, late)


def read_batch_times(location: Any, batch_id: int, time_mode: str) -> BatchTimes:
    """``batch_times`` of ``batch_id`` read from ``location`` (a ``CheckpointLocation``). Raises ``StorageError``
    when Spark's ``offsets/<batch_id>`` is missing (Spark writes it before it runs the batch)."""
    meta = location.offset_metadata(batch_id)
    if meta is None:
        raise StorageError(f"Spark's offsets/{batch_id} is missing in {location.location}: the batch's times "
                           "cannot be read")
    previous = location.offset_metadata(batch_id - 1) if batch_id > 0 and time_mode.lower() == "eventtime" else None
    return batch_times(batch_id, meta, previous, time_mode)


__all__ = ["batch_times", "read_batch_times"]
