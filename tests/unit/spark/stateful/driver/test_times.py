"""``blobstate.spark.stateful.driver.times``: a batch's times from Spark's offsets metadata (a virtual clock: the
metadata is given, nothing reads the wall clock)."""

from __future__ import annotations

import pytest

from blobstate.errors import StorageError
from blobstate.spark.stateful.driver.times import batch_times, read_batch_times


def meta(ts: int, wm: int = 0) -> dict:
    return {"batchTimestampMs": ts, "batchWatermarkMs": wm, "conf": {}}


@pytest.mark.parametrize("mode", ["None", "ProcessingTime", "processingtime"])
def test_without_event_time_a_batch_has_only_its_timestamp(mode):
    times = batch_times(7, meta(1_700, 99), meta(1_600, 50), mode)
    assert (times.batch_id, times.processing_time_ms, times.watermark_ms, times.late_watermark_ms) == \
        (7, 1_700, None, None)


def test_in_event_time_timers_see_this_batchs_watermark_and_late_rows_the_previous_one():
    assert batch_times(0, meta(10, 0), None, "EventTime").late_watermark_ms is None  # the first batch keeps all
    times = batch_times(3, meta(10, 4_000), meta(5, 3_000), "EventTime")
    assert (times.processing_time_ms, times.watermark_ms, times.late_watermark_ms) == (10, 4_000, 3_000)


class Location:
    location = "/ck/q"

    def __init__(self, offsets: dict[int, dict]) -> None:
        self.offsets = offsets
        self.read: list[int] = []

    def offset_metadata(self, batch_id: int) -> dict | None:
        self.read.append(batch_id)
        return self.offsets.get(batch_id)


def test_read_batch_times_reads_the_previous_batch_only_in_event_time():
    location = Location({4: meta(50, 1_000), 5: meta(60, 2_000)})
    assert read_batch_times(location, 5, "EventTime") == batch_times(5, meta(60, 2_000), meta(50, 1_000),
                                                                     "EventTime")
    assert location.read == [5, 4]
    location.read.clear()
    assert read_batch_times(location, 5, "ProcessingTime").late_watermark_ms is None and location.read == [5]


def test_a_batch_spark_never_planned_is_a_storage_error():
    with pytest.raises(StorageError, match=r"offsets/9 is missing in /ck/q"):
        read_batch_times(Location({}), 9, "None")
