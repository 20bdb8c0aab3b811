"""Rich progress bars on stderr (bytes and files), for the CLI; silent when stderr is not a terminal or --quiet."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


class RichProgress:
    """Implements ``blobstate.model.progress.Progress`` with a rich bar: bytes done / total, speed, files done /
    total."""

    def __init__(self, console: Console | None = None, *, enabled: bool = True) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
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
            TextColumn("[bold]{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
            TextColumn("{task.fields[files]}"), TimeRemainingColumn(), console=self.console, transient=True,
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
