"""The short version of ``bench/state_read.py`` (a partitioned state read as a Spark DataFrame against ``blobstate
restore`` of every partition and a local scan), on the suite's Spark session: it runs end to end and both ways
read the same entries and bytes (the benchmark checks it); the times are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_state_read_benchmark_runs_end_to_end(spark_session, tmp_path, capsys):
    from bench import state_read

    out = tmp_path / "state-read.json"
    assert state_read.main(["--size", "2MiB", "--partitions", "2", "--runs", "1", "--warm", "--work",
                            str(tmp_path / "work"), "--out", str(out)], spark=spark_session) == 0
    report = json.loads(out.read_text())
    assert set(report["seconds"]) == {"read_state count", "read_state full scan", "restore + local scan"}
    assert report["keys"] == 2048 and report["cache"] == "warm (--warm)"
    assert "restore + local scan" in capsys.readouterr().out
