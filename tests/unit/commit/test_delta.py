"""``blobstate.commit.delta`` on a ``file://`` repository: a small changelog goes inline in its delta record
(nothing uploaded), a larger one in a blob of its own made permanent at the commit, both read back exactly; the
commit journaled to completion; a writer overtaken between its upload and its append is fenced and its blob
removed."""

from __future__ import annotations

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import FencedError
from blobstate.model import changelog, layout
from blobstate.model.records import DELTA, MAX_INLINE_CHANGELOG_BYTES, StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
SMALL = changelog.encode([(changelog.PUT, "k", 1)])
LARGE = changelog.encode([(changelog.PUT, f"key-{n}", "v" * 100) for n in range(400)])  # > 32 KiB


def _blobs(repo: Repository) -> set[str]:
    return {i.blob_id for i in repo.store.list(KEY.prefix) if layout.is_blob_of(KEY, i.blob_id)}


def test_a_small_changelog_goes_inline_and_a_large_one_in_a_permanent_blob(repo, tmp_path):
    assert len(SMALL) <= MAX_INLINE_CHANGELOG_BYTES < len(LARGE)
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w")) as committer:
        deltas = DeltaCommitter(committer)
        inline = deltas.commit_changelog(SMALL, batch_id=0, query_id="q").checkpoint
        assert _blobs(repo) == set() and inline.changelog_blob_id == "" and inline.changelog_inline == SMALL
        blob = deltas.commit_changelog(LARGE, batch_id=1, query_id="q")
        assert not any(s.is_open for s in committer.session.states().values())
    cp = blob.checkpoint
    assert (cp.kind, cp.batch_id, cp.query_id, cp.generation) == (DELTA, 1, "q", 2)
    assert _blobs(repo) == {cp.changelog_blob_id} and not repo.store.has_ttl(cp.changelog_blob_id)
    assert blob.bytes_uploaded == len(LARGE) == cp.changelog_size
    assert repo.read_changelog(cp) == LARGE and repo.read_changelog(repo.log.history(KEY)[0]) == SMALL


def test_inline_max_bytes_is_bounded_by_what_a_record_may_carry(repo, tmp_path):
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w")) as committer:
        assert DeltaCommitter(committer, inline_max_bytes=1 << 40).inline_max_bytes == MAX_INLINE_CHANGELOG_BYTES
        never = DeltaCommitter(committer, inline_max_bytes=-5)
        assert never.inline_max_bytes == 0
        cp = never.commit_changelog(SMALL, batch_id=0).checkpoint
    assert cp.changelog_blob_id and repo.read_changelog(cp) == SMALL


def test_a_writer_overtaken_after_its_upload_is_fenced_and_its_blob_removed(repo, tmp_path):
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w1")) as first:
        staged = DeltaCommitter(first, inline_max_bytes=0).stage(LARGE, batch_id=0)
        assert staged.blob_id in _blobs(repo) and repo.store.has_ttl(staged.blob_id)
        with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w2")) as second:
            DeltaCommitter(second).commit_changelog(SMALL, batch_id=0)
        with pytest.raises(FencedError):
            DeltaCommitter(first, inline_max_bytes=0).commit(staged)
    assert staged.blob_id not in _blobs(repo)
    assert [cp.changelog_inline for cp in repo.log.history(KEY)] == [SMALL]
