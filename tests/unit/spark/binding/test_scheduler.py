"""``blobstate.spark.binding.scheduler.SnapshotScheduler`` with its real worker thread: a snapshot is due once a batch
is both applied and committed and ``every`` batches after the last; one commit runs at a time and the triggers that
arrive meanwhile coalesce into the newest due batch; a commit that found a later batch skips until a newer one is due;
the first failure stops it and reaches the caller once (``raise_if_failed``, ``close``). Synchronised on events and on
the scheduler's own waits, never on sleeps."""

from __future__ import annotations

import threading

import pytest

from blobstate.errors import ConfigurationError, IntegrityError, StorageError
from blobstate.spark.binding.scheduler import SnapshotScheduler
from blobstate.spark.errors import SnapshotCommitError


class Commits:
    """``commit(batch)``: records the batch; blocks while ``gate`` is clear; answers ``answers[batch]`` (default the
    batch itself; None: a later batch got there first; an exception: raised)."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.answers: dict[int, object] = {}

    def __call__(self, batch: int):
        self.batches.append(batch)
        self.entered.set()
        self.gate.wait()
        answer = self.answers.get(batch, batch)
        if isinstance(answer, BaseException):
            raise answer
        return answer


@pytest.fixture
def commits():
    return Commits()


@pytest.fixture
def make(commits):
    made = []

    def scheduler(**kwargs) -> SnapshotScheduler:
        s = SnapshotScheduler(commits, batch_of=lambda r: r, **kwargs)
        made.append(s)
        return s

    yield scheduler
    commits.gate.set()
    for s in made:
        try:
            s.close(timeout_s=10)
        except SnapshotCommitError:
            pass


def complete(s: SnapshotScheduler, batch: int) -> None:
    """Batch ``batch`` is applied and the engine committed it: its snapshot may be due."""
    s.applied(batch)
    s.committed(batch)


def hold_in_flight(s: SnapshotScheduler, commits: Commits) -> None:
    """Batch 0 completes and its snapshot commit starts, held at ``commits.gate`` until the test sets it."""
    commits.gate.clear()
    complete(s, 0)
    assert commits.entered.wait(10)


def test_every_must_be_at_least_one(commits):
    with pytest.raises(ConfigurationError, match="every 1 or more batches"):
        SnapshotScheduler(commits, batch_of=lambda r: r, every=0)


def test_a_batch_is_snapshotted_once_it_is_both_applied_and_committed(make, commits):
    s = make()
    s.applied(0)
    s.drain(10)
    assert commits.batches == [] and s.lag == 1  # applied, not committed: nothing due
    s.committed(0)
    assert s.wait_for(0, 10) == 0 and commits.batches == [0]
    assert (s.last_snapshot, s.committed_batch, s.lag) == (0, 0, 0)


def test_the_snapshot_is_of_the_older_of_applied_and_committed(make, commits):
    s = make()
    s.pause()
    s.applied(5)
    s.committed(3)  # Spark committed batch 3; the store holds batch 5 already
    s.resume()
    assert s.wait_for(3, 10) == 3 and commits.batches == [3]
    s.committed(2)  # an older report changes nothing
    assert s.committed_batch == 3


def test_snapshots_are_every_n_batches_after_the_last(make, commits):
    s = make(every=3)
    s.start_from(1)  # restored at batch 1, covered by a snapshot
    for b in range(2, 9):
        complete(s, b)
        s.drain(10)
    assert commits.batches == [4, 7] and s.last_snapshot == 7 and s.lag == 1


def test_triggers_during_a_commit_coalesce_into_the_newest_due_batch(make, commits):
    s = make()
    hold_in_flight(s, commits)
    for b in range(1, 6):  # five batches complete while the snapshot of batch 0 uploads
        complete(s, b)
    commits.gate.set()
    assert s.wait_for(5, 10) == 5
    s.drain(10)
    assert commits.batches == [0, 5]


def test_a_commit_that_found_a_later_batch_waits_for_a_newer_one(make, commits):
    s = make()
    commits.answers[2] = None  # the store already held batch 3 when the checkpoint was taken
    complete(s, 2)
    s.drain(10)
    assert commits.batches == [2] and s.last_snapshot is None
    complete(s, 2)
    s.drain(10)
    assert commits.batches == [2]  # not again for the same batch
    complete(s, 3)
    assert s.wait_for(3, 10) == 3 and commits.batches == [2, 3]


def test_paused_nothing_is_committed_until_resumed(make, commits):
    s = make()
    s.pause()
    complete(s, 0)
    s.drain(10)
    assert commits.batches == []
    s.resume()
    assert s.wait_for(0, 10) == 0


def test_the_first_failure_stops_the_scheduler_and_is_raised_once(make, commits):
    cause = IntegrityError("the blob is damaged")
    commits.answers[0] = cause
    s = make(describe_error=lambda b, e: f"snapshot {b}: {e}")
    complete(s, 0)
    with pytest.raises(SnapshotCommitError, match="^snapshot 0: the blob is damaged$") as info:
        s.wait_for(0, 10)
    error = info.value
    assert error.batch_id == 0 and error.__cause__ is cause and error.exit_code == 3
    assert isinstance(error, StorageError)
    complete(s, 1)
    s.drain(10)
    assert commits.batches == [0]  # stopped
    with pytest.raises(SnapshotCommitError):
        s.raise_if_failed()
    s.close()  # reported already: not raised again


def test_close_raises_a_failure_never_reported(make, commits):
    commits.answers[0] = RuntimeError("boom")
    s = make()
    complete(s, 0)
    s.drain(10)
    with pytest.raises(SnapshotCommitError, match="the snapshot of batch 0 failed: boom") as info:
        s.close()
    assert info.value.exit_code == StorageError.exit_code


def test_close_commits_what_is_due_first(make, commits):
    s = make()
    hold_in_flight(s, commits)
    complete(s, 1)
    commits.gate.set()
    s.close(timeout_s=10)
    assert commits.batches == [0, 1] and list(s.results) == [0, 1]


def test_close_without_drain_stops_after_the_commit_in_flight(make, commits):
    s = make()
    hold_in_flight(s, commits)
    complete(s, 1)
    closer = threading.Thread(target=s.close, kwargs={"drain": False, "timeout_s": 10})
    closer.start()
    commits.gate.set()
    closer.join()
    assert commits.batches == [0]


def test_waiting_for_a_snapshot_that_does_not_come_times_out_saying_where_it_is(make, commits):
    s = make()
    s.pause()
    s.applied(4)
    s.committed(3)
    with pytest.raises(TimeoutError, match=r"no snapshot of batch 4 within 0 s \(newest: None, applied 4, committed 3, "
                                           r"paused\)"):
        s.wait_for(4, 0.01)


def test_draining_a_commit_that_does_not_finish_times_out(make, commits):
    s = make()
    hold_in_flight(s, commits)
    with pytest.raises(TimeoutError, match="the snapshot of batch 0 did not finish within 0 s"):
        s.drain(0.01)


def test_the_lag_counts_from_before_the_first_batch():
    s = SnapshotScheduler(lambda b: b, batch_of=lambda r: r)
    try:
        assert s.lag == 0
        s.pause()
        s.applied(4)
        assert s.lag == 5
        s.start_from(2)
        assert s.lag == 0
    finally:
        s.close()
