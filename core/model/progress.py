"""Progress reporting for long transfers: the protocol the pipelines call, and a silent default.

The CLI passes ``blobstate.cli.progress.RichProgress`` (bars on stderr); the API takes any object with these
three methods. Sizes are in bytes.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Progress of one transfer: ``start`` once, ``advance`` as bytes and whole files complete, ``finish`` once."""

    def start(self, label: str, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int, nfiles: int = 0) -> None: ...

    def finish(self) -> None: ...


class NoProgress:
    """A ``Progress`` that reports nothing (the default outside the CLI)."""

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        pass

    def advance(self, nbytes: int, nfiles: int = 0) -> None:
        pass

    def finish(self) -> None:
        pass
