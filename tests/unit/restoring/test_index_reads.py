"""A restore reads each snapshot index once (issue 28): the store type it records, the restore itself, the init
cleanup (the latest index, retention's retained ones) share one read, counted at the blob store (``file://``)."""

from __future__ import annotations

from collections import Counter

import pytest

from blobstate import api
from blobstate.model import layout
from blobstate.plugins.fsspec_store import FsspecBlobStore


@pytest.fixture
def index_gets(monkeypatch):
    """Every GET of a snapshot index by the blob store, by id."""
    gets: Counter[str] = Counter()

    def counting(method):
        def wrapped(self, blob_id, *args, **kwargs):
            if layout.kind_of(blob_id) is layout.ObjectKind.INDEX:
                gets[blob_id] += 1
            return method(self, blob_id, *args, **kwargs)
        return wrapped

    for name in ("get", "get_bytes", "get_bounded"):
        monkeypatch.setattr(FsspecBlobStore, name, counting(getattr(FsspecBlobStore, name)))
    return gets


@pytest.fixture
def two_backups(tmp_path):
    src = tmp_path / "counts"
    src.mkdir()
    results = []
    for i in range(2):
        (src / f"f{i}").write_bytes(b"x" * (100 + i))
        results.append(api.backup(str(src), repo=str(tmp_path / "repo"), work_base=str(tmp_path / "writer")))
    return tmp_path, results


def test_a_restore_of_the_latest_reads_its_index_once(two_backups, index_gets):
    tmp_path, (_, latest) = two_backups
    index_gets.clear()
    result = api.restore(str(tmp_path / "out"), repo=str(tmp_path / "repo"), store="counts",
                         work_base=str(tmp_path / "reader"))
    assert result.checkpoint.checkpoint_id == latest.checkpoint.checkpoint_id
    assert index_gets == {latest.checkpoint.index_blob_id: 1}, index_gets  # 3 before: type, restore, init cleanup


def test_a_restore_of_an_older_checkpoint_reads_it_and_the_latest_once_each(two_backups, index_gets):
    tmp_path, (first, latest) = two_backups
    index_gets.clear()
    api.restore(str(tmp_path / "out"), repo=str(tmp_path / "repo"), store="counts", checkpoint=1,
                work_base=str(tmp_path / "reader"))
    assert index_gets == {first.checkpoint.index_blob_id: 1, latest.checkpoint.index_blob_id: 1}, index_gets


def test_an_index_read_once_is_still_checked_against_every_record_naming_it(two_backups, index_gets):
    from dataclasses import replace

    from blobstate.errors import ChecksumMismatch
    from blobstate.repository.repo import Repository

    tmp_path, (_, latest) = two_backups
    index_gets.clear()
    with Repository.open(str(tmp_path / "repo"), create=False) as repository:
        with repository.reading_indexes_once():
            first = repository.read_index(latest.checkpoint)
            assert repository.read_index(latest.checkpoint) is first
            with pytest.raises(ChecksumMismatch, match="belongs to another checkpoint"):
                repository.read_index(replace(latest.checkpoint, checkpoint_id="1700000000000-deadbeef"))
        assert index_gets == {latest.checkpoint.index_blob_id: 1}
        repository.read_index(latest.checkpoint)  # outside the block: read again
    assert index_gets == {latest.checkpoint.index_blob_id: 2}
