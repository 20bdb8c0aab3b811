"""``blobstate.spark.demo.phases`` on a virtual clock: the demo says how long it should take, and no phase is ever
silent for more than ``QUIET_S`` plus one tick (issue 43 item 3)."""

from __future__ import annotations

import threading

from blobstate.spark.demo.phases import QUIET_S, PhaseReporter, expected_line, expected_seconds


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _reporter() -> tuple[PhaseReporter, Clock, list[tuple[float, str]]]:
    clock, lines = Clock(), []
    return PhaseReporter(lambda text: lines.append((clock.now, text)), clock=clock), clock, lines


def test_the_expected_duration_grows_with_the_batches_and_is_said_in_minutes():
    assert expected_seconds(365) > expected_seconds(6) > 0
    assert expected_line(365).startswith(f"expected to take about {expected_seconds(365) / 60:.0f} min")
    assert expected_line(4).startswith("expected to take about 2 min")  # 114 s: minutes from 90 s on


def test_a_silent_phase_says_it_is_still_running_every_quiet_interval_and_never_gaps_more():
    """A run of phases (a Spark start silent for 55 s, batches said now and then, a long restore) ticked every 0.5 s
    of virtual time: every gap between lines is at most QUIET_S + one tick, and the silent lines say the status
    and the seconds since the phase began."""
    reporter, clock, lines = _reporter()
    reporter.phase("run 1: starting Spark")
    said_at = {70.0: "batch 0", 71.0: "batch 1", 100.0: "batch 5"}
    while clock.now < 150:
        clock.now = round(clock.now + 0.5, 1)
        if clock.now in said_at:
            reporter.say(said_at[clock.now])
        if clock.now == 120.0:
            reporter.phase("the check")
        reporter.tick("waiting for batch 3" if clock.now < 120 else None)
    times = [at for at, _ in lines]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert max(gaps) <= QUIET_S + 0.5 and clock.now - times[-1] <= QUIET_S + 0.5, lines
    assert (10.0, "waiting for batch 3 (10 s)") in lines and (60.0, "waiting for batch 3 (60 s)") in lines
    assert (81.0, "waiting for batch 3 (81 s)") in lines  # 10 s after "batch 1": silences count from the last line
    assert (130.0, "the check (10 s)") in lines
    assert not [text for at, text in lines if 70.0 < at < 81.0 and text.startswith("waiting")]


def test_running_ticks_from_a_thread_while_the_caller_blocks():
    """``running`` around a blocking call: its thread calls ``tick`` until the call returns, then stops."""
    ticked = threading.Event()
    calls = []

    class Recorder(PhaseReporter):
        def tick(self, status=None):  # noqa: ANN001, ANN202
            calls.append(status)
            ticked.set()
            return False

    reporter = Recorder(lambda text: None)
    with reporter.running("loading", interval_s=0.01):
        assert ticked.wait(30)  # the blocking call: returns once the thread has ticked
    count = len(calls)
    assert reporter.current == "loading" and count >= 1
    assert len(calls) == count  # the thread is joined: no tick after the phase ended
