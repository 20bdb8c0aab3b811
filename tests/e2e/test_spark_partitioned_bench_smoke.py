"""The short version of ``bench/spark_state.py`` (the partitioned state against Spark's own RocksDB state store):
its synthetic input, blobstate's fold and its per-batch summary, on the test session with no extra JVM (the
benchmark's drivers, kills and restarts are its own). The input is deterministic and covers every key once before
the steady batches; the fold's state equals a pandas aggregation of the same files. Times are never asserted."""

from __future__ import annotations

import os
import struct
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


def test_the_state_benchmark_input_fold_and_summary(spark_session, tmp_path):
    import pandas as pd

    from bench import spark_state
    from bench.spark_state_driver import fold
    from blobstate.spark import partitioned

    data = str(tmp_path / "data")
    extra = spark_state.generate(data, keys=500, load_rows=200, batches=3, rows=100)
    assert spark_state.generate(data, keys=500, load_rows=200, batches=3, rows=100) == extra  # reused
    files = sorted(os.path.join(data, "input", n) for n in os.listdir(os.path.join(data, "input")))
    assert len(files) == 3 + 3 and len(extra) == 1
    frames = [pd.read_parquet(f) for f in files]
    assert sorted(pd.concat(frames[:3])["k"]) == list(range(500))  # the load covers every key once

    ps = partitioned(spark_session, repo=f"file://{tmp_path}/repo", checkpoint_location=str(tmp_path / "ck"),
                     job="bench", store="agg", num_partitions=2, key_cols=["k"], local_dir=str(tmp_path / "local"),
                     work_dir=str(tmp_path / "work"), snapshot_every=0)
    try:
        for batch_id, path in enumerate(files):
            ps.run_batch(spark_session.read.parquet(path), batch_id, fold)
    finally:
        ps.close()
    state = _restored(tmp_path, ps.key, partitions=2)
    expected = pd.concat(frames).groupby("k")["v"].agg(["count", "sum"])
    assert state == {int(k): (int(r["count"]), int(r["sum"])) for k, r in expected.iterrows()}

    lines = [{"batch": s.batch_id, "trigger_ms": s.job_ms + s.commit_ms, "add_ms": s.job_ms, "state_rows": 0,
              "blobstate": {"job_ms": s.job_ms, "commit_ms": s.commit_ms, "task_ms": list(s.task_ms),
                            "executors": list(s.executors), "partitions_local": s.partitions_local,
                            "partitions_placed": s.partitions_placed, "partitions_restored": s.partitions_restored}}
             for s in ps.batch_stats]
    summary = spark_state.summarize(lines, load_batches=3)
    assert summary["steady_batches"] == 1 and summary["tasks_local"] == 1.0 and summary["restored"] == 0
    assert summary["trigger_ms"]["p50"] >= summary["add_ms"]["p50"] > 0


def _restored(tmp_path, key, *, partitions):
    """Every partition restored from the repository alone into a fresh directory: ``{k: (count, sum)}``."""
    from rocksdict import AccessType, Rdict

    from blobstate.repository.backends import open_local_store
    from blobstate.repository.repo import Repository
    from blobstate.restoring import chain as replay

    repo, state = Repository.open(f"file://{tmp_path}/repo"), {}
    try:
        for p in range(partitions):
            dest = str(tmp_path / "check" / f"p{p}")
            replay.restore_chain(repo, replay.plan(repo, key, partition=p), dest,
                                 local_store=open_local_store("rocksdb"), store_type="rocksdb", force=True)
            db = Rdict(dest, access_type=AccessType.read_only())
            try:
                state.update({int(k): struct.unpack("<qq", v) for k, v in db.items()})
            finally:
                db.close()
        return state
    finally:
        repo.close()
