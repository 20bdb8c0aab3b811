"""The short version of ``bench/stateful_query.py`` (the running count through ``transform_with_state`` on the
driver's store and on N partitions, and through Spark's own ``transformWithStateInPandas``): it runs end to end and
every run emits the same number of rows; the times are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-processors")]


def test_stateful_query_benchmark_runs_end_to_end(tmp_path, capsys):
    pytest.importorskip("pyspark")
    from bench import stateful_query

    out = tmp_path / "stateful.json"
    assert stateful_query.main(["--keys", "50", "--rows", "200", "--batches", "3", "--partitions", "2",
                                "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    runs = report["runs"]
    assert set(runs) == {"spark", "driver", "partitioned"}
    assert len({run["rows_out"] for run in runs.values()}) == 1 and runs["driver"]["rows_out"] > 0
    assert all(run["batches"] == 3 for run in runs.values())
    assert "partitioned" in capsys.readouterr().out
