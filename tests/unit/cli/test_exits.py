"""``blobstate.cli.exits``, driven in process (click's ``CliRunner``; no subprocess): each kind of failure is one
redacted line and its exit code, a traceback only with ``BLOBSTATE_DEBUG``, a closed pipe a quiet 141, an
interrupt 130 or 143 with what it left open."""

from __future__ import annotations

import signal

import click
import pytest
from click.testing import CliRunner

from blobstate.cli import exits
from blobstate.errors import ConfigurationError, FencedError, IntegrityError


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """Nothing watched or received yet (a CLI process runs one command); no debug tracebacks."""
    monkeypatch.setattr(exits, "_WATCHED", {})
    monkeypatch.setattr(exits, "INTERRUPTS", [])
    monkeypatch.delenv("BLOBSTATE_DEBUG", raising=False)


def failing(exc: BaseException) -> click.Command:
    @click.command()
    @exits.handle_errors
    def command():
        raise exc

    return command


@pytest.mark.parametrize("exc, code, line", [
    (ConfigurationError("bad option"), 2, "error: ConfigurationError: bad option"),
    (IntegrityError("s3://u:hunter22@b/x damaged"), 3, "error: IntegrityError: s3://***@b/x damaged"),
    (FencedError("another writer"), 4, "error: FencedError: another writer"),
    (ZeroDivisionError("oops"), 1, "error: unexpected ZeroDivisionError: oops (BLOBSTATE_DEBUG=1 for a traceback)"),
    (RuntimeError("An error occurred (NoSuchBucket)"), 6, "error: BucketNotFoundError: the bucket"),
])
def test_each_failure_is_one_line_and_its_exit_code(exc, code, line):
    result = CliRunner().invoke(failing(exc), [])
    assert result.exit_code == code and result.output.startswith(line) and "hunter22" not in result.output
    assert "Traceback" not in result.output


def test_with_debug_the_traceback_is_kept(monkeypatch):
    monkeypatch.setenv("BLOBSTATE_DEBUG", "1")
    result = CliRunner().invoke(failing(ConfigurationError("bad")), [])
    assert isinstance(result.exception, ConfigurationError)


def test_a_closed_output_pipe_exits_quietly_with_141():
    result = CliRunner().invoke(failing(BrokenPipeError()), [])
    assert result.exit_code == exits.EXIT_BROKEN_PIPE == 141 and result.output == ""


def test_an_interrupt_with_no_store_watched_exits_130_or_143(monkeypatch):
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 130 and result.output.strip() == "interrupted (SIGINT)"
    monkeypatch.setattr(exits, "INTERRUPTS", [signal.SIGTERM])
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 143 and result.output.strip() == "terminated (SIGTERM)"


def test_an_interrupt_reports_that_no_commit_of_the_watched_store_is_left_open(tmp_path, monkeypatch):
    monkeypatch.setattr(exits, "INTERRUPTS", [signal.SIGINT, signal.SIGINT])
    exits.watch_store(str(tmp_path / "repo"), "j", "0", "s", str(tmp_path / "work"))
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 130
    assert result.output.strip() == "interrupted (SIGINT) again during cleanup: no commit of j/0/s is left open"
