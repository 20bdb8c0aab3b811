"""A committed delta's lease mark waits for a later removal (``blobstate.commit.deferred``: one request less per
delta in lease mode, issue 31), and nothing is lost when the writer dies with marks waiting: on a real ``file://``
repository (lease mode), the writer a real process SIGKILLed right after its commit point."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from fault_harness import DAY_MS, pause_env, send_cont, start_cli, wait_stopped
from fixtures_core import cli_env

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.maintenance.gc import FAR_FUTURE_MS, collect
from blobstate.model import changelog
from blobstate.model.layout import now_ms
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("stream", "0", "deltas")
TTL_MS = 60_000


def _large(batch: int) -> bytes:
    """A changelog above the inline bound (about 40 KiB): it gets a blob of its own, with a lease."""
    return changelog.encode([(changelog.PUT, f"b{batch}-{i}", "v" * 40) for i in range(800)])


def _marked(repo: Repository) -> set[str]:
    """The blobs of ``KEY`` that carry a lease (expired or not)."""
    return set(repo.store.expired(KEY.prefix, FAR_FUTURE_MS))


def test_a_deltas_mark_waits_for_the_next_removal_and_the_close_removes_the_rest(tmp_path):
    url = f"file://{tmp_path}/repo"
    repo = Repository.open(url, create=True)
    src = tmp_path / "state"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS, store_type="dir") as committer:
        deltas = DeltaCommitter(committer)
        first = deltas.commit_changelog(_large(1), batch_id=1, query_id="q").checkpoint
        second = deltas.commit_changelog(_large(2), batch_id=2, query_id="q").checkpoint
        assert _marked(repo) == {first.changelog_blob_id, second.changelog_blob_id}  # committed, marks waiting
        committer.upload(committer.checkpoint(str(src), batch_id=2, query_id="q"))  # a snapshot takes them along
        assert _marked(repo) == set()
        third = deltas.commit_changelog(_large(3), batch_id=3, query_id="q").checkpoint
        assert _marked(repo) == {third.changelog_blob_id}
    assert _marked(repo) == set()  # the close removed the last one
    assert repo.read_changelog(third) == _large(3)
    repo.close()


_CHILD = """
import os, signal, sys, json
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.model import changelog
url, wd, ttl = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = changelog.encode([(changelog.PUT, f"b1-{i}", "v" * 40) for i in range(800)])
committer = StoreCommitter(StoreKey("stream", "0", "deltas"), Repository.open(url, create=True), work_dir=wd,
                           ttl_ms=ttl)
cp = DeltaCommitter(committer).commit_changelog(data, batch_id=1, query_id="q").checkpoint
print(json.dumps({"blob": cp.changelog_blob_id}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # committed, its mark waiting, never closed
"""


@pytest.mark.parametrize("after", ["gc-past-the-expiry", "next-writer"])
def test_a_writer_killed_with_a_mark_waiting_loses_nothing(after, tmp_path):
    url = f"file://{tmp_path}/repo"
    wd = str(tmp_path / "wd")
    proc = subprocess.run([sys.executable, "-c", _CHILD, url, wd, str(TTL_MS)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    blob = json.loads(proc.stdout)["blob"]
    repo = Repository.open(url)
    assert _marked(repo) == {blob}  # the kill left the committed delta's mark behind
    if after == "gc-past-the-expiry":  # the mark expired: gc keeps the referenced blob and removes the mark
        report = collect(repo, KEY, now_ms=now_ms() + 2 * TTL_MS, ttl_ms=TTL_MS, work_base=str(tmp_path / "gc"))
        assert blob in report.expired_healed and blob not in report.expired_deleted + report.orphans_deleted
    else:  # the next writer of the store takes over: the marks of the deltas after the latest snapshot go
        with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "wd2"), ttl_ms=TTL_MS) as committer:
            DeltaCommitter(committer).commit_changelog(b"", batch_id=2, query_id="q")
    assert _marked(repo) == set()
    (delta,) = [cp for cp in repo.log.history(KEY) if cp.batch_id == 1]
    assert repo.read_changelog(delta) == changelog.encode([(changelog.PUT, f"b1-{i}", "v" * 40) for i in range(800)])
    assert os.path.exists(os.path.join(str(tmp_path / "repo"), blob))
    repo.close()


def test_a_group_of_changelog_parts_leaves_its_parts_marks_for_the_close(tmp_path):
    """The driver's commit of a group of changelog parts (staged here as executors stage them, each with its
    lease): the parts' marks wait like a delta's, and the committer's close removes them."""
    from blobstate.commit.group import GroupCommitter
    from blobstate.commit.healing import HealSources
    from blobstate.worker import stage_changelog

    url = f"file://{tmp_path}/repo"
    repo = Repository.open(url, create=True)
    key = StoreKey("stream", "group", "routes")
    with StoreCommitter(key, repo, work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS, store_type="dir") as committer:
        groups = GroupCommitter(committer, num_partitions=2)
        for batch in (0, 1):
            parts, kept = [], {}
            for p in range(2):
                data = changelog.encode([(changelog.PUT, f"p{p}-b{batch}", "v")])
                entry = stage_changelog(repo, key, partition=p, batch_id=batch, data=data, ttl_ms=TTL_MS)
                parts.append(entry)
                kept[entry.blob_id] = data
            groups.commit(parts, batch_id=batch, query_id="q", sources=HealSources(kept))
        committed = {part.blob_id for cp in repo.log.history(key) for part in cp.partitions}
        assert len(committed) == 4 and set(repo.store.expired(key.prefix, FAR_FUTURE_MS)) == committed
    assert repo.store.expired(key.prefix, FAR_FUTURE_MS) == []
    repo.close()

_LATE_CHILD = """
import json, sys
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
url, wd = sys.argv[1], sys.argv[2]
data = changelog.encode([(changelog.PUT, f"late-{i}", "v" * 40) for i in range(800)])
with StoreCommitter(StoreKey("stream", "0", "deltas"), Repository.open(url), work_dir=wd) as committer:
    cp = DeltaCommitter(committer).commit_changelog(data, batch_id=2, query_id="q").checkpoint  # paused, lands late
    print(json.dumps({"blob": cp.changelog_blob_id}), flush=True)
    sys.stdin.readline()  # the writer lives on (a driver between batches) until the test lets it close
"""


def test_a_late_delta_removes_its_mark_before_its_heal_check_for_a_gc_whose_log_read_lags(tmp_path):
    """Rule 13a's TTL half for a delta: a delta paused before its append past its TTL lands late; a gc that decided
    meanwhile (its leases expired, the delta not in the log it read) re-checks through a log replica that lags, so
    only the removed mark spares the changelog. A late commit's marks never wait (``DeferredMarks``): they go before
    its heal check, while its writer is still open. Real processes: the writer SIGSTOPped by
    ``tests/support/pause_plugin.py``, gc by ``soak_plugin.py``, the replica ``lagging_log.py``."""
    late_ms = DAY_MS + 3_600_000  # past the default one-day TTL of the delta's upload
    url, wd = f"file://{tmp_path}/repo", str(tmp_path / "wd")
    src = tmp_path / "state"
    src.mkdir()
    (src / "a").write_bytes(b"a")
    with Repository.open(url, create=True) as repo, StoreCommitter(KEY, repo, work_dir=wd, store_type="dir") as c:
        c.upload(c.checkpoint(str(src), batch_id=1, query_id="q"))
    replica = tmp_path / "replica"
    shutil.copytree(tmp_path / "repo" / "checkpoints", replica / "checkpoints")  # the replica stops following here
    clock = tmp_path / "clock"
    writer = subprocess.Popen([sys.executable, "-c", _LATE_CHILD, url, wd], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**cli_env(tmp_path / "writer-host"), **pause_env("CheckpointAppending", clock)})
    try:
        wait_stopped(writer)  # the changelog uploaded with its lease, the append about to be sent
        gc = start_cli("gc", "--repo", url, "--now", str(now_ms() + late_ms), "--json", work_base=tmp_path / "gc-host",
                       env={"BLOBSTATE_PLUGINS": "soak_plugin,lagging_log", "BLOBSTATE_TEST_LAGGING_LOG": str(replica),
                            "BLOBSTATE_TEST_STOP_AFTER_LOG_READ": "1"})
        wait_stopped(gc)  # decided: the changelog's lease expired, no record in the (lagging) log references it
        send_cont(writer, clock_file=clock, advance_ms=late_ms)
        blob = json.loads(writer.stdout.readline())["blob"]  # landed late, healed, committed; the writer still open
        send_cont(gc)
        out, err = gc.communicate(timeout=120)
        assert gc.returncode == 0, err
        report = json.loads(out)[0]
        assert blob in report["spared"] and blob not in report["expiredDeleted"], report  # decided, then spared
        with Repository.open(url) as repo:
            (delta,) = [cp for cp in repo.log.history(KEY) if cp.batch_id == 2]
            assert repo.read_changelog(delta) == changelog.encode(
                [(changelog.PUT, f"late-{i}", "v" * 40) for i in range(800)])
    finally:
        if writer.poll() is None:
            writer.communicate("\n", timeout=120)
    assert writer.returncode == 0, writer.stderr.read() if writer.stderr else ""
