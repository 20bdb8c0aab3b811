"""Progress a log can read: one plain line every few seconds on a stream that is not a terminal (cron, nohup, a
Kubernetes pod's log), like rclone's ``--stats``; the CLI's choice when it cannot draw a bar."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

from blobstate.config.settings import DEFAULT_PROGRESS_INTERVAL_S
from blobstate.config.units import format_duration, format_size


class LineProgress:
    """Implements ``blobstate.model.progress.Progress`` with a line on ``stream`` at most every ``interval_s``
    seconds (of ``clock``, monotonic seconds), e.g.
    ``upload default/0/s: 1.5 GiB of 4.0 GiB (37%), 12/40 files, 95.3 MiB/s, 26.2 s left``.

    A line is written when ``advance`` or ``tick`` finds ``interval_s`` passed since the transfer started or the
    last line; with ``ticker`` a daemon thread calls ``tick`` every ``interval_s``, so a stalled transfer still
    says where it is. Nothing is written for a transfer that ends within ``interval_s`` (the command's own last
    line says what it did). Sizes in IEC units (KiB, MiB), as every other line of the CLI. Thread-safe."""

    def __init__(self, stream: TextIO, *, interval_s: float = DEFAULT_PROGRESS_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic, ticker: bool = True) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self.clock = clock
        self.ticker = ticker
        self._lock = threading.Lock()
        self._label = ""
        self._total_bytes = self._total_files = self._bytes = self._files = 0
        self._started = self._last = 0.0
        self._running = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        with self._lock:
            self._label, self._total_bytes, self._total_files = label, total_bytes, total_files
            self._bytes = self._files = 0
            self._started = self._last = self.clock()
            self._running = True
        if self.ticker:
            self._stop.clear()
            self._thread = threading.Thread(target=self._tick_until_stopped, name="blobstate-progress", daemon=True)
            self._thread.start()

    def advance(self, nbytes: int, nfiles: int = 0) -> None:
        with self._lock:
            if not self._running:
                return
            self._bytes += nbytes
            self._files += nfiles
        self.tick()

    def tick(self) -> None:
        """Write a line when ``interval_s`` passed since the last one (or the start)."""
        with self._lock:
            now = self.clock()
            if not self._running or now - self._last < self.interval_s:
                return
            self._last = now
            line = self._line(now)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed log: progress is not worth failing the transfer for
            pass

    def finish(self) -> None:
        with self._lock:
            self._running = False
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self._bytes / elapsed
        share = f" ({100 * self._bytes // self._total_bytes}%)" if self._total_bytes else ""
        left = ""
        if rate > 0 and self._total_bytes > self._bytes:
            left = f", {format_duration((self._total_bytes - self._bytes) / rate * 1000)} left"
        return (f"{self._label}: {format_size(self._bytes)} of {format_size(self._total_bytes)}{share}, "
                f"{self._files}/{self._total_files} files, {format_size(int(rate))}/s{left}")

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.tick()
