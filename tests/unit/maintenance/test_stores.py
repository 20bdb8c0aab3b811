"""``blobstate.maintenance.stores`` on a real ``file://`` repository: gc and verify of a whole repository (one
view for every store, ``--job``/``--task`` filtering, stores worked on concurrently in key order), a damaged blob
reported against its store only, and a store named without a checkpoint refused."""

from __future__ import annotations

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.errors import NothingToRestore
from blobstate.maintenance.stores import gc_repository, verify_repository
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

A, B = StoreKey("job", "0", "a"), StoreKey("job", "1", "b")


@pytest.fixture
def repo(tmp_path):
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    for key in (A, B):
        data = tmp_path / f"data-{key.store}"
        data.mkdir()
        (data / "f.txt").write_text(f"state of {key}" * 50)
        with StoreCommitter(key, repository, store_type="dir", work_dir=str(tmp_path / f"w-{key.store}")) as c:
            c.backup(str(data))
    yield repository
    repository.close()


def _gc(repo: Repository, tmp_path, **kw):  # noqa: ANN001, ANN202
    args = {"keys": None, "job": None, "task": None, "now_ms": layout.FAR_FUTURE_MS - 1, "ttl_ms": 1,
            "retain": None, "dry_run": False, "work_base": str(tmp_path / "base"), **kw}
    return gc_repository(repo, **args)


def test_gc_of_the_repository_deletes_an_abandoned_upload_of_its_store_only(repo, tmp_path):
    abandoned = layout.new_blob_id(A)
    repo.store.put(PutRequest(abandoned, b"an upload a crashed commit left", ttl_ms=1))
    dry = _gc(repo, tmp_path, dry_run=True)
    assert [r.key for r in dry] == [A, B] and abandoned in dry[0].expired_deleted
    assert repo.store.get_bytes(abandoned)  # a dry run deletes nothing
    reports = {r.key: r for r in _gc(repo, tmp_path)}
    assert abandoned in reports[A].expired_deleted and reports[B].expired_deleted == []
    assert abandoned not in {i.blob_id for i in repo.store.list(A.prefix)}
    assert [v.ok for v in verify_repository(repo, keys=None, job=None, task=None, checkpoint=None,
                                            all_checkpoints=False)] == [True, True]


def test_job_and_task_pick_the_stores(repo, tmp_path):
    assert [r.key for r in _gc(repo, tmp_path, job="job", task="1")] == [B]
    reports = verify_repository(repo, keys=None, job="job", task="0", checkpoint=None, all_checkpoints=False)
    assert [r.checkpoint.store_key for r in reports] == [A]


def test_a_damaged_blob_is_reported_against_its_store(repo):
    [blob_id] = [i.blob_id for i in repo.store.list(B.prefix) if layout.is_blob_of(B, i.blob_id)]  # f.txt's
    repo.store.put(PutRequest(blob_id, b"damaged"))
    reports = {r.checkpoint.store_key: r for r in verify_repository(repo, keys=None, job=None, task=None,
                                                                    checkpoint=None, all_checkpoints=False)}
    assert reports[A].ok and not reports[B].ok


def test_a_store_named_without_a_checkpoint_is_nothing_to_verify(repo):
    with pytest.raises(NothingToRestore):
        verify_repository(repo, keys=[StoreKey("job", "9", "none")], job=None, task=None, checkpoint=None,
                          all_checkpoints=False)
