"""The short version of ``bench/processors.py`` (the five processors on blobstate against Spark's own
``transformWithStateInPandas`` / ``transformWithState``, paired batch by batch): the running count at tiny sizes, one
pair, on the test session, end to end. The times are the benchmark's, never asserted here."""

from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def test_processors_benchmark_pairs_spark_and_blobstate_batch_by_batch(spark_session, tmp_path):
    from bench import processors

    out = tmp_path / "report.json"
    before = spark_session.conf.get("spark.sql.streaming.stateStore.providerClass", None)
    processors.main(["--keys", "30", "--batches", "2", "--rows", "12", "--load-rows", "30", "--partitions", "0",
                     "--processors", "running_count", "--pairs", "spark-pandas:blobstate", "--trigger-ms", "200",
                     "--work", str(tmp_path), "--out", str(out)])
    report = json.loads(out.read_text())
    result = report["processors"]["running_count"]
    assert result["load_files"] == 1 and result["steady_batches"] == 2
    for run in ("spark-pandas", "blobstate"):
        assert result[run]["trigger_ms"]["n"] == 2 and len(result[run]["batch_ms"]) == 2
        assert result[run]["spark_phases_ms_p50"]["triggerExecution"] == result[run]["trigger_ms"]["p50"]
    assert set(result["ratio"]) == {"spark-pandas/blobstate"}
    assert {"run_batch", "group", "input", "spark_to_arrow"} <= set(result["blobstate"]["where_ms_p50"])
    assert set(result["blobstate"]["engine_ms_p50"]) == {"delta_ms", "apply_ms"}
    # the suite's session is left as it was
    assert spark_session.conf.get("spark.sql.streaming.stateStore.providerClass", None) == before
