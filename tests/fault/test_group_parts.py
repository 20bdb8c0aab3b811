"""Issue 27 case 2 and issue 39 case 7 for the parts only executors hold: a group commit that lands after gc deleted
its staged parts, when the owner (a Spark driver) holds none of their bytes. Real processes: the executors run the
real ``spark/partitioned/executor/batch_task.run_partition`` (``tests/support/partition_children.py``), the owner the
real ``GroupCommitter``, paused by SIGSTOP right before its append (``pause_plugin``) until gc, in another process,
deleted the expired parts. The owner's heal check cannot put them back, nor know whether the executors that kept
them still can: it voids the group and fails the batch, which then runs again.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from fault_harness import pause_env, resume, wait_stopped
from fixtures_core import SUPPORT_DIR, cli_env, read_all

import blobstate
from blobstate.model.records import StoreKey

KEY = StoreKey("flights", "group", "routes")
CHILD = os.path.join(SUPPORT_DIR, "partition_children.py")
TTL_MS = 10_000  # short, so that real time takes the parts past their TTL (the owner's budget: 5 s)
PARTITIONS = 2


@pytest.fixture
def target(repo_target):
    return repo_target  # file:// and moto S3


def _config(target, tmp_path, batch: int) -> dict:
    return {"url": target.url, "options": target.options, "job": KEY.job, "task": KEY.task, "store": KEY.store,
            "ttl_ms": TTL_MS, "partitions": PARTITIONS, "batch": batch, "local_dir": str(tmp_path / "executors"),
            "work_dir": str(tmp_path / "driver")}


def _batch(config: dict, work_base, env: dict) -> int:
    """One micro-batch (every partition's task, then the group commit), in a child; returns its generation."""
    done = subprocess.run([sys.executable, CHILD, json.dumps(config)], env={**cli_env(work_base), **env},
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])["generation"]


@pytest.mark.parametrize("executors", ["kept", "lost"])
def test_a_late_group_whose_parts_gc_took_is_voided_and_its_batch_runs_again(executors, target, cli, tmp_path,
                                                                             work_base):
    """Issue 39 case 7 (and issue 27 case 2, ``kept``): the owner paused past the TTL right before its append, gc
    took the staged changelogs, and (``lost``) the executors that kept them lost their copies too. The owner's
    heal check cannot put them back and cannot know whether an executor could, so it never leaves the batch
    committed and unrestorable: it voids the group (``blobstate.commit.parts.void_group``) and fails the batch
    (exit 3, ``GroupVoidedError``). Every retained record verifies, a partition restores the state before the
    batch, and the batch run again commits and restores."""
    env = target.env
    assert _batch(_config(target, tmp_path, 0), work_base, env) == 1
    clock = tmp_path / "clock"
    owner = subprocess.Popen([sys.executable, CHILD, json.dumps(_config(target, tmp_path, 1))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**cli_env(work_base, **pause_env("CheckpointAppending", clock)), **env})
    wait_stopped(owner)  # its tasks staged batch 1's parts (TTL 10 s); past its TTL check, before its append
    deleted: list[str] = []
    deadline = time.monotonic() + 120
    while len(deleted) < PARTITIONS and time.monotonic() < deadline:  # until the parts expired and gc took them
        deleted += [b for r in blobstate.gc(repo=target.url, storage_options=target.options,
                                            work_base=str(tmp_path / "gc-host")) for b in r.expired_deleted]
        time.sleep(0.2)  # they expire by the clock
    assert len(deleted) == PARTITIONS, deleted
    kept = list((tmp_path / "executors").rglob("pending/*"))
    assert len(kept) == PARTITIONS, kept  # each executor kept the changelog it staged
    if executors == "lost":
        for path in kept:
            path.unlink()  # the executors' hosts are gone too: nobody holds batch 1's changelogs
    done = resume(owner, clock_file=clock, advance_ms=0)
    assert done.returncode == 1 and "GroupVoidedError" in done.stderr, done.stderr  # the batch failed
    assert "voiding it" in done.stderr, done.stderr
    reports = blobstate.verify(repo=target.url, store=KEY.store, job=KEY.job, task=KEY.task, all_checkpoints=True,
                               storage_options=target.options)
    assert len(reports) == 3 and all(r.ok for r in reports)  # batch 0, the voided group, the void
    before = tmp_path / "restored-before" / "routes"  # a partition restores the state before batch 1
    restored = cli("restore", before, *target.args(KEY), "--partition", "1", "-q", env=env, work=tmp_path / "r0")
    assert restored.returncode == 0, restored.stderr
    assert read_all(before) == {"p1-b0": "v0"}
    assert _batch(_config(target, tmp_path, 1), work_base, env) == 4  # batch 1 runs again: its group counts
    assert _batch(_config(target, tmp_path, 2), work_base, env) == 5
    reports = blobstate.verify(repo=target.url, store=KEY.store, job=KEY.job, task=KEY.task, all_checkpoints=True,
                               storage_options=target.options)
    assert len(reports) == 5 and all(r.ok for r in reports)
    out = tmp_path / "restored" / "routes"  # and a partition restores, from another host
    restored = cli("restore", out, *target.args(KEY), "--partition", "1", "-q", env=env, work=tmp_path / "r1")
    assert restored.returncode == 0, restored.stderr
    assert read_all(out) == {"p1-b0": "v0", "p1-b1": "v1", "p1-b2": "v2"}


def test_a_late_group_whose_owner_died_before_its_heal_check_is_voided_by_the_next_owner(target, cli, tmp_path,
                                                                                         work_base):
    """The owner resumed past the TTL, appended, and was SIGKILLed right after (``CheckpointWritten``), before its
    heal check, on a host that is gone (its journal with it); the executors' copies are gone too. The next owner,
    from another work directory, reruns the batch Spark never committed; its take-over finds the latest group's
    parts gone and voids it (``blobstate.commit.parts.void_if_lost``) before it appends: it never builds on it."""
    env = target.env
    assert _batch(_config(target, tmp_path, 0), work_base, env) == 1
    clock = tmp_path / "clock"
    extra = {**pause_env("CheckpointAppending", clock), "BLOBSTATE_PLUGINS": "pause_plugin,kill_plugin",
             "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten:1"}
    owner = subprocess.Popen([sys.executable, CHILD, json.dumps(_config(target, tmp_path, 1))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**cli_env(work_base, **extra), **env})
    wait_stopped(owner)
    deleted: list[str] = []
    deadline = time.monotonic() + 120
    while len(deleted) < PARTITIONS and time.monotonic() < deadline:
        deleted += [b for r in blobstate.gc(repo=target.url, storage_options=target.options,
                                            work_base=str(tmp_path / "gc-host")) for b in r.expired_deleted]
        time.sleep(0.2)  # they expire by the clock
    assert len(deleted) == PARTITIONS, deleted
    for path in (tmp_path / "executors").rglob("pending/*"):
        path.unlink()
    done = resume(owner, clock_file=clock, advance_ms=0)
    assert done.returncode == -9, done.stderr  # killed right after its late append: batch 1 is in the log
    shutil.rmtree(tmp_path / "driver")  # its host is gone
    assert _batch(_config(target, tmp_path, 1), work_base, env) == 4  # voided (3), then batch 1 again (4)
    reports = blobstate.verify(repo=target.url, store=KEY.store, job=KEY.job, task=KEY.task, all_checkpoints=True,
                               storage_options=target.options)
    assert len(reports) == 4 and all(r.ok for r in reports)
    out = tmp_path / "restored" / "routes"
    restored = cli("restore", out, *target.args(KEY), "--partition", "0", "-q", env=env, work=tmp_path / "r1")
    assert restored.returncode == 0, restored.stderr
    assert read_all(out) == {"p0-b0": "v0", "p0-b1": "v1"}
