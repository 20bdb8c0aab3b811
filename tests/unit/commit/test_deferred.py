"""``blobstate.commit.deferred.DeferredMarks``: when a committed delta's lease mark waits and when the waiting marks
are due (pure logic, a virtual clock through ``layout.use_clock``)."""

from __future__ import annotations

from blobstate.commit.deferred import DeferredMarks
from blobstate.model.layout import SystemClock, use_clock

TTL_MS = 40_000  # marks are due once the oldest waited 10 s


class Clock(SystemClock):
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def test_marks_wait_until_a_removal_that_is_not_deferred_takes_them_along():
    marks = DeferredMarks()
    with use_clock(Clock()):
        assert marks.take(["a"], defer=True, ttl_ms=TTL_MS) == []
        assert marks.take(["b"], defer=True, ttl_ms=TTL_MS) == []
        assert marks.take(["i"], defer=False, ttl_ms=TTL_MS) == ["a", "b", "i"]
        assert len(marks) == 0


def test_waiting_marks_are_due_once_the_oldest_waited_a_quarter_of_the_ttl():
    marks, clock = DeferredMarks(), Clock()
    with use_clock(clock):
        assert marks.take(["a"], defer=True, ttl_ms=TTL_MS) == []
        clock.now += 9.9
        assert marks.take(["b"], defer=True, ttl_ms=TTL_MS) == []
        clock.now += 0.1
        assert marks.take([], defer=True, ttl_ms=TTL_MS) == ["a", "b"]  # an inline delta's commit takes them


def test_waiting_marks_are_due_once_there_are_max_of_them():
    marks = DeferredMarks()
    with use_clock(Clock()):
        for i in range(DeferredMarks.MAX - 1):
            assert marks.take([str(i)], defer=True, ttl_ms=TTL_MS) == []
        assert len(marks.take(["last"], defer=True, ttl_ms=TTL_MS)) == DeferredMarks.MAX


def test_marks_a_removal_failed_on_wait_again_as_the_oldest():
    marks, clock = DeferredMarks(), Clock()
    with use_clock(clock):
        taken = marks.take(["a"], defer=False, ttl_ms=TTL_MS)
        marks.keep(taken)
        clock.now += 5
        assert marks.take(["b"], defer=True, ttl_ms=TTL_MS) == []
        clock.now += 5
        assert marks.take([], defer=True, ttl_ms=TTL_MS) == ["a", "b"]
