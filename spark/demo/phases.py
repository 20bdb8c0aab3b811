"""What ``blobstate demo`` says while it runs, so that it never looks hung: how long it should take, a line when a
phase begins, and, while a phase prints nothing (a Spark driver starting, a batch running, a restore), a line every
``quiet_s`` seconds saying what it is waiting for and for how long.

Pure logic on an injected clock (``tick`` decides; ``running`` calls it from a thread on the real clock while the
caller blocks in one call), so the rule "no silence longer than ``quiet_s`` + one tick" is tested on a virtual clock
(``tests/unit/spark/demo/test_phases.py``) and measured on the real demo (``tests/e2e/test_demo_progress.py``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

#: Seconds of silence after which a phase says it is still running (issue 43: never silent for 15 s).
QUIET_S = 10.0
#: The estimate's parts, seconds, measured on a 2-core machine: a Spark driver process started (twice: the run that
#: is killed, the restart), each micro-batch (one day file), and loading the flights plus the final restore and check.
SPARK_START_S, BATCH_S, FIXED_S = 45.0, 1.1, 20.0


def expected_seconds(batches: int) -> float:
    """The demo's expected wall time (s) for ``batches`` micro-batches: two Spark starts, the batches, the rest."""
    return 2 * SPARK_START_S + batches * BATCH_S + FIXED_S


def expected_line(batches: int) -> str:
    """``expected to take about 7 min (...)``: said before anything starts."""
    seconds = expected_seconds(batches)
    about = f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"
    return (f"expected to take about {about} on 2 free cores (two Spark starts of ~{SPARK_START_S:.0f} s, "
            f"~{BATCH_S} s a batch for {batches} batches; longer on a loaded machine); a line at least every "
            f"{QUIET_S:.0f} s")


class PhaseReporter:
    """Says each phase (``phase``), any other line (``say``), and, from ``tick``, ``<status> (N s)`` once nothing was
    said for ``quiet_s`` seconds of ``clock`` (monotonic seconds); ``status`` defaults to the phase's text.

    ``emit(text)`` writes one line. Thread-safe: ``running`` ticks from a thread while the caller blocks."""

    def __init__(self, emit: Callable[[str], None], *, clock: Callable[[], float] = time.monotonic,
                 quiet_s: float = QUIET_S) -> None:
        self.emit, self.clock, self.quiet_s = emit, clock, quiet_s
        self._lock = threading.Lock()
        self.current = ""
        self._phase_start = self._last = clock()

    def phase(self, text: str) -> None:
        """A new phase begins: says ``text``; silences are counted from now."""
        with self._lock:
            self.current = text
            self._phase_start = self._last = self.clock()
            self.emit(text)

    def say(self, text: str) -> None:
        """Any other line of the run (a batch committed): said, and silences counted from now."""
        with self._lock:
            self._last = self.clock()
            self.emit(text)

    def tick(self, status: str | None = None) -> bool:
        """Say ``<status> (N s)`` (N: seconds since the phase began) when nothing was said for ``quiet_s``; returns
        whether it said it. Called often (every 50 ms by the demo's waits, every second by ``running``)."""
        with self._lock:
            now = self.clock()
            if now - self._last < self.quiet_s:
                return False
            self._last = now
            self.emit(f"{status or self.current} ({now - self._phase_start:.0f} s)")
            return True

    @contextmanager
    def running(self, text: str, interval_s: float = 1.0) -> Iterator[None]:
        """Phase ``text`` around one blocking call: a thread ticks every ``interval_s`` until it returns."""
        self.phase(text)
        done = threading.Event()

        def loop() -> None:
            while not done.wait(interval_s):
                self.tick()

        thread = threading.Thread(target=loop, name="demo-phase", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            thread.join()
