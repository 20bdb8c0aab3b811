"""``blobstate.commit.engine`` through a store's delta commits on a ``file://`` repository: a commit past half its
uploads' TTL never reaches its commit point (aborted, its upload deleted), and recovery of a commit whose append
outcome is unknown finishes one that landed, re-appends one that did not, and aborts one another writer overtook."""

from __future__ import annotations

from dataclasses import replace

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter, StagedDelta
from blobstate.commit.engine import landed_late, recover_append
from blobstate.errors import StorageError
from blobstate.model import changelog, layout
from blobstate.model.records import DELTA, Checkpoint, StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
TTL = 60_000
DATA = changelog.encode([(changelog.PUT, "k", 1)])


def _committer(repo, tmp_path, name: str = "w") -> StoreCommitter:  # noqa: ANN001
    return StoreCommitter(KEY, repo, work_dir=str(tmp_path / name), ttl_ms=TTL)


def _record(committer: StoreCommitter, staged: StagedDelta) -> Checkpoint:
    """The record the delta commit would append (what the journal keeps for recovery)."""
    return Checkpoint(KEY, staged.commit_id, 0, "", 0, 0, staged.created_ms, staged.batch_id, committer.writer_id,
                      kind=DELTA, changelog_blob_id=staged.blob_id, changelog_crc32c=staged.crc32c,
                      changelog_size=staged.size)


def _blobs(repo: Repository) -> set[str]:
    return {i.blob_id for i in repo.store.list(KEY.prefix) if layout.is_blob_of(KEY, i.blob_id)}


def test_landed_late_is_past_half_the_ttl():
    assert not landed_late(layout.now_ms(), TTL)
    assert landed_late(layout.now_ms() - TTL // 2 - 1000, TTL)


def test_a_commit_past_half_its_ttl_is_aborted_before_its_commit_point(repo, tmp_path):
    with _committer(repo, tmp_path) as committer:
        deltas = DeltaCommitter(committer, inline_max_bytes=0)
        staged = deltas.stage(DATA, batch_id=0)
        old = replace(staged, created_ms=staged.created_ms - TTL)  # as if its upload had taken that long
        with pytest.raises(StorageError, match="more than half the blob TTL"):
            deltas.commit(old)
        assert not any(s.is_open for s in committer.session.states().values())  # aborted (and compacted away)
    assert repo.log.history(KEY) == [] and _blobs(repo) == set()


def test_recovery_finishes_a_commit_that_landed(repo, tmp_path):
    with _committer(repo, tmp_path) as committer:
        staged = DeltaCommitter(committer, inline_max_bytes=0).stage(DATA, batch_id=0)
        repo.log.append(_record(committer, staged), 0)  # it landed; the answer was lost
        state = committer.session.states()[staged.commit_id]
        recover_append(committer.cleanup, state, _record(committer, staged))
        assert not any(s.is_open for s in committer.session.states().values())
    assert [cp.checkpoint_id for cp in repo.log.history(KEY)] == [staged.commit_id]
    assert not repo.store.has_ttl(staged.blob_id)


def test_recovery_re_appends_a_commit_that_did_not_land(repo, tmp_path):
    with _committer(repo, tmp_path) as committer:
        staged = DeltaCommitter(committer, inline_max_bytes=0).stage(DATA, batch_id=0)
        state = committer.session.states()[staged.commit_id]
        recover_append(committer.cleanup, state, _record(committer, staged))
    assert [(cp.checkpoint_id, cp.generation) for cp in repo.log.history(KEY)] == [(staged.commit_id, 1)]
    assert repo.read_changelog(repo.log.latest(KEY)) == DATA and not repo.store.has_ttl(staged.blob_id)


def test_recovery_aborts_a_commit_another_writer_overtook(repo, tmp_path):
    with _committer(repo, tmp_path) as committer:
        staged = DeltaCommitter(committer, inline_max_bytes=0).stage(DATA, batch_id=0)
        with _committer(repo, tmp_path, "other") as other:
            DeltaCommitter(other).commit_changelog(DATA, batch_id=0)
        state = committer.session.states()[staged.commit_id]
        outcome = recover_append(committer.cleanup, state, _record(committer, staged))
        assert outcome.startswith("aborted (the log holds another record at generation 1)")
    assert staged.blob_id not in _blobs(repo)
    assert [cp.checkpoint_id for cp in repo.log.history(KEY)] != [staged.commit_id]
