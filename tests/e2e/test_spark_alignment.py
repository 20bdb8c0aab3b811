"""Alignment with Spark's checkpoint location: the plan from the repository's records (real snapshots and deltas of
a real RocksDB store committed to a file:// repository), and the checkpoint location read through Spark's own
Hadoop FileSystem (classic: the JVM; Connect's path: Spark's file sources), laid out as Spark writes it."""

from __future__ import annotations

import os

import pytest
from rocksdict import Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.spark.committed.alignment import plan_alignment
from blobstate.spark.errors import SparkAlignmentError

KEY = StoreKey("job", "0", "state")
QUERY = "5f2c1d6e-0000-4000-8000-000000000001"


def _spark_dir(root, commits, offsets, query_id=QUERY):
    """A checkpoint location as Spark leaves it: ``offsets/N``, ``commits/N``, their ``.N.crc`` side files, a temp
    file of an interrupted write, and ``metadata``."""
    for sub, batches in (("commits", commits), ("offsets", offsets)):
        os.makedirs(root / sub, exist_ok=True)
        for b in batches:
            (root / sub / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
            (root / sub / f".{b}.crc").write_bytes(b"crc")
        (root / sub / ".7.0a1b2c3d.tmp").write_text("v1\n")
    if query_id:
        (root / "metadata").write_text(f'{{"id":"{query_id}"}}')
    return str(root)


@pytest.fixture
def history(tmp_path):
    """Deltas of batches 0-5 of query QUERY, snapshots of batches 1 and 3 (retain 5)."""
    url = f"file://{tmp_path}/repo"
    db = Rdict(str(tmp_path / "db"))
    with StoreCommitter(KEY, url, work_dir=str(tmp_path / "work"), retain=5) as committer:
        deltas = DeltaCommitter(committer)
        for batch in range(6):
            view = changelog.StagedWrites(db)
            view[f"k{batch}"] = batch
            deltas.commit_changelog(changelog.encode(view.ops()), batch_id=batch, query_id=QUERY)
            changelog.apply_ops(db, view.ops())
            if batch in (1, 3):
                committer.upload(committer.checkpoint(db, batch_id=batch, query_id=QUERY))
    db.close()
    repo = Repository.open(url)
    yield repo.log.history(KEY)
    repo.close()


def _plan(history, last, query_id=QUERY):
    return plan_alignment(history, KEY, last_committed=last, query_id=query_id, location="/ck", repo_url="file:///r")


def test_the_newest_snapshot_at_or_below_the_last_commit_then_its_deltas(history):
    plan = _plan(history, 5)
    assert (plan.snapshot_batch, plan.deltas, plan.restored_batch) == (3, 2, 5)
    assert [d.batch_id for d in plan.chain.deltas] == [4, 5]
    plan = _plan(history, 2)  # a delta of a batch Spark never committed (3 and later) is not restored
    assert (plan.snapshot_batch, [d.batch_id for d in plan.chain.deltas]) == (1, [2])
    plan = _plan(history, 0)
    assert plan.chain.snapshot is None and [d.batch_id for d in plan.chain.deltas] == [0]
    assert _plan(history, None).chain is None  # the query never committed a batch: an empty store


def test_another_querys_records_are_refused(history):
    with pytest.raises(SparkAlignmentError, match="another query.*own store key") as info:
        _plan(history, 5, query_id="another-query")
    assert info.value.exit_code == 5
    with pytest.raises(SparkAlignmentError, match="has not started yet"):
        _plan(history, None, query_id=None)  # a fresh checkpoint location over a used store key


def test_no_state_for_committed_batches_is_refused():
    with pytest.raises(SparkAlignmentError, match="holds no state of it.*new checkpoint location"):
        _plan([], 4)


def test_a_missing_delta_is_refused(history):
    gap = [cp for cp in history if not (cp.is_delta and cp.batch_id == 4)]
    with pytest.raises(SparkAlignmentError, match="batch 4"):
        _plan(gap, 5)


@pytest.mark.parametrize("reader", ["jvm", "file-source"])
def test_the_location_is_read_through_sparks_file_system(reader, spark_session, tmp_path, monkeypatch):
    from blobstate.spark.committed.location import CheckpointLocation

    loc = _spark_dir(tmp_path / "ck[1]", commits=[0, 1, 10], offsets=[0, 1, 10, 11])
    location = CheckpointLocation(spark_session, loc)
    if reader == "file-source":  # the path Spark Connect clients take, on the same session
        monkeypatch.setattr(location, "connect", True)
    assert location.committed() == [0, 1, 10]
    assert location.batches("offsets") == [0, 1, 10, 11]
    assert location.query_id() == QUERY
    (tmp_path / "ck[1]" / "commits" / "11").write_text("v1\n{}\n")  # listed fresh: never a stale listing
    assert location.last_committed() == 11
    missing = CheckpointLocation(spark_session, str(tmp_path / "nowhere"))
    if reader == "file-source":
        monkeypatch.setattr(missing, "connect", True)
    assert missing.committed() == [] and missing.query_id() is None
    if reader == "jvm":
        assert location.qualified == f"file:{tmp_path}/ck[1]"


def test_the_demo_check_allows_only_sparks_own_purge_of_old_batches():
    from blobstate.spark.demo.run import _kept_by_spark

    def listing(names, changed=None):
        return {sub: [[name, 10, 1000 + n + (1 if n == changed else 0)] for n in names
                      for name in (str(n), f".{n}.crc")] for sub in ("offsets", "commits")}

    after_kill = listing(range(0, 182))
    assert _kept_by_spark(after_kill, listing(range(265, 365)))  # minBatchesToRetain=100: Spark purged 0..264
    assert _kept_by_spark(after_kill, listing(range(82, 365)))
    assert not _kept_by_spark(after_kill, listing(range(82, 365), changed=150))  # a retained entry rewritten
    assert not _kept_by_spark(after_kill, listing([n for n in range(82, 365) if n != 181]))  # one vanished
    assert not _kept_by_spark({"offsets": [["tmp-x", 1, 1]], "commits": []}, listing(range(82, 365)))


def _run_records(tmp_path, url, batches, *, lineage="", snapshot_at=(), work="work", retain=10):
    """Deltas of ``batches`` of query QUERY (value ``run-batch`` under ``k<batch>``), a snapshot after each batch of
    ``snapshot_at``; the records carry ``lineage`` (none: as written before runs were recorded)."""
    from blobstate.spark.committed.alignment import stamp_records

    db = Rdict(str(tmp_path / f"db-{work}"))
    with StoreCommitter(KEY, url, work_dir=str(tmp_path / work), retain=retain) as committer:
        if lineage:
            stamp_records(committer, lineage_id=lineage)
        deltas = DeltaCommitter(committer)
        for batch in batches:
            view = changelog.StagedWrites(db)
            view[f"k{batch}"] = f"{work}-{batch}"
            deltas.commit_changelog(changelog.encode(view.ops()), batch_id=batch, query_id=QUERY)
            changelog.apply_ops(db, view.ops())
            if batch in snapshot_at:
                committer.upload(committer.checkpoint(db, batch_id=batch, query_id=QUERY))
    db.close()


def test_verify_checks_the_chain_of_the_latest_state_not_only_its_blobs(tmp_path):
    from blobstate import api

    url = f"file://{tmp_path}/repo"
    _run_records(tmp_path, url, range(4), snapshot_at=(1,), work="old")  # records written before runs existed
    assert all(r.ok for r in api.verify(repo=url, **vars(KEY)))
    _run_records(tmp_path, url, [0], snapshot_at=(0,), work="new")  # a reset: the new run's batch 0
    # the latest state stitches the old run's deltas 1-3 onto the new run's snapshot of batch 0: verify says so
    reports = api.verify(repo=url, **vars(KEY), raise_on_error=False)
    assert [m for r in reports for _, m in r.problems if "two runs" in m and "batch 1" in m]


def test_records_of_an_abandoned_run_never_chain_onto_the_new_run(tmp_path):
    from blobstate import api
    from blobstate.model.chain import plan_chain, retention

    url = f"file://{tmp_path}/repo"
    _run_records(tmp_path, url, range(4), lineage="a" * 32, snapshot_at=(1, 3), work="old")
    _run_records(tmp_path, url, range(3), lineage="b" * 32, work="new")  # deltas only, so far
    repo = Repository.open(url)
    history = repo.log.history(KEY)
    chain = plan_chain(history)  # the new run's state after its batch 2, never the old run's snapshot of batch 3
    assert chain.upto == 2 and chain.snapshot is None and {cp.lineage_id for cp in chain.records} == {"b" * 32}
    expiring, kept = retention(history, 2)  # the old run expires with the prefix: retention never stalls on it
    assert {cp.lineage_id for cp in expiring} == {"a" * 32} and {cp.lineage_id for cp in kept} == {"b" * 32}
    plan = _plan(history, None)  # Spark has no offsets: a new run, the abandoned records named
    assert plan.chain is None and plan.abandoned == len(history) and plan.lineage_id not in ("a" * 32, "b" * 32)
    plan = _plan(history, 1)  # a restart of the new run continues its lineage
    assert plan.lineage_id == "b" * 32 and [d.batch_id for d in plan.chain.deltas] == [0, 1]
    repo.close()
    _run_records(tmp_path, url, [3], lineage="b" * 32, snapshot_at=(3,), work="new")  # its first snapshot
    repo = Repository.open(url)
    assert {cp.lineage_id for cp in repo.log.history(KEY)} == {"b" * 32}  # retention expired the old run
    repo.close()
    assert all(r.ok for r in api.verify(repo=url, **vars(KEY)))


def test_offsets_ahead_of_commits_restore_the_state_spark_takes_as_done(history):
    plan = plan_alignment(history, KEY, last_committed=None, last_planned=4, query_id=QUERY, location="/ck",
                          repo_url="file:///r")  # commits/ lost: Spark re-runs batch 4, taking 3 as done
    assert plan.restored_batch == 3 and plan.snapshot_batch == 3
    plan = plan_alignment(history, KEY, last_committed=2, last_planned=3, query_id=QUERY, location="/ck",
                          repo_url="file:///r")  # a crash inside batch 3: the usual case, unchanged
    assert plan.restored_batch == 2
