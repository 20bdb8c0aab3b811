"""The short version of ``bench/partition_job.py`` (the per-batch job time of the partitioned state on classic
PySpark, the ``mapInArrow`` path against the RDD one), on the test session: both paths run every batch; the times
are the benchmark's, never asserted here."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def test_partition_job_benchmark_runs_both_paths(spark_session, flights_days, tmp_path):
    from bench import partition_job

    directory, frame = flights_days
    days = [os.path.join(directory, n) for n in sorted(os.listdir(directory))[:3]]
    report = partition_job.measure(spark_session, days, rounds=1, partitions=4, work=str(tmp_path))
    assert report["rows"] == sum(len(frame[(frame["month"] == 1) & (frame["day"] == d)]) for d in (1, 2, 3))
    assert report["batches_per_path"] == 2 and set(report) >= {"rdd", "arrow"}
    assert all(report[path]["p10_ms"] <= report[path]["median_ms"] <= report[path]["p90_ms"]
               for path in ("rdd", "arrow"))
