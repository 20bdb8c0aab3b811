"""``blobstate.cli.output``: control characters escaped before a terminal sees them, every message redacted (secrets
given on the command line and in the environment), results as JSON or escaped text, a read command's rows (JSON, else
"no ...", else a table), and progress drawn only where it can be."""

from __future__ import annotations

import json

import pytest

from blobstate.cli import output
from blobstate.cli.progress import RichProgress
from blobstate.cli.progress_lines import LineProgress
from blobstate.model.progress import NoProgress


@pytest.fixture(autouse=True)
def no_secrets_yet(monkeypatch):
    """The secrets of this command line start empty (a CLI process runs one command)."""
    monkeypatch.setattr(output, "_SECRETS", [])


@pytest.mark.parametrize("text, shown", [
    ("plain text é", "plain text é"), ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"), ("a\nb\tc", "a\\x0ab\\x09c"),
    ("bell\x07 del\x7f c1\x9b", "bell\\x07 del\\x7f c1\\x9b"), ("\u202eevil\u2066", "\\u202eevil\\u2066"), (5, "5"),
])
def test_control_characters_are_escaped(text, shown):
    assert output.safe(text) == shown


def test_with_lines_newlines_and_tabs_stay():
    assert output.safe("a\nb\tc\r\x1b", lines=True) == "a\nb\tc\\x0d\\x1b"


def test_a_message_is_redacted_escaped_and_on_stderr(capsys, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI")
    output.hide(["given-on-the-command-line"])
    output.err("s3://u:pw@b/r wJalrXUtnFEMI given-on-the-command-line \x1b[2J\nnext line")
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == "s3://***@b/r *** *** \\x1b[2J\nnext line\n"


def test_emit_prints_json_or_escaped_text(capsys):
    output.emit(True, {"a": [1, "\x1b"]}, "ignored")
    output.emit(False, {"ignored": True}, "line\x1b[0m\nnext")
    out = capsys.readouterr().out
    assert out == json.dumps({"a": [1, "\x1b"]}, indent=2) + "\n" + "line\\x1b[0m\nnext\n"


def test_progress_is_drawn_only_where_it_can_be(monkeypatch):
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)
    assert isinstance(output.progress(quiet=False), LineProgress)  # pytest's stderr is no terminal: lines a log reads
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert isinstance(output.progress(quiet=False), RichProgress)
    assert isinstance(output.progress(quiet=True), NoProgress)


class _Row:
    def __init__(self, name: str) -> None:
        self.name = name

    def to_json(self) -> dict[str, str]:
        return {"name": self.name}


def test_a_read_commands_rows_are_json_else_a_line_for_none_else_a_table(capsys):
    rows = [_Row("a"), _Row("b\x1b")]
    output.show_rows(True, rows, empty="no rows", lines=lambda r: [r.name])
    assert json.loads(capsys.readouterr().out) == [{"name": "a"}, {"name": "b\x1b"}]
    output.show_rows(True, rows, empty="no rows", lines=lambda r: [r.name], json_of=lambda r: r.name.upper())
    assert json.loads(capsys.readouterr().out) == ["A", "B\x1b"]
    output.show_rows(True, [], empty="no rows", lines=lambda r: [r.name])
    assert capsys.readouterr().out.strip() == "[]"  # JSON says "none" as an empty list, on stdout
    output.show_rows(False, [], empty="no rows", lines=lambda r: [r.name])
    assert capsys.readouterr() == ("", "no rows\n")  # the text says it on stderr; stdout stays empty
    output.show_rows(False, rows, empty="no rows", lines=lambda r: [r.name, "  more"], header="NAME")
    assert capsys.readouterr().out == "NAME\na\n  more\nb\\x1b\n  more\n"
