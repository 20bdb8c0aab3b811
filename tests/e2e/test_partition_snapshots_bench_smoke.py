"""The short version of ``bench/partition_snapshots.py`` (what partition snapshots cost a batch's critical path:
none, in the background, inline), on the test session: every mode runs; an inline snapshot of each batch is
committed by the next group; the times are the benchmark's, never asserted here."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytest.importorskip("pyspark")


def test_partition_snapshots_benchmark_runs_every_mode(spark_session, flights_days, tmp_path):
    from bench import partition_snapshots
    from blobstate.spark.demo.flights import flights_schema

    directory, _ = flights_days
    frames = [spark_session.read.schema(flights_schema()).option("header", True).csv(os.path.join(directory, n))
              for n in sorted(os.listdir(directory))[:3]]
    report = partition_snapshots.measure(spark_session, frames, rounds=1, partitions=4, value_bytes=1024,
                                         work=str(tmp_path))
    assert all(report[mode]["batches"] == 2 for mode in partition_snapshots.MODES)
    assert report["none"]["snapshots_committed"] == [0]
    assert report["inline"]["snapshots_committed"] == [2 * 4]  # batches 0 and 1, committed by groups 1 and 2
    assert report["inline"]["snapshot_wait_median_ms"] > 0
