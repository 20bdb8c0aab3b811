"""Issue 27 cases 11 and 12 and issue 39 case 7 with a real local Spark (the flights query on a partitioned state, 4
partitions, a driver child killed with SIGKILL or paused with SIGSTOP; ``tests/support/spark_fixtures.py``):

- case 11: the driver is killed right after journaling ``CheckpointAppending`` of a group that carries partition
  snapshots (the append never sent); the outage outlasts the TTL: gc deletes the staged parts, the executors'
  local copies are gone. Recovery (what the restart runs first, here with the clock of a day later) must abort the
  group, not re-append a record whose parts are gone; the restart then re-runs the batch and ends exact.
- case 12: a partition snapshot task is SIGKILLed with its driver while it uploads (its RocksDB local checkpoint
  directory, hard links to the partition's SSTs, left on the executor); the restart's first task on the partition
  sweeps it, and the restart ends exact.
- issue 39 case 7: the driver is paused right before the append of a batch's group past the parts' TTL; gc takes
  the staged changelogs and the executors' kept copies are lost too. Resumed, the driver appends, finds the parts
  gone and nobody to put them back: it voids the group and fails the batch (the query stops); the restart re-runs
  the batch and ends exact, every retained record verifying.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")

from fault_harness import send_cont, wait_stopped  # noqa: E402
from fixtures_core import SUPPORT_DIR  # noqa: E402
from spark_fixtures import kill_paths, restored_routes, run_child, start_child, stop_child  # noqa: E402

import blobstate  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import partitioned  # noqa: E402
from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, reference_routes, update_routes  # noqa: E402

N = 4
KEY = StoreKey("flights", "group", "routes")
LATE_MS = 25 * 3600 * 1000  # past the default 1-day TTL of the staged parts
_RECOVER = """
import json, sys
from blobstate.commit.recover import recover
from blobstate.commit.session import StoreSession
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
c = json.loads(sys.argv[1])
with Repository.open(c["repo"]) as repo, StoreSession(StoreKey("flights", "group", "routes"), c["work"]) as session:
    print(json.dumps([outcome for _, outcome in recover(session, repo)]))
"""


def _paths(tmp_path, directory, frame, days: int = 5):
    """The paths of one kill case (``kill_paths``) with only the first ``days`` day files as input, and the frame
    of those days (the state the end must hold)."""
    paths = {**kill_paths(tmp_path, directory), "local": str(tmp_path / "local")}
    names = sorted(os.listdir(paths["input"]))
    for name in names[days:]:
        os.remove(os.path.join(paths["input"], name))
    kept = {(int(n[5:7]), int(n[8:10])) for n in names[:days]}
    return paths, frame[[(m, d) in kept for m, d in zip(frame["month"], frame["day"], strict=True)]]


def _restart(spark, paths) -> None:
    """The query again on the same checkpoint location and work dir, to the end of its input."""
    ps = partitioned(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights",
                     store="routes", num_partitions=N, key_cols=ROUTE_COLS, local_dir=paths["local"],
                     work_dir=paths["work"])
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .option("cleanSource", "archive").option("sourceArchiveDir", paths["archive"]).csv(paths["input"]))
    ps.start(stream.writeStream, update_routes)
    ps._query.processAllAvailable()
    ps.close()


def _ends_exact(tmp_path, paths, frame) -> list:
    state, history = restored_routes(tmp_path, paths["repo"])
    assert state == reference_routes(frame)
    reports = blobstate.verify(repo=paths["repo"], job=KEY.job, task=KEY.task, store=KEY.store, all_checkpoints=True)
    assert all(r.ok for r in reports)
    return history


def test_recovery_after_an_outage_longer_than_the_ttl_aborts_a_snapshot_group_and_the_restart_ends_exact(
        spark_session, flights_days, tmp_path, monkeypatch):
    paths, frame = _paths(tmp_path, *flights_days)
    monkeypatch.setenv("BLOBSTATE_TEST_KILL_IF_RECORD", '"kind":"snapshot"')
    code, out, err = run_child(tmp_path, paths, kill_at_event="CheckpointAppending:1:group", partitions=N,
                               partition_snapshot_every=2)
    assert code == -signal.SIGKILL, (code, out, err)
    later = int(time.time() * 1000) + LATE_MS
    deleted = [b for r in blobstate.gc(repo=paths["repo"], now_ms=later, work_base=str(tmp_path / "gc-host"))
               for b in r.expired_deleted]
    assert any("/indexes/" in b for b in deleted), deleted  # the group's staged snapshot parts among them
    shutil.rmtree(paths["local"])  # the executors' local copies are gone too (new executors)
    recovered = subprocess.run([sys.executable, "-c", _RECOVER, json.dumps(paths)], capture_output=True, text=True,
                               timeout=300, env={**os.environ, "PYTHONPATH": SUPPORT_DIR,
                                                 "BLOBSTATE_PLUGINS": "soak_plugin",
                                                 "BLOBSTATE_TEST_CLOCK_OFFSET_MS": str(LATE_MS)})
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    (outcome,) = json.loads(recovered.stdout)
    assert outcome.startswith("aborted"), outcome  # not re-appended blindly
    _restart(spark_session, paths)
    history = _ends_exact(tmp_path, paths, frame)
    batches = [cp.batch_id for cp in history]
    assert batches == sorted(batches) and len(set(batches)) == len(batches), batches


def test_a_snapshot_task_killed_with_its_driver_leaves_a_checkpoint_the_next_open_sweeps(
        spark_session, flights_days, tmp_path, monkeypatch):
    paths, frame = _paths(tmp_path, *flights_days)
    monkeypatch.setenv("BLOBSTATE_PLUGINS", "snapshot_task_killer")
    code, out, err = run_child(tmp_path, paths, partitions=N, partition_snapshot_every=2)
    assert code == -signal.SIGKILL, (code, out, err)
    pattern = os.path.join(paths["local"], KEY.job, KEY.task, KEY.store, "p*", "snapshot-*")
    left = [p for p in glob.glob(pattern) if os.path.isdir(p)]
    assert left, "the killed snapshot task left no local checkpoint"
    monkeypatch.delenv("BLOBSTATE_PLUGINS")
    _restart(spark_session, paths)
    assert not [p for p in glob.glob(pattern) if os.path.isdir(p) and p in left], "a leftover was not swept"
    _ends_exact(tmp_path, paths, frame)


def test_a_late_group_whose_parts_nobody_holds_is_voided_and_the_restart_reruns_its_batch(
        spark_session, flights_days, tmp_path):
    paths, frame = _paths(tmp_path, *flights_days)
    clock = tmp_path / "clock"
    child = start_child(tmp_path, paths, {"BLOBSTATE_PLUGINS": "pause_plugin",
                                          "BLOBSTATE_TEST_PAUSE_AT": "CheckpointAppending:3",
                                          "BLOBSTATE_TEST_CLOCK_FILE": str(clock)},
                        partitions=N, ttl="20s", partitionSnapshotEvery=0)
    try:
        wait_stopped(child, timeout=240)  # batch 2's tasks staged their changelogs; the driver is before its append
        deleted: list[str] = []
        deadline = time.monotonic() + 120
        while len(deleted) < N and time.monotonic() < deadline:  # until the parts expired and gc took them
            deleted += [b for r in blobstate.gc(repo=paths["repo"], work_base=str(tmp_path / "gc-host"))
                        for b in r.expired_deleted]
            time.sleep(0.5)  # they expire by the clock
        assert len(deleted) == N, deleted
        kept = glob.glob(os.path.join(paths["local"], KEY.job, KEY.task, KEY.store, "p*", "pending", "*"))
        for path in kept:  # the executors' copies are lost too (their hosts are gone)
            os.remove(path)
        send_cont(child, clock_file=clock)
    finally:
        code, out, err = stop_child(child)
    assert code != 0 and "GroupVoidedError" in err, (code, out, err)  # the batch failed: the query stopped
    reports = blobstate.verify(repo=paths["repo"], job=KEY.job, task=KEY.task, store=KEY.store, all_checkpoints=True)
    assert all(r.ok for r in reports)  # the voided group is no damage: nothing restores it
    _restart(spark_session, paths)
    history = _ends_exact(tmp_path, paths, frame)
    assert sorted({cp.batch_id for cp in history}) == list(range(5))
