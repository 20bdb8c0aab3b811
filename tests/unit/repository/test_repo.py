"""``blobstate.repository.repo`` on a real ``file://`` repository: a reader never creates a repository, an index is
checked against its record before it is parsed (missing, swapped, damaged), read once inside
``reading_indexes_once``, the checkpoint ``choose`` picks (latest, a generation, a batch bound), the references a
checkpoint holds, and the store calls counted."""

from __future__ import annotations

from dataclasses import replace

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.errors import BlobNotFound, ChecksumMismatch, NothingToRestore, RepositoryNotFound
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY, OTHER = StoreKey("job", "0", "counts"), StoreKey("job", "1", "sums")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """Three snapshots of KEY (batches 10, 20, 30), one of OTHER; read only (a test that damages an object makes
    its own repository)."""
    tmp = tmp_path_factory.mktemp("repo")
    url = f"file://{tmp}/repo"
    with Repository.open(url, create=True) as repo:
        data = tmp / "data"
        data.mkdir()
        for batch in (10, 20, 30):
            (data / "f.txt").write_text(f"after batch {batch}")
            with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp / "w")) as committer:
                committer.backup(str(data), batch_id=batch)
        with StoreCommitter(OTHER, repo, store_type="dir", work_dir=str(tmp / "w2")) as committer:
            committer.backup(str(data))
    return url


@pytest.fixture
def repo(url):
    with Repository.open(url, create=False) as repository:
        yield repository


def test_a_reader_never_creates_a_repository(tmp_path):
    with pytest.raises(RepositoryNotFound):
        Repository.open(f"file://{tmp_path}/none", create=False)
    assert not (tmp_path / "none").exists()


def test_choose_the_latest_a_generation_or_the_newest_at_or_below_a_batch(repo):
    assert repo.choose(KEY).batch_id == 30 and repo.choose(KEY, checkpoint="latest").generation == 3
    assert repo.choose(KEY, checkpoint=1).batch_id == 10
    assert repo.choose(KEY, max_batch_id=25).batch_id == 20
    with pytest.raises(NothingToRestore, match="batch id <= 5"):
        repo.choose(KEY, max_batch_id=5)
    with pytest.raises(NothingToRestore, match="stores with checkpoints: job/0/counts, job/1/sums"):
        repo.choose(StoreKey("job", "9", "none"))


def test_an_index_belongs_to_its_record(repo):
    latest = repo.choose(KEY)
    index = repo.read_index(latest)
    assert index.checkpoint_id == latest.checkpoint_id and index.store_key == KEY
    refs = repo.retained_references([latest])
    assert latest.index_blob_id in refs and all(layout.is_blob_of(KEY, r) or r == latest.index_blob_id for r in refs)


def test_a_missing_or_mismatched_index_is_refused_before_it_is_parsed(repo):
    latest, first = repo.choose(KEY), repo.choose(KEY, checkpoint=1)
    with pytest.raises(BlobNotFound, match="snapshot index of checkpoint"):
        repo.read_index(replace(latest, index_blob_id=layout.new_index_id(KEY)))
    with pytest.raises(ChecksumMismatch, match="does not match its checkpoint record"):
        repo.read_index(replace(latest, index_crc32c=latest.index_crc32c ^ 1))
    swapped = replace(latest, index_blob_id=first.index_blob_id, index_size=first.index_size,
                      index_crc32c=first.index_crc32c)  # an intact index, of another checkpoint
    with pytest.raises(ChecksumMismatch, match="belongs to another checkpoint"):
        repo.read_index(swapped)


def test_a_damaged_index_is_refused(tmp_path):
    with Repository.open(f"file://{tmp_path}/repo", create=True) as repo:
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "f").write_text("x")
        with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
            committer.backup(str(tmp_path / "d"))
        latest = repo.log.latest(KEY)
        repo.store.put(PutRequest(latest.index_blob_id, b"\0" * latest.index_size))
    with Repository.open(f"file://{tmp_path}/repo", create=False) as fresh:
        with pytest.raises(ChecksumMismatch):
            fresh.read_index(latest)


def test_inside_reading_indexes_once_an_index_is_fetched_once(url):
    with Repository.open(url, create=False, count_calls=True) as repo:
        latest = repo.choose(KEY)
        before = repo.calls["get_bounded"]
        with repo.reading_indexes_once():
            repo.read_index(latest)
            repo.read_index(latest)
        assert repo.calls["get_bounded"] == before + 1
        repo.read_index(latest)  # outside the block: read again
        assert repo.calls["get_bounded"] == before + 2
    with Repository.open(url, create=False) as uncounted:
        assert uncounted.calls is None
