"""``blobstate.journal.recovery.plan_recovery``: one action per open commit, and the promise under Hypothesis: a
commit the log holds, or whose append may still land, is never aborted."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from journal_cases import commit_events, journals

from blobstate.journal.projection import CommitPhase, project
from blobstate.journal.recovery import AbortCommit, FinishCommit, ResolveAppend, plan_recovery

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def step(cid: str, n: int, kind: str = "snapshot"):
    return project(commit_events(cid, kind)[:n])


@FAST
@given(journals(), st.data())
def test_a_commit_the_log_holds_or_may_hold_is_never_aborted(case, data):
    commits, journal = case
    states = project(journal)
    in_log = data.draw(st.sets(st.sampled_from(sorted(commits))))
    actions = plan_recovery(states, in_log)
    acted = [a.state.commit_id for a in actions]
    assert acted == [cid for cid, s in states.items() if s.is_open]  # one action per open commit, in order
    for action in actions:
        state = action.state
        if isinstance(action, AbortCommit):
            assert state.commit_id not in in_log
            assert state.phase < CommitPhase.APPENDING
        if state.phase >= CommitPhase.COMMITTED or state.commit_id in in_log:
            assert isinstance(action, FinishCommit)


def test_an_append_sent_and_not_in_the_log_is_resolved_never_aborted():
    (action,) = plan_recovery(step("c", 7), ["other"])
    assert isinstance(action, ResolveAppend) and action.name == "resolve"
    assert "append was sent" in action.reason
    (action,) = plan_recovery(step("c", 7), ["c"])  # the log answered: it landed
    assert isinstance(action, FinishCommit) and "crash after the commit point" in action.reason


def test_a_delta_commit_follows_the_same_rules():
    assert isinstance(plan_recovery(step("d", 4, "delta"), [])[0], AbortCommit)
    assert isinstance(plan_recovery(step("d", 5, "delta"), [])[0], ResolveAppend)
    assert isinstance(plan_recovery(step("d", 6, "delta"), [])[0], FinishCommit)


def test_reasons_name_how_far_a_commit_got():
    (abort,) = plan_recovery(step("c", 3), [])
    assert abort.name == "abort" and abort.reason == "not committed (reached UPLOADING)"
    (finish,) = plan_recovery(step("c", 8), [])
    assert finish.name == "finish" and finish.reason == "committed at generation 7; cleanup unfinished"


def test_ended_commits_need_nothing():
    aborted = project(commit_events("a", aborted_at=3))
    completed = project(commit_events("c"))
    assert plan_recovery({**aborted, **completed}, ["c"]) == []
