"""``blobstate.cli.common``'s pure helpers, driven in process (click's ``CliRunner`` for the option types and the
error handler; no subprocess): control characters escaped before a terminal sees them, every message redacted, the
exit code of each kind of failure, the human-unit and ``--keep-*`` types, retention from the options, the store key,
progress only where it can be drawn, and ``--key-file`` lasting exactly the command."""

from __future__ import annotations

import json
import os
import signal

import click
import pytest
from click.testing import CliRunner

from blobstate.cli import common as c
from blobstate.cli.progress import RichProgress
from blobstate.errors import ConfigurationError, FencedError, IntegrityError
from blobstate.model.progress import NoProgress
from blobstate.model.records import StoreKey
from blobstate.model.retention import RetentionPolicy


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch):
    """The module's per-command state starts empty (a CLI process runs one command)."""
    monkeypatch.setattr(c, "_SECRETS", [])
    monkeypatch.setattr(c, "_WATCHED", {})
    monkeypatch.setattr(c, "INTERRUPTS", [])
    monkeypatch.delenv("BLOBSTATE_DEBUG", raising=False)


@pytest.mark.parametrize("text, shown", [
    ("plain text é", "plain text é"), ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"), ("a\nb\tc", "a\\x0ab\\x09c"),
    ("bell\x07 del\x7f c1\x9b", "bell\\x07 del\\x7f c1\\x9b"), ("\u202eevil\u2066", "\\u202eevil\\u2066"), (5, "5"),
])
def test_control_characters_are_escaped(text, shown):
    assert c.safe(text) == shown


def test_with_lines_newlines_and_tabs_stay():
    assert c.safe("a\nb\tc\r\x1b", lines=True) == "a\nb\tc\\x0d\\x1b"


def test_a_message_is_redacted_escaped_and_on_stderr(capsys, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")
    c.storage_options(("secret=given-on-the-command-line", "anon=true"))
    c.err("s3://u:pw@b/r wJalrXUtnFEMI given-on-the-command-line \x1b[2J\nnext line")
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "s3://***@b/r *** *** \\x1b[2J\nnext line\n"


def test_storage_options_remember_their_secret_values_and_log_options_may_be_none():
    assert c.storage_options(("client_kwargs.token=tok-123", "region=eu")) == {"client_kwargs": {"token": "tok-123"},
                                                                               "region": "eu"}
    assert c._SECRETS == ["tok-123"]
    assert c.log_options(()) is None and c.log_options(("table=t",)) == {"table": "t"}
    options = c.repository("file:///r", None, ("a=1",), ())
    assert options.pop("settings") is not None
    assert options == {"repo": "file:///r", "log": None, "storage_options": {"a": 1}, "log_options": None}


def test_stack_applies_decorators_in_the_order_written():
    calls = []

    def mark(name):
        def decorator(fn):
            calls.append(name)
            return fn
        return decorator

    c.stack(mark("a"), mark("b"), mark("c"))(lambda: None)
    assert calls == ["c", "b", "a"]  # the innermost (last written) first: as if written one above the other


def run(command: click.Command, *args: str, **env: str):
    return CliRunner().invoke(command, list(args), env=env or None, catch_exceptions=False)


def test_duration_and_size_options_convert_to_ms_and_bytes_and_refuse_the_rest():
    @click.command()
    @click.option("--ttl", type=c.Duration())
    @click.option("--chunk", type=c.ByteSize())
    def command(ttl, chunk):
        click.echo(json.dumps([ttl, chunk]))

    assert json.loads(run(command, "--ttl", "1h30m", "--chunk", "64MiB").output) == [5_400_000, 64 << 20]
    assert json.loads(run(command, "--ttl", "500", "--chunk", "4096").output) == [500, 4096]
    for args, why in [(["--ttl", "soon"], "not a duration"), (["--ttl", "0"], "'0' is not a positive duration"),
                      (["--chunk", "lots"], "not a size"), (["--chunk", "0B"], "is not a positive size")]:
        result = run(command, *args)
        assert result.exit_code == 2 and why in result.output, result.output


@pytest.mark.parametrize("value, count", [("all", -1), ("Unlimited", -1), (" -1 ", -1), ("3", 3), (7, 7)])
def test_a_keep_count_is_a_number_or_all(value, count):
    assert c.KeepCount().convert(value, None, None) == count


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_a_keep_count_refuses_anything_else(value):
    with pytest.raises(click.BadParameter, match=f"{value!r} is not a count"):
        c.KeepCount().convert(value, None, None)


def policy_of(**params):
    with click.Context(click.Command("x"), obj=None) as ctx:
        ctx.params.update(params)
        return c.retention_policy()


def test_retention_comes_from_retain_and_the_keep_options():
    assert policy_of(retain=None, keep_last=None, keep_daily=None) is None
    assert policy_of(retain=4, keep_last=None) == RetentionPolicy(last=4)
    assert policy_of(retain=None, keep_daily=7, keep_within="2d") == RetentionPolicy(daily=7, within="2d")
    assert policy_of(retain=3, keep_last=3) == RetentionPolicy(last=3)
    with pytest.raises(click.UsageError, match="--retain 3 and --keep-last 5 disagree: give one"):
        policy_of(retain=3, keep_last=5)
    with pytest.raises(click.BadParameter):
        policy_of(keep_within="soon")


def test_the_store_key_defaults_its_store_to_the_directorys_name(tmp_path):
    assert c.store_key("j", "t", "s") == StoreKey("j", "t", "s")
    assert c.store_key("j", "t", None, str(tmp_path / "mystore")) == StoreKey("j", "t", "mystore")
    assert c.store_key("j", "t", "named", str(tmp_path / "dir")) == StoreKey("j", "t", "named")
    with pytest.raises(click.UsageError, match="--store is required here"):
        c.store_key("j", "t", None)
    with pytest.raises(click.UsageError, match="--store is required here"):
        c.require_store(None)
    assert c.require_store("s") == "s"


def test_emit_prints_json_or_escaped_text(capsys):
    c.emit(True, {"a": [1, "\x1b"]}, "ignored")
    c.emit(False, {"ignored": True}, "line\x1b[0m\nnext")
    out = capsys.readouterr().out
    assert out == json.dumps({"a": [1, "\x1b"]}, indent=2) + "\n" + "line\\x1b[0m\nnext\n"


def test_progress_is_drawn_only_where_it_can_be(monkeypatch):
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    assert isinstance(c.progress(quiet=False), NoProgress)  # pytest's stderr is no terminal
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert isinstance(c.progress(quiet=False), RichProgress)
    assert isinstance(c.progress(quiet=True), NoProgress)


def failing(exc: BaseException) -> click.Command:
    @click.command()
    @c.handle_errors
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
    assert result.exit_code == c.EXIT_BROKEN_PIPE == 141 and result.output == ""


def test_an_interrupt_with_no_store_watched_exits_130_or_143(monkeypatch):
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 130 and result.output.strip() == "interrupted (SIGINT)"
    monkeypatch.setattr(c, "INTERRUPTS", [signal.SIGTERM])
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 143 and result.output.strip() == "terminated (SIGTERM)"


def test_an_interrupt_reports_that_no_commit_of_the_watched_store_is_left_open(tmp_path, monkeypatch):
    monkeypatch.setattr(c, "INTERRUPTS", [signal.SIGINT, signal.SIGINT])
    c.watch_store(str(tmp_path / "repo"), "j", "0", "s", str(tmp_path / "work"))
    result = CliRunner().invoke(failing(KeyboardInterrupt()), [])
    assert result.exit_code == 130
    assert result.output.strip() == "interrupted (SIGINT) again during cleanup: no commit of j/0/s is left open"


def test_a_key_file_is_the_commands_setting_and_never_an_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("BLOBSTATE_KEY_FILE", raising=False)
    seen = []

    @click.command()
    @c.key_file_option
    def command():
        seen.append((c.settings().key_file, os.environ.get("BLOBSTATE_KEY_FILE")))

    run(command, "--key-file", "~/k.key", HOME=str(tmp_path))
    assert seen == [(str(tmp_path / "k.key"), None)]
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", "/before.key")
    run(command, "--key-file", "/other.key")
    run(command)
    assert seen[1:] == [("/other.key", "/before.key"), ("/before.key", "/before.key")]


def test_a_commands_settings_are_built_once_from_the_environment_and_its_options(monkeypatch, tmp_path):
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "env"))
    seen = []

    @click.command()
    @click.option("--work-dir", default=None)
    @click.option("--retain", type=int, default=None)
    def command(work_dir, retain):
        c.record_command("backup", {"work_dir": work_dir, "retain": retain})
        seen.append((c.settings(), c.settings()))

    run(command, "--retain", "3")
    run(command, "--work-dir", str(tmp_path / "cli"))
    (first, again), (second, _) = seen
    assert first is again and first.command == "backup" and first.options["retain"] == 3
    assert first.work_dir == str(tmp_path / "env") and second.work_dir == str(tmp_path / "cli")
    assert c.repository("file:///r", None, (), ())["settings"].command is None  # outside a command: the environment's
