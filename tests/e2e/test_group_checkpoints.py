"""Group checkpoints in the core, on real repositories (file://, moto S3): per-partition chains and retention,
one group record per batch as the single commit point, a second owner fenced with its parts deleted, gc that never
deletes a committed partition's blob (even one whose TTL was never removed) and deletes an uncommitted attempt's
once its TTL passed, verify and a partition restore replaying the group's changelogs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fixtures_core import SUPPORT_DIR, cli_env  # noqa: E402
from rocksdict import AccessType, Rdict

import blobstate
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter, check_partition_count
from blobstate.errors import FencedError, NothingToRestore, PartitionCountError
from blobstate.model import changelog
from blobstate.model.chain import partition_history, plan_chain, retention
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import Checkpoint, PartitionEntry, StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.restoring import chain as replay
from blobstate.testing.checkpoint_logs import make_group
from blobstate.worker import stage_changelog, stage_snapshot

KEY = StoreKey("flights", "group", "routes")
N = 4
TTL = 60_000


@pytest.fixture
def target(repo_target):
    return repo_target


def _group(generation, batch, kinds):
    """A group record at ``generation`` for ``batch``: ``kinds`` (space-separated, one per partition) holds "d" (a
    delta of ``batch``), "sN" (a snapshot of batch N) or "-" (nothing of the partition)."""
    entries = []
    kinds = kinds.split()
    for p, k in enumerate(kinds):
        if k == "-":
            continue
        cid = f"{generation:04d}{p:04d}" + "0" * 24
        if k == "d":
            entries.append(PartitionEntry(p, "delta", cid, batch, f"{KEY.prefix}/blobs/{cid}", 1, 10))
        else:
            entries.append(PartitionEntry(p, "snapshot", cid, int(k[1:]), f"{KEY.prefix}/indexes/{cid}.json", 1, 10))
    return Checkpoint(KEY, f"g{generation}", generation, "", 0, 0, 0, batch, kind="group", query_id="q",
                      num_partitions=len(kinds), partitions=tuple(entries))


def test_each_partition_chains_on_its_own_and_retention_keeps_what_any_partition_needs():
    history = [_group(1, 0, "d d"), _group(2, 1, "d d"), _group(3, 1, "s1 -"), _group(4, 2, "d d"),
               _group(5, 2, "- s2"), _group(6, 3, "d d")]
    p0, p1 = partition_history(history, 0), partition_history(history, 1)
    assert [(cp.kind, cp.batch_id, cp.generation) for cp in p0] == [
        ("delta", 0, 1), ("delta", 1, 2), ("snapshot", 1, 3), ("delta", 2, 4), ("delta", 3, 6)]
    chain0, chain1 = plan_chain(p0, 3), plan_chain(p1, 3)
    assert (chain0.snapshot.batch_id, [d.batch_id for d in chain0.deltas]) == (1, [2, 3])
    assert (chain1.snapshot.batch_id, [d.batch_id for d in chain1.deltas]) == (2, [3])
    assert [d.batch_id for d in plan_chain(p1, 1).deltas] == [0, 1]  # before its snapshot: deltas from batch 0
    expiring, kept = retention(history, 1)
    assert [cp.generation for cp in expiring] == [1, 2]  # partition 0 still needs generation 3 (its snapshot)
    assert [cp.generation for cp in kept] == [3, 4, 5, 6]
    assert retention(history, 2) == ([], history)  # partition 0 and 1 have one snapshot each: keep everything
    check_partition_count(history, 2, "the group")
    with pytest.raises(PartitionCountError, match="num_partitions=2"):
        check_partition_count(history, 4, "the group")


def test_a_group_record_refuses_a_foreign_blob_and_a_partition_out_of_range():
    good = make_group(KEY, batch_id=0)
    assert Checkpoint.from_bytes(good.with_generation(1).to_bytes()).partitions == good.partitions
    bad_entries = [
        PartitionEntry(0, "delta", "c" * 32, 0, "other/0/store/blobs/" + "a" * 32, 1, 1),
        PartitionEntry(9, "delta", "c" * 32, 0, f"{KEY.prefix}/blobs/" + "a" * 32, 1, 1),
    ]
    for entry in bad_entries:
        bad = Checkpoint(KEY, "g1", 1, "", 0, 0, 0, 0, kind="group", num_partitions=4, partitions=(entry,))
        with pytest.raises(blobstate.errors.CorruptIndexError):
            Checkpoint.from_bytes(bad.to_bytes())


def _parts(repo, batch, values, *, base=0, ttl_ms=TTL):
    """Every partition's changelog for ``batch`` staged with a TTL (what the executors' tasks do)."""
    return [stage_changelog(repo, KEY, partition=p, batch_id=batch, ttl_ms=ttl_ms, base=base, attempt=0,
                            data=changelog.encode([(changelog.PUT, f"k{p}", values[p]), (changelog.PUT, "b", batch)]))
            for p in range(N)]


def test_group_commits_fencing_gc_verify_and_partition_restore(target, tmp_path, cli):
    repo = Repository.open(target.url, storage_options=target.options, create=True)
    a = StoreCommitter(KEY, repo, work_dir=str(tmp_path / "wa"), ttl_ms=TTL)
    b = StoreCommitter(KEY, Repository.open(target.url, storage_options=target.options), work_dir=str(tmp_path / "wb"),
                       ttl_ms=TTL)
    ga, gb = GroupCommitter(a, num_partitions=N), GroupCommitter(b, num_partitions=N)
    assert a.commit_point.generation() == b.commit_point.generation() == 0  # both drivers start at generation 0
    first = _parts(repo, 0, [1, 2, 3, 4])
    retried = stage_changelog(repo, KEY, partition=1, batch_id=0, data=b"BSCHLOG1\0\0\0\0", ttl_ms=TTL, attempt=1)
    g1 = ga.commit(first, batch_id=0, query_id="q")
    assert (g1.generation, g1.kind, len(g1.partitions)) == (1, "group", N)
    rival = _parts(repo, 0, [9, 9, 9, 9])
    with pytest.raises(FencedError):
        gb.commit(rival, batch_id=0, query_id="q")
    listed = {i.blob_id for i in repo.store.list(f"{KEY.prefix}/blobs")}
    assert not {e.blob_id for e in rival} & listed  # the fenced driver's parts are deleted at once
    ga.commit(_parts(repo, 1, [10, 20, 30, 40], base=1), batch_id=1, query_id="q")
    # a driver killed after its append, before the TTLs were removed: the group stands with TTL'd parts
    late = _parts(repo, 2, [100, 200, 300, 400], base=2)
    repo.log.append(Checkpoint(KEY, "late-group", 0, "", 0, 0, int(time.time() * 1000), 2, kind="group",
                               query_id="q", num_partitions=N, partitions=tuple(late)), 2)

    future = int(time.time() * 1000) + 10 * DEFAULT_TTL_MS
    reports = blobstate.gc(repo=target.url, storage_options=target.options, now_ms=future, ttl=TTL,
                           work_base=str(tmp_path / "gc-work"))
    report = next(r for r in reports if r.key == KEY)
    assert retried.blob_id in report.expired_deleted and report.skipped is None
    assert {e.blob_id for e in late} <= set(report.expired_healed)  # committed: its TTL removed, never deleted
    committed = {e.blob_id for cp in repo.log.history(KEY) for e in cp.partitions}
    assert committed <= {i.blob_id for i in repo.store.list(f"{KEY.prefix}/blobs")}
    assert not set(report.orphans_deleted) & committed

    assert all(r.ok for r in blobstate.verify(repo=target.url, storage_options=target.options, job=KEY.job,
                                             task=KEY.task, store=KEY.store,
                                             all_checkpoints=True))
    chain = replay.plan(repo, KEY, partition=2)
    assert [d.batch_id for d in chain.deltas] == [0, 1, 2]
    dest = str(tmp_path / "p2")
    replay.restore_chain(repo, chain, dest, local_store=open_local_store("rocksdb"), store_type="rocksdb")
    db = Rdict(dest, access_type=AccessType.read_only())
    try:
        assert dict(db.items()) == {"k2": 300, "b": 2}
    finally:
        db.close()
    with pytest.raises(NothingToRestore, match="partitioned store"):
        repo.choose(KEY)
    out = str(tmp_path / "cli-p1")  # the CLI: one partition of the group; the group without one is refused
    assert cli("restore", out, *target.args(KEY), "--partition", "1", "--json", env=target.env,
               work=tmp_path / "h1").returncode == 0
    db = Rdict(out, access_type=AccessType.read_only())
    try:
        assert dict(db.items()) == {"k1": 200, "b": 2}
    finally:
        db.close()
    refused = cli("restore", str(tmp_path / "cli-all"), *target.args(KEY), env=target.env, work=tmp_path / "h2")
    assert refused.returncode == 5 and "partition" in refused.stderr
    listed = cli("list", *target.args(KEY), "--json", env=target.env, work=tmp_path / "h3")
    assert listed.returncode == 0 and listed.stdout.count('"group"') == 3, listed.stdout
    for c in (a, b):
        c.close()
    b.repo.close()
    repo.close()


def _rocksdb_checkpoint(tmp_path, name: str) -> str:
    """A small RocksDB's local checkpoint (what a partition writer stages)."""
    db = Rdict(str(tmp_path / f"{name}-db"))
    try:
        db["route/JFK-LAX"] = name
        db.flush(True)
        open_local_store("rocksdb").create_checkpoint(db, str(tmp_path / f"{name}-ck"))
    finally:
        db.close()
    return str(tmp_path / f"{name}-ck")


def test_a_first_group_of_snapshots_killed_before_its_append_is_aborted_beside_staged_leftovers(target, tmp_path,
                                                                                                 cli, work_base):
    """A store's first group record names its partitions' snapshot indexes (a rescale's). Its driver is SIGKILLed
    after ``UploadsPlanned``, beside what an earlier attempt left staged (an index under its TTL, never committed).
    ``blobstate recover`` aborts the group (its parts deleted) instead of refusing the store as if ``--log`` were
    wrong (the log holds nothing, but no index there was ever completed); the next group commits at generation 1,
    and gc, once the leftover's TTL passed, deletes it. (While the log holds nothing, gc deletes nothing in the
    store: it cannot tell references apart from a wrong ``--log``.)"""
    repo = Repository.open(target.url, storage_options=target.options, create=True)
    leftover = stage_snapshot(repo, KEY, partition=0, batch_id=0, previous=None, ttl_ms=TTL,
                              checkpoint_dir=_rocksdb_checkpoint(tmp_path, "leftover"))
    config = {"url": target.url, "options": target.options, "job": KEY.job, "task": KEY.task, "store": KEY.store,
              "partitions": N, "checkpoint_dir": _rocksdb_checkpoint(tmp_path, "group"), "ttl_ms": TTL}
    child = subprocess.run([sys.executable, os.path.join(SUPPORT_DIR, "group_commit_child.py"), json.dumps(config)],
                           env=cli_env(work_base, BLOBSTATE_PLUGINS="kill_plugin",
                                       BLOBSTATE_TEST_KILL_AT="UploadsPlanned", **target.env),
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
    indexes = {i.blob_id for i in repo.store.list(f"{KEY.prefix}/indexes")}
    assert len(indexes) == N + 1 and repo.log.history(KEY) == []

    recovered = cli("recover", *target.args(KEY), "--json", env=target.env)
    assert recovered.returncode == 0, recovered.stderr
    (row,) = json.loads(recovered.stdout)
    assert row["action"] == "abort" and row["outcome"].startswith("aborted"), row
    assert {i.blob_id for i in repo.store.list(f"{KEY.prefix}/indexes")} == {leftover.entry.blob_id}
    assert repo.store.has_ttl(leftover.entry.blob_id)

    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "next"), ttl_ms=TTL) as committer:
        assert GroupCommitter(committer, num_partitions=N).commit(_parts(repo, 0, [1, 2, 3, 4]),
                                                                  batch_id=0).generation == 1
    future = int(time.time() * 1000) + 10 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=target.url, storage_options=target.options, now_ms=future, ttl=TTL,
                                          work_base=str(tmp_path / "gc-work")) if r.key == KEY)
    assert set(report.expired_deleted) == {leftover.entry.blob_id, *leftover.new_blob_ids}, report
    assert not report.orphans_deleted and report.skipped is None
    repo.close()
