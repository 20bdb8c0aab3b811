"""A batch's times, fixed for every run of it: read from what Spark wrote into ``offsets/<batch id>`` when it
planned the batch, so a batch re-run after a crash gets the same processing time and watermarks, hence the same
state and the same output.

* processing time of batch N: Spark's ``batchTimestampMs`` in ``offsets/N``;
* event-time watermark of batch N (timers, EventTime mode): Spark's ``batchWatermarkMs`` in ``offsets/N``. The
  query's input carries ``withWatermark(event_time_column, delay)`` (``transform_with_state`` adds it), so Spark
  itself tracks the largest event time the batches up to N-1 saw and writes ``max - delay`` (never going back) into
  ``offsets/N`` before N runs: Spark's own rule, recorded by Spark, with nothing of ours to commit;
* late-events watermark of batch N: the watermark of batch N (none for the query's first batch). Spark's own
  operator drops input at or below the previous batch's watermark, and with its no-data batches (on by default)
  the batch before one with input always has that input batch's watermark: Spark runs a no-data batch whenever the
  watermark moves;
* Spark's no-data batch itself: with ``foreachBatch`` Spark runs none, so a batch with input whose times moved
  (ProcessingTime mode: always; EventTime mode: its watermark is above the previous batch's) first runs the
  processor with no data at its times (timers due, TTL sweep), then with its input, in the same staged batch and
  commit: the order of calls Spark's no-data batch and the following batch make (``needs_no_data_pass``).
"""

from __future__ import annotations

from typing import Any

from blobstate.errors import StorageError
from blobstate.spark.processor import BatchTimes


def batch_times(batch_id: int, meta: dict[str, Any], time_mode: str) -> BatchTimes:
    """The ``BatchTimes`` of ``batch_id`` from its offsets metadata ``meta``. Watermarks are given in EventTime
    mode only (Spark's ``TimerValues`` carry none otherwise). Times in ms since the epoch."""
    processing = int(meta["batchTimestampMs"])
    if time_mode.lower() != "eventtime":
        return BatchTimes(batch_id, processing)
    watermark = int(meta.get("batchWatermarkMs", 0))
    return BatchTimes(batch_id, processing, watermark, watermark if batch_id > 0 else None)


def needs_no_data_pass(time_mode: str, times: BatchTimes, previous: dict[str, Any] | None) -> bool:
    """Whether the batch runs Spark's no-data batch first (see the module docstring); ``previous``: the previous
    batch's offsets metadata (None: the query's first batch, which has nothing due before its input)."""
    mode = time_mode.lower()
    if previous is None or mode == "none":
        return False
    if mode == "processingtime":
        return True
    return times.watermark_ms is not None and times.watermark_ms > int(previous.get("batchWatermarkMs", 0))


def read_batch_times(location: Any, batch_id: int, time_mode: str) -> tuple[BatchTimes, bool]:
    """``(batch_times, needs_no_data_pass)`` of ``batch_id`` read from ``location`` (a ``CheckpointLocation``).
    Raises ``StorageError`` when Spark's ``offsets/<batch_id>`` is missing (Spark writes it before it runs the
    batch)."""
    meta = location.offset_metadata(batch_id)
    if meta is None:
        raise StorageError(f"Spark's offsets/{batch_id} is missing in {location.location}: the batch's times "
                           "cannot be read")
    times = batch_times(batch_id, meta, time_mode)
    previous = location.offset_metadata(batch_id - 1) if batch_id > 0 and time_mode.lower() != "none" else None
    return times, needs_no_data_pass(time_mode, times, previous)


__all__ = ["batch_times", "needs_no_data_pass", "read_batch_times"]
