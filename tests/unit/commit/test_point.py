"""``blobstate.commit.point``: the TTL budget, and the commit point on a real ``file://`` repository under
``tmp_path``: appends in sequence with their journal events, a rival writer fences, an append whose answer is lost
(``tests/support/fault_logs.py``: the file log answering with a timeout, the request landing anyway) is resolved by
re-appending, or left open for recovery once ``append_resolve_s`` passed."""

from __future__ import annotations

import pytest
from fault_logs import DelayedAppendLog

from blobstate.commit.point import AppendAttempt, CommitPoint, check_ttl_budget
from blobstate.commit.session import StoreSession
from blobstate.errors import AppendOutcomeUnknown, FencedError, StorageError
from blobstate.journal import events as ev
from blobstate.model.layout import now_ms
from blobstate.model.records import Checkpoint, StoreKey

KEY = StoreKey("job", "0", "store")


def record(n: int) -> Checkpoint:
    return Checkpoint(KEY, f"cp{n}", 0, f"{KEY.prefix}/indexes/{n:032x}.json", 1, 10, n)


@pytest.fixture
def session(tmp_path):
    with StoreSession(KEY, str(tmp_path / "work")) as store_session:
        yield store_session


def test_a_commit_older_than_half_its_ttl_is_refused():
    check_ttl_budget("cp", now_ms(), 60_000)
    check_ttl_budget("cp", now_ms() - 29_000, 60_000)
    with pytest.raises(StorageError, match="more than half the blob TTL.*raise --ttl"):
        check_ttl_budget("cp", now_ms() - 31_000, 60_000)


def test_appends_follow_each_other_and_journal_the_exact_record(repository, session):
    point = CommitPoint(session, repository, append_resolve_s=1)
    assert point.generation() == 0
    for n in (1, 2):
        attempt = AppendAttempt()
        landed = point.append(f"cp{n}", record(n), attempt=attempt)
        assert attempt.sent and landed.generation == n and point.generation() == n
    events = session.states()["cp2"].events
    assert [type(e) for e in events] == [ev.CheckpointAppending, ev.CheckpointWritten]
    assert events[0].expected_generation == 1
    assert Checkpoint.from_bytes(events[0].record.encode()) == repository.log.latest(KEY)
    assert events[1].generation == 2
    assert point.ours_since(0, 2) and not point.ours_since(0, 3)


def test_a_rival_append_fences_and_the_next_append_reads_the_log_again(repository, session):
    point = CommitPoint(session, repository, append_resolve_s=1)
    point.append("cp1", record(1), attempt=AppendAttempt())
    repository.log.append(record(2), 1)  # another writer
    attempt = AppendAttempt()
    with pytest.raises(FencedError):
        point.append("cp3", record(3), attempt=attempt)
    assert attempt.sent
    assert "cp3" in session.states() and session.states()["cp3"].generation is None  # never written
    assert point.generation() == 2  # forgotten, then read from the log
    assert not point.ours_since(1, 2)


def test_a_lost_answer_is_resolved_by_re_appending_the_same_record(repository, session, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_TEST_APPEND_DELAY_S", "0")
    repository.log = DelayedAppendLog(f"delayed+{repository.url}", {})
    point = CommitPoint(session, repository, append_resolve_s=30)
    landed = point.append("cp1", record(1), attempt=AppendAttempt())
    assert landed.generation == 1 and [cp.checkpoint_id for cp in repository.log.history(KEY)] == ["cp1"]
    assert session.states()["cp1"].generation == 1


def test_an_outcome_still_unknown_after_the_resolve_time_leaves_the_commit_open(repository, session, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_TEST_APPEND_DELAY_S", "0")
    monkeypatch.setenv("BLOBSTATE_TEST_UNKNOWN_FOR_S", "60")
    repository.log = DelayedAppendLog(f"delayed+{repository.url}", {})
    point = CommitPoint(session, repository, append_resolve_s=0.3)
    attempt = AppendAttempt()
    with pytest.raises(AppendOutcomeUnknown, match="blobstate recover"):
        point.append("cp1", record(1), attempt=attempt)
    state = session.states()["cp1"]
    assert attempt.sent and state.is_open and state.record is not None and state.generation is None


@pytest.mark.timeout(60)  # a re-append loop that swallowed the fencing would spin here
def test_a_re_append_that_finds_a_rival_record_is_fenced_at_once(repository, session, monkeypatch):
    monkeypatch.setenv("BLOBSTATE_TEST_APPEND_DELAY_S", "0")
    repository.log.append(record(9), 0)  # a rival took generation 1 after this writer read generation 0
    repository.log = DelayedAppendLog(f"delayed+{repository.url}", {})
    point = CommitPoint(session, repository, append_resolve_s=30, generation=0)
    with pytest.raises(FencedError):
        point.append("cp1", record(1), attempt=AppendAttempt())
    assert [cp.checkpoint_id for cp in repository.log.history(KEY)] == ["cp9"]
