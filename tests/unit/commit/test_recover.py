"""``blobstate.commit.recover``: planning and carrying out recovery from a store's journal, on a real ``file://``
repository under ``tmp_path``: a journal of another store, repository or log changes nothing; an open commit the
log holds is finished, one whose append outcome was unknown is resolved by re-appending its own record (landed, or
fenced and aborted), any other is aborted; a dry run only plans."""

from __future__ import annotations

import pytest
from snapshot_records import KEY, blob, commit_snapshot, index_id, present, stage_snapshot

from blobstate.commit.recover import plan, recover
from blobstate.commit.session import StoreSession
from blobstate.config.options import display_url
from blobstate.errors import ConfigurationError
from blobstate.journal import events as ev
from blobstate.journal.recovery import AbortCommit, FinishCommit, ResolveAppend
from blobstate.plugin.interfaces import PutRequest


@pytest.fixture
def session(tmp_path):
    with StoreSession(KEY, str(tmp_path / "work")) as store_session:
        yield store_session


def start(session, repository, cid: str, expected: int, planned: tuple[str, ...], **kw) -> None:
    fields = {"store_key": str(KEY), "repo_url": display_url(repository.url),
              "log_url": display_url(repository.log.url or repository.url), **kw}
    session.record(ev.CommitStarted(cid, 1, fields["store_key"], expected, repo_url=fields["repo_url"],
                                    log_url=fields["log_url"]))
    session.record(ev.UploadsPlanned(cid, 2, planned, ""))


def test_a_journal_of_another_store_repository_or_log_changes_nothing(session, repository):
    for wrong, match in (({"store_key": "job/0/other"}, "belongs to store"),
                         ({"repo_url": "file:///elsewhere"}, "written against repository"),
                         ({"log_url": "sqlite:///x.db"}, "is --log right")):
        start(session, repository, f"c-{match[:5]}", 0, (), **wrong)
        with pytest.raises(ConfigurationError, match=match):
            plan(session, repository)
        session.record(ev.CommitAborted(f"c-{match[:5]}", 3))
    assert plan(session, repository) == []


def test_an_empty_log_beside_completed_indexes_is_taken_for_a_wrong_log(session, repository):
    repository.store.put(PutRequest(index_id(7), b"{}"))  # an index a commit completed (no TTL left)
    start(session, repository, "c1", 0, (blob("x"),))
    with pytest.raises(ConfigurationError, match="holds no checkpoint"):
        plan(session, repository)


def test_open_commits_are_finished_resolved_or_aborted(session, repository):
    commit_snapshot(repository, 1, {"a": "a1"})  # committed, but its journal stops before CheckpointWritten
    start(session, repository, "cp1", 0, (blob("a1"),))
    start(session, repository, "cp2", 1, (blob("new2"),))
    # past half its TTL (journaled at ms 1): re-appended only because every object it references is present
    record = stage_snapshot(repository, 2, {"a": "a1", "b": "new2"}, ttl_ms=60_000)
    session.record(ev.CheckpointAppending("cp2", 3, 1, record.with_generation(2).to_bytes().decode()))

    planned = plan(session, repository)
    assert [(type(a), a.state.commit_id) for a in planned] == [(FinishCommit, "cp1"), (ResolveAppend, "cp2")]
    assert [outcome for _, outcome in recover(session, repository, dry_run=True)] == ["planned", "planned"]

    outcomes = dict((a.state.commit_id, outcome) for a, outcome in recover(session, repository))
    assert outcomes["cp1"].startswith("finished") and outcomes["cp2"].startswith("finished")
    assert [cp.checkpoint_id for cp in repository.log.history(KEY)] == ["cp1", "cp2"]  # the re-append landed
    assert not repository.store.has_ttl(blob("new2"))
    assert plan(session, repository) == []  # nothing open any more


def test_a_re_append_that_is_fenced_aborts_the_commit(session, repository):
    commit_snapshot(repository, 1, {"a": "a1"})
    start(session, repository, "mine", 0, (blob("mine"),))
    record = stage_snapshot(repository, 9, {"m": "mine"}, ttl_ms=60_000)  # present: re-appended, and fenced
    session.record(ev.CheckpointAppending("mine", 3, 0, record.with_generation(1).to_bytes().decode()))
    start(session, repository, "plain", 1, (blob("plain"),))
    repository.store.put(PutRequest(blob("plain"), b"plain", 60_000))

    results = recover(session, repository)
    assert [type(a) for a, _ in results] == [ResolveAppend, AbortCommit]
    assert results[0][1].startswith("aborted (the log holds another record at generation 1)")
    assert results[1][1] == "aborted: 1 blobs deleted"
    assert present(repository) == {blob("a1")}
