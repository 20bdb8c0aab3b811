"""Issue 27 case 2 for the parts only executors hold: a group commit that lands after gc deleted its staged parts,
when the owner (a Spark driver) holds none of their bytes. Real processes: the executors run the real
``spark/partitioned/executor/batch_task.run_partition`` (``tests/support/partition_children.py``), the owner the real
``GroupCommitter``, paused by SIGSTOP right before its append (``pause_plugin``) until gc, in another process,
deleted the expired parts. The owner's heal check cannot put them back; the next batch's tasks, which kept the
changelogs they staged, must (``blobstate.commit.parts.heal_parts``), so that every partition restores again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from fault_harness import pause_env, resume, wait_stopped
from fixtures_core import SUPPORT_DIR, cli_env

import blobstate
from blobstate.errors import IntegrityError
from blobstate.model.records import StoreKey

KEY = StoreKey("flights", "group", "routes")
CHILD = os.path.join(SUPPORT_DIR, "partition_children.py")
TTL_MS = 6_000  # short, so that real time takes the parts past their TTL (the owner's budget: 3 s)
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


def test_a_late_group_whose_parts_only_executors_held_is_healed_by_the_next_batch(target, cli, tmp_path,
                                                                                 work_base):
    env = target.env
    assert _batch(_config(target, tmp_path, 0), work_base, env) == 1
    clock = tmp_path / "clock"
    owner = subprocess.Popen([sys.executable, CHILD, json.dumps(_config(target, tmp_path, 1))],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**cli_env(work_base, **pause_env("CheckpointAppending", clock)), **env})
    wait_stopped(owner)  # its tasks staged batch 1's parts (TTL 6 s); past its TTL check, before its append
    deleted: list[str] = []
    deadline = time.monotonic() + 120
    while len(deleted) < PARTITIONS and time.monotonic() < deadline:  # until the parts expired and gc took them
        deleted += [b for r in blobstate.gc(repo=target.url, storage_options=target.options,
                                            work_base=str(tmp_path / "gc-host")) for b in r.expired_deleted]
        time.sleep(0.2)  # they expire by the clock
    assert len(deleted) == PARTITIONS, deleted
    done = resume(owner, clock_file=clock, advance_ms=0)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["generation"] == 2
    assert "lost" in done.stderr, done.stderr  # the owner saw it, and holds nothing to put back
    with pytest.raises(IntegrityError, match="blob not found"):  # batch 1's changelogs are gone for now
        blobstate.verify(repo=target.url, store=KEY.store, job=KEY.job, task=KEY.task,
                         storage_options=target.options)
    assert _batch(_config(target, tmp_path, 2), work_base, env) == 3  # the next batch's tasks heal first
    reports = blobstate.verify(repo=target.url, store=KEY.store, job=KEY.job, task=KEY.task, all_checkpoints=True,
                               storage_options=target.options)
    assert len(reports) == 3 and all(r.ok for r in reports)
    out = tmp_path / "restored" / "routes"  # and a partition restores, from another host
    restored = cli("restore", out, *target.args(KEY), "--partition", "1", "-q", env=env, work=tmp_path / "r1")
    assert restored.returncode == 0, restored.stderr
