"""``blobstate.spark.stateful.driver.times``: a batch's times from Spark's offsets metadata (a virtual clock: the
metadata is given, nothing reads the wall clock), and when Spark's no-data batch runs before a batch's input."""

from __future__ import annotations

import pytest

from blobstate.errors import StorageError
from blobstate.spark.stateful.driver.times import batch_times, needs_no_data_pass, read_batch_times


def meta(ts: int, wm: int = 0) -> dict:
    return {"batchTimestampMs": ts, "batchWatermarkMs": wm, "conf": {}}


@pytest.mark.parametrize("mode", ["None", "ProcessingTime", "processingtime"])
def test_without_event_time_a_batch_has_only_its_timestamp(mode):
    times = batch_times(7, meta(1_700, 99), mode)
    assert (times.batch_id, times.processing_time_ms, times.watermark_ms, times.late_watermark_ms) == \
        (7, 1_700, None, None)


def test_in_event_time_the_watermark_is_sparks_and_late_rows_are_those_at_or_below_it():
    assert batch_times(0, meta(10, 0), "EventTime").late_watermark_ms is None  # the first batch keeps every row
    times = batch_times(3, meta(10, 4_000), "EventTime")
    assert (times.processing_time_ms, times.watermark_ms, times.late_watermark_ms) == (10, 4_000, 4_000)


def test_the_no_data_pass_runs_when_the_times_moved():
    times = batch_times(3, meta(10, 4_000), "EventTime")
    assert needs_no_data_pass("EventTime", times, meta(5, 3_000))
    assert not needs_no_data_pass("EventTime", times, meta(5, 4_000))  # the watermark did not move
    assert not needs_no_data_pass("EventTime", times, None)  # the first batch: nothing due before its input
    assert needs_no_data_pass("ProcessingTime", batch_times(3, meta(10), "ProcessingTime"), meta(5))
    assert not needs_no_data_pass("None", batch_times(3, meta(10), "None"), meta(5))


class Location:
    location = "/ck/q"

    def __init__(self, offsets: dict[int, dict]) -> None:
        self.offsets = offsets
        self.read: list[int] = []

    def offset_metadata(self, batch_id: int) -> dict | None:
        self.read.append(batch_id)
        return self.offsets.get(batch_id)


def test_read_batch_times_reads_the_batch_and_the_one_before_only_when_it_matters():
    location = Location({4: meta(50, 1_000), 5: meta(60, 2_000)})
    assert read_batch_times(location, 5, "EventTime") == (batch_times(5, meta(60, 2_000), "EventTime"), True)
    assert location.read == [5, 4]
    location.read.clear()
    assert read_batch_times(location, 5, "None")[1] is False and location.read == [5]


def test_a_batch_spark_never_planned_is_a_storage_error():
    with pytest.raises(StorageError, match=r"offsets/9 is missing in /ck/q"):
        read_batch_times(Location({}), 9, "None")
