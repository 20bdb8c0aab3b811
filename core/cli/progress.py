"""Rich progress bars on stderr (bytes and files), for the CLI; silent when stderr is not a terminal or --quiet.

One line that fits the terminal (80 columns included: the label is cut with an ellipsis, the bar takes what is
left), sizes and speed in IEC units (KiB, MiB, GiB), as the CLI's other lines."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Column
from rich.text import Text

from blobstate.config.units import format_size

LABEL_WIDTH = 24  # characters of the label (``upload job/task/store``) shown before it is cut


class SpeedColumn(ProgressColumn):
    """The transfer speed in IEC units (``95.3 MiB/s``), ``?`` before rich has a sample."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("?" if speed is None else f"{format_size(int(speed))}/s", style="progress.data.speed")


class RichProgress:
    """Implements ``blobstate.model.progress.Progress`` with a rich bar: bytes done / total, speed, files done /
    total, time left. ``clock``: seconds (rich's ``get_time``; monotonic by default)."""

    def __init__(self, console: Console | None = None, *, enabled: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.clock = clock
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._files = 0
        self._total_files = 0
        self._lock = threading.Lock()

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        if not self.enabled:
            return
        self._files, self._total_files = 0, total_files
        self._progress = Progress(
            TextColumn("[bold]{task.description}", table_column=Column(max_width=LABEL_WIDTH, no_wrap=True,
                                                                        overflow="ellipsis")),
            BarColumn(bar_width=None, table_column=Column(ratio=1, min_width=5)),
            DownloadColumn(binary_units=True), SpeedColumn(), TextColumn("{task.fields[files]}"),
            TimeRemainingColumn(), console=self.console, transient=True, expand=True, get_time=self.clock,
        )
        self._progress.start()
        self._task = self._progress.add_task(label, total=total_bytes, files=f"0/{total_files} files")

    def advance(self, nbytes: int, nfiles: int = 0) -> None:
        if self._progress is None or self._task is None:
            return
        with self._lock:
            self._files += nfiles
            self._progress.update(self._task, advance=nbytes, files=f"{self._files}/{self._total_files} files")

    def finish(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
