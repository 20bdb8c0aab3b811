"""``blobstate.commit.backup`` (``StoreCommitter``) on a ``file://`` repository and a real RocksDB: only new and
changed files are uploaded (an unchanged one is reused by the next snapshot), every blob made permanent and every
step journaled to completion, retention keeps the newest snapshots, a missing reused blob is uploaded again, an
unreadable previous index never wedges the store, and one committer per work directory at a time."""

from __future__ import annotations

import pytest
from rocksdict import Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.errors import CommitInProgressError
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "files")


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "same.txt").write_text("unchanged " * 100)
    (folder / "edit.txt").write_text("before")
    return folder


def _dir_committer(repo, tmp_path, **kw) -> StoreCommitter:  # noqa: ANN001
    return StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w"), **kw)


def _blobs(repo: Repository) -> set[str]:
    return {i.blob_id for i in repo.store.list(KEY.prefix) if layout.is_blob_of(KEY, i.blob_id)}


def test_only_new_and_changed_files_are_uploaded_and_every_blob_is_permanent(repo, tmp_path, data):
    with _dir_committer(repo, tmp_path) as committer:
        first = committer.backup(str(data))
        (data / "edit.txt").write_text("after, changed")
        second = committer.backup(str(data))
        assert not any(s.is_open for s in committer.session.states().values())
    assert (first.files_total, first.files_uploaded) == (2, 2)
    assert (second.files_total, second.files_uploaded) == (2, 1) and second.bytes_uploaded == len("after, changed")
    assert [cp.generation for cp in repo.log.history(KEY)] == [1, 2]
    old, new = (repo.read_index(cp).files() for cp in repo.log.history(KEY))
    assert old["same.txt"].blobs == new["same.txt"].blobs and old["edit.txt"].blobs != new["edit.txt"].blobs
    assert repo.store.expired(KEY.prefix, layout.FAR_FUTURE_MS) == []


def test_retention_keeps_the_newest_snapshots(repo, tmp_path, data):
    with _dir_committer(repo, tmp_path, retain=2) as committer:
        for n in range(4):
            (data / "edit.txt").write_text(f"version {n}")
            committer.backup(str(data))
    assert [cp.generation for cp in repo.log.history(KEY)] == [3, 4]


def test_a_reused_blob_the_store_lost_is_uploaded_again(repo, tmp_path, data):
    with _dir_committer(repo, tmp_path) as committer:
        committer.backup(str(data))
    lost = repo.read_index(repo.log.latest(KEY)).files()["same.txt"].blobs[0].blob_id
    repo.store.delete(lost)
    with _dir_committer(repo, tmp_path) as committer:  # a new committer walks the store's blobs (rule 7)
        committer.backup(str(data))
    files = repo.read_index(repo.log.latest(KEY)).files()
    assert all(b.blob_id in _blobs(repo) for f in files.values() for b in f.blobs)


def test_an_unreadable_previous_index_means_uploading_everything_again(repo, tmp_path, data):
    with _dir_committer(repo, tmp_path) as committer:
        committer.backup(str(data))
    latest = repo.log.latest(KEY)
    repo.store.put(PutRequest(latest.index_blob_id, b"damaged"))
    with Repository.open(repo.url, create=False) as fresh, \
            StoreCommitter(KEY, fresh, store_type="dir", work_dir=str(tmp_path / "other-host")) as committer:
        result = committer.backup(str(data))  # another host: no cached copy of that index
    assert result.files_uploaded == 2 and result.checkpoint.generation == 2


def test_one_committer_per_work_directory(repo, tmp_path):
    with _dir_committer(repo, tmp_path):
        with pytest.raises(CommitInProgressError):
            _dir_committer(repo, tmp_path)


def test_a_rocksdb_snapshot_records_its_batch_and_query(repo, tmp_path):
    db = Rdict(str(tmp_path / "db"))
    db["k"] = 1
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w")) as committer:
        local = committer.checkpoint(db, batch_id=7, query_id="q-1")
        result = committer.upload(local)
    db.close()
    cp = result.checkpoint
    assert (cp.batch_id, cp.query_id, cp.kind) == (7, "q-1", "snapshot")
    assert repo.read_index(cp).store_type == "rocksdb" and "CURRENT" in repo.read_index(cp).files()
