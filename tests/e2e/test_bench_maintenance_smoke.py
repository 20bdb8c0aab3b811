"""The short version of ``bench/maintenance.py`` (issue 42's rescale at restart), on the test session: a key-grouped
store of a few hundred keys built with N=4 restarts with N=3; the benchmark's own exactness check (every partition
restored from the repository alone against the fold of the input: count, SHA-256, nothing lost, held twice or out of
its key-group range) holds, the first batch says it regrouped 4 -> 3 and where its start went; and Spark's
``read_state`` of the built store gives the user's keys (not the key-group-prefixed stored ones). Times are the
benchmark's, never asserted here."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def test_rescale_at_restart_benchmark_runs_and_the_state_is_exact(spark_session, tmp_path):
    from bench import maintenance
    from blobstate.spark import read_state

    keys = 300
    figure = maintenance.rescale_at_restart(spark_session, str(tmp_path), keys=keys, targets=(3,), key_groups=64,
                                            offline=False, reference=False, snapshot_every=0)
    assert figure["build"]["batches"] == 3 and figure["build"]["key_groups"] == 64  # deltas only: no snapshot job
    run = figure["scenarios"]["4->3"]
    assert run["exactness"]["exact"], run["exactness"]
    assert run["exactness"]["keys"] == len(maintenance.fold(maintenance.input_batches(keys)))
    assert run["regrouped"] == [4, 3] and run["key_groups"] == 64 and run["batch_id"] == 3
    assert len(run["phases_ms_per_partition"]) == 3
    assert all(set(p) == {"restore", "cut", "ingest", "snapshot"} for p in run["phases_ms_per_partition"])
    built = read_state(spark_session, repo=f"file://{tmp_path}/built/repo", job=maintenance.JOB,
                       store=maintenance.STORE).select("key", "value").collect()
    assert {r["key"]: r["value"] for r in built} == maintenance.fold(maintenance.input_batches(keys)[:3])
