"""``blobstate.journal.projection``: the fold of journal events into one state per commit, under Hypothesis: any
prefix of a commit's events, several commits interleaved (as one journal holds them), snapshot and delta commits."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from journal_cases import PREFIX, commit_events, journals

from blobstate.journal import events as ev
from blobstate.journal.projection import CommitPhase, CommitState, apply, project

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PHASE_OF = {ev.LocalCheckpointCreated: CommitPhase.LOCAL_CHECKPOINT, ev.UploadsPlanned: CommitPhase.UPLOADING,
            ev.IndexUploaded: CommitPhase.INDEX_UPLOADED, ev.CheckpointAppending: CommitPhase.APPENDING,
            ev.CheckpointWritten: CommitPhase.COMMITTED}


@FAST
@given(journals())
def test_interleaving_commits_in_one_journal_changes_no_commits_state(case):
    commits, journal = case
    states = project(journal)
    assert list(states) == sorted(commits, key=lambda c: journal.index(commits[c][0]))  # in the order they started
    for cid, events in commits.items():
        assert states[cid] == project(events)[cid]
        assert states[cid].events == tuple(events)


@FAST
@given(journals())
def test_the_phase_is_the_furthest_step_recorded_and_an_end_is_final(case):
    commits, journal = case
    states = project(journal)
    for cid, events in commits.items():
        state = states[cid]
        kinds = {type(e) for e in events}
        if ev.CommitAborted in kinds:
            assert state.phase == CommitPhase.ABORTED and not state.is_open
        elif ev.CommitCompleted in kinds:
            assert state.phase == CommitPhase.COMPLETED and not state.is_open
        else:
            assert state.phase == max([CommitPhase.STARTED, *(PHASE_OF[k] for k in kinds if k in PHASE_OF)])
            assert state.is_open
        assert state.is_delta == (events[0].kind == "delta")


@FAST
@given(journals())
def test_a_commit_knows_every_blob_it_may_have_created(case):
    commits, journal = case
    for cid, state in project(journal).items():
        planned = {b for e in commits[cid] if isinstance(e, ev.UploadsPlanned) for b in e.blob_ids}
        uploaded = {e.blob_id for e in commits[cid] if isinstance(e, ev.BlobUploaded)}
        assert planned | uploaded <= state.blob_ids
        assert (f"{PREFIX}/indexes/{cid}.json" in state.blob_ids) == (
            not state.is_delta and any(isinstance(e, ev.UploadsPlanned) for e in commits[cid]))


def test_the_append_records_its_own_expected_generation_and_the_record():
    state = project(commit_events("c")[:7])["c"]
    assert state.phase == CommitPhase.APPENDING
    assert (state.expected_generation, state.record) == (6, '{"record": 1}')  # the start said 4
    done = project(commit_events("c"))["c"]
    assert done.generation == 7 and done.ttl_removed == {f"{PREFIX}/blobs/c-1", f"{PREFIX}/blobs/c-2"}
    assert done.deleted == {f"{PREFIX}/blobs/old"}
    assert (done.repo_url, done.retain, done.batch_id, done.local_path) == ("file:///r", 2, 9, "/work/checkpoints/c")


def test_a_late_event_never_moves_the_phase_back():
    state = project(commit_events("c")[:8])["c"]
    assert state.phase == CommitPhase.COMMITTED
    again = apply(state, ev.UploadsPlanned("c", 20, ("x",), "", 0))  # a stray duplicate after the commit point
    assert again.phase == CommitPhase.COMMITTED
    assert apply(CommitState("c"), ev.BlobUploaded("c", 1, "b", 1)).phase == CommitPhase.STARTED
