"""``blobstate.cli.progress_lines.LineProgress``: plain lines on a real pipe, one per interval of a clock the test
moves (no sleeps), none for a transfer that ends sooner; and the CLI chooses it when stderr is a pipe."""

from __future__ import annotations

import io
import os
import sys

import pytest

from blobstate.cli import output
from blobstate.cli.progress_lines import LineProgress
from blobstate.model.progress import NoProgress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    writer = os.fdopen(write_fd, "w")
    reader = os.fdopen(read_fd)
    yield writer, reader
    writer.close()
    reader.close()


def read_lines(writer, reader) -> list[str]:
    writer.close()
    return reader.read().splitlines()


def test_one_line_per_interval_on_a_pipe(pipe):
    writer, reader = pipe
    clock = Clock()
    progress = LineProgress(writer, interval_s=10, clock=clock, ticker=False)
    progress.start("upload default/0/s", 4 << 30, 40)
    progress.advance(1 << 30, 10)  # at once: no line yet
    clock.now += 9.9
    progress.advance(0, 2)
    clock.now += 0.1  # 10 s since the start
    progress.advance(512 << 20)
    clock.now += 5
    progress.tick()  # 15 s: within the interval of the last line
    clock.now += 5
    progress.tick()  # 20 s: the second line, with no byte moved since (a stalled transfer still reports)
    progress.finish()
    clock.now += 60
    progress.tick()  # after the end: nothing
    lines = read_lines(writer, reader)
    assert lines == [
        "upload default/0/s: 1.5 GiB of 4.0 GiB (37%), 12/40 files, 153.6 MiB/s, 16.7 s left",
        "upload default/0/s: 1.5 GiB of 4.0 GiB (37%), 12/40 files, 76.8 MiB/s, 33.3 s left",
    ]


def test_a_transfer_shorter_than_the_interval_writes_nothing(pipe):
    writer, reader = pipe
    clock = Clock()
    progress = LineProgress(writer, interval_s=10, clock=clock, ticker=False)
    progress.start("download default/0/s", 100, 1)
    clock.now += 3
    progress.advance(100, 1)
    progress.finish()
    assert read_lines(writer, reader) == []


def test_the_ticker_thread_stops_with_the_transfer(pipe):
    writer, _ = pipe
    progress = LineProgress(writer, interval_s=3600)
    progress.start("upload x", 10, 1)
    thread = progress._thread
    assert thread is not None and thread.is_alive()
    progress.finish()
    assert not thread.is_alive()


def test_a_closed_log_does_not_fail_the_transfer():
    stream = io.StringIO()
    clock = Clock()
    progress = LineProgress(stream, interval_s=1, clock=clock, ticker=False)
    progress.start("upload x", 10, 1)
    stream.close()
    clock.now += 2
    progress.advance(5)  # writing raises ValueError inside: swallowed
    progress.finish()


def test_the_cli_writes_lines_when_stderr_is_a_pipe(pipe, monkeypatch):
    writer, _ = pipe
    monkeypatch.setattr(sys, "stderr", writer)
    for variable in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(variable, raising=False)
    chosen = output.progress(False)
    assert isinstance(chosen, LineProgress) and chosen.stream is writer and chosen.interval_s == 10
    assert isinstance(output.progress(True), NoProgress)  # --quiet
    monkeypatch.setenv("BLOBSTATE_PROGRESS_INTERVAL_S", "0")
    assert isinstance(output.progress(False), NoProgress)  # 0 turns the lines off
