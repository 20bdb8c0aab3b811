"""Alignment with Spark's checkpoint location, without Spark: real snapshots committed by ``StoreCommitter`` of a
real RocksDB store to a file:// repository, and a checkpoint location laid out as Spark writes it."""

from __future__ import annotations

import os

import pytest
from rocksdict import Rdict

from blobstate.model import StoreKey
from blobstate.pipelines.backup import StoreCommitter
from blobstate.repository import Repository
from blobstate.spark.alignment import (
    SparkAlignmentError,
    committed_batches,
    plan_alignment,
    planned_batches,
    rewind_commit,
)

KEY = StoreKey("job", "0", "state")


def _spark_dir(root, commits, offsets):
    """A checkpoint location as Spark leaves it: ``offsets/N``, ``commits/N`` and their ``.N.crc`` side files."""
    for sub, batches in (("commits", commits), ("offsets", offsets)):
        os.makedirs(root / sub, exist_ok=True)
        for b in batches:
            (root / sub / str(b)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
            (root / sub / f".{b}.crc").write_bytes(b"crc")
    (root / "metadata").write_text('{"id":"x"}')
    return str(root)


@pytest.fixture
def repo_with_batches(tmp_path):
    """A repository holding snapshots of batches 0, 1, 2 (retain 5)."""
    url = f"file://{tmp_path}/repo"
    db = Rdict(str(tmp_path / "db"))
    with StoreCommitter(KEY, url, work_dir=str(tmp_path / "work"), retain=5) as committer:
        for batch in range(3):
            db[f"k{batch}"] = batch
            committer.backup(db, batch_id=batch)
    db.close()
    repo = Repository.open(url)
    yield repo
    repo.close()


def test_batch_lists_ignore_crc_files_and_missing_dirs(tmp_path):
    loc = _spark_dir(tmp_path / "ck", commits=[0, 1, 10], offsets=[0, 1, 10, 11])
    assert committed_batches(loc) == [0, 1, 10]
    assert planned_batches(loc) == [0, 1, 10, 11]
    assert committed_batches(str(tmp_path / "nowhere")) == []


def test_snapshot_of_last_commit_is_restored_without_rewind(repo_with_batches, tmp_path):
    loc = _spark_dir(tmp_path / "ck", commits=[0, 1, 2], offsets=[0, 1, 2, 3])
    plan = plan_alignment(repo_with_batches, KEY, loc)
    assert (plan.last_committed, plan.restored_batch, plan.rewind) == (2, 2, None)


def test_missing_upload_of_last_commit_rewinds_it(repo_with_batches, tmp_path):
    loc = _spark_dir(tmp_path / "ck", commits=[0, 1, 2, 3], offsets=[0, 1, 2, 3, 4])
    plan = plan_alignment(repo_with_batches, KEY, loc)
    assert (plan.last_committed, plan.restored_batch, plan.rewind) == (3, 2, 3)
    rewind_commit(loc, 3)
    assert committed_batches(loc) == [0, 1, 2]
    assert planned_batches(loc) == [0, 1, 2, 3]  # batch 3 is re-run from its offsets; 4 is planned anew
    assert not os.path.exists(os.path.join(loc, "commits", ".3.crc"))
    assert not os.path.exists(os.path.join(loc, "offsets", ".4.crc"))
    # After the rewind the plan is stable: restore batch 2, nothing more to rewind.
    assert plan_alignment(repo_with_batches, KEY, loc).rewind is None


def test_gap_of_more_than_one_batch_is_a_clear_error_and_changes_nothing(repo_with_batches, tmp_path):
    loc = _spark_dir(tmp_path / "ck", commits=[0, 1, 2, 3, 4], offsets=[0, 1, 2, 3, 4])
    with pytest.raises(SparkAlignmentError, match="batch 4.*newest snapshot.*batch 2") as info:
        plan_alignment(repo_with_batches, KEY, loc)
    assert info.value.exit_code == 5
    assert committed_batches(loc) == [0, 1, 2, 3, 4]
    with pytest.raises(SparkAlignmentError, match="Rewinding is disabled"):
        plan_alignment(repo_with_batches, KEY, _spark_dir(tmp_path / "ck2", [0, 1, 2, 3], [0, 1, 2, 3]),
                       allow_rewind=False)


def test_rewind_refuses_anything_but_the_newest_commit(tmp_path):
    loc = _spark_dir(tmp_path / "ck", commits=[0, 1], offsets=[0, 1, 2, 3])
    with pytest.raises(SparkAlignmentError, match="newest commit"):
        rewind_commit(loc, 0)
    with pytest.raises(SparkAlignmentError, match=r"beyond it"):
        rewind_commit(loc, 1)
    assert committed_batches(loc) == [0, 1]


def test_fresh_query_and_empty_repository(tmp_path):
    repo = Repository.open(f"file://{tmp_path}/repo")
    try:
        fresh = plan_alignment(repo, KEY, str(tmp_path / "new-ck"))
        assert (fresh.last_committed, fresh.checkpoint, fresh.rewind) == (None, None, None)
        first_lost = plan_alignment(repo, KEY, _spark_dir(tmp_path / "ck", commits=[0], offsets=[0, 1]))
        assert (first_lost.checkpoint, first_lost.rewind) == (None, 0)
        with pytest.raises(SparkAlignmentError, match="none"):
            plan_alignment(repo, KEY, _spark_dir(tmp_path / "ck3", commits=[0, 1, 2], offsets=[0, 1, 2]))
    finally:
        repo.close()
