"""``blobstate.commit.context.StoreCommitContext`` on a real ``file://`` repository: the store committer's delta and
group committers are composed from its one context (they inherit nothing), so all three kinds share one session,
commit point and take-over; ``start`` journals a commit's ``CommitStarted`` at the commit point's generation; the
take-over runs once, whichever kind commits first."""

from __future__ import annotations

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.context import StoreCommitContext
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model import changelog
from blobstate.model.layout import new_checkpoint_id
from blobstate.model.records import DELTA, GROUP, StoreKey

KEY = StoreKey("job", "0", "counts")
TTL = 60_000


def test_delta_and_group_committers_are_composed_from_the_store_committers_context(repo, tmp_path):
    assert GroupCommitter.__mro__ == (GroupCommitter, object) and DeltaCommitter.__mro__ == (DeltaCommitter, object)
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w"), ttl_ms=TTL) as committer:
        context = committer.context
        assert isinstance(context, StoreCommitContext)
        assert DeltaCommitter(committer).context is context is GroupCommitter(committer, num_partitions=2).context
        assert (context.session, context.commit_point, context.engine) == (committer.session, committer.commit_point,
                                                                           committer.engine)


def test_start_journals_the_commit_at_the_commit_points_generation(repo, tmp_path):
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w"), ttl_ms=TTL, retain=4) as committer:
        DeltaCommitter(committer).commit_changelog(changelog.encode([(changelog.PUT, "k", 1)]), batch_id=0)
        commit_id = new_checkpoint_id()
        committer.context.start(commit_id, 1, kind=GROUP, created_ms=123, sync=True)
        state = committer.session.states()[commit_id]
    assert (state.kind, state.expected_generation, state.batch_id, state.retain, state.ttl_ms, state.started_ms) == \
        (GROUP, 1, 1, 4, TTL, 123)
    assert state.store_key == str(KEY) and state.repo_url == repo.url and state.is_open


def test_the_take_over_runs_once_whichever_kind_commits_first(repo, tmp_path):
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "first"), ttl_ms=TTL) as first:
        DeltaCommitter(first, inline_max_bytes=0).commit_changelog(b"x" * 100, batch_id=0)
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "second"), ttl_ms=TTL) as second:
        assert not second.context.took_over  # the latest record was completed from another work directory
        staged = DeltaCommitter(second, inline_max_bytes=0).stage(b"y" * 100, batch_id=1)
        assert second.context.took_over
        states = second.session.states()
        assert [s.kind for s in states.values()] == [DELTA] and states[staged.commit_id].is_open
