"""What a command prints, and how: results on stdout (JSON with ``--json``, else text), messages on stderr, every
message redacted and every text shown without control characters; a read command's rows (JSON, else "no ...",
else a table) written once for all of them; and the progress display a command's transfers report to.

Every message passes through ``redact`` with the secret values given on this command line (``hide``) and in the
environment, and every id read from a repository is printed through ``safe`` (no terminal escape sequences).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import click

from blobstate.cli.command_settings import settings
from blobstate.model.progress import NoProgress

_SECRETS: list[str] = []  # secret option values given on this command line, hidden in every message
# C0 and C1 control characters and Unicode bidirectional overrides: never sent to a terminal as they are.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: object, *, lines: bool = False) -> str:
    """``text`` with control characters (terminal escape sequences, bidi overrides) shown as ``\\xNN`` escapes;
    with ``lines``, newlines and tabs are kept."""
    pattern = _CONTROL_KEEP_LINES if lines else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                       str(text))


def hide(values: Iterable[str]) -> None:
    """Remember secret ``values`` given on this command line (storage option credentials): no message shows them."""
    _SECRETS.extend(values)


def redact(text: str) -> str:
    """``text`` without credentials (URL userinfo, secret-looking pairs, secrets given on this command line or in
    the environment)."""
    from blobstate.config.options import environment_secrets
    from blobstate.config.options import redact as redact_value

    return str(redact_value(text, secrets=[*_SECRETS, *environment_secrets()]))


def err(message: str) -> None:
    """Print ``message`` on stderr, redacted and without control characters."""
    click.echo(safe(redact(message), lines=True), err=True)


def emit(as_json: bool, payload: Any, text: str) -> None:
    """Print ``payload`` as JSON, or ``text`` (control characters escaped), on stdout."""
    click.echo(json.dumps(payload, indent=2) if as_json else safe(text, lines=True))


def show_rows(as_json: bool, rows: Sequence[Any], *, empty: str, lines: Callable[[Any], list[str]],
              header: str | None = None, json_of: Callable[[Any], Any] | None = None) -> None:
    """What a read command prints for ``rows`` (summaries, reports): with ``as_json`` each row as JSON
    (``json_of(row)``, default ``row.to_json()``) on stdout; else ``empty`` on stderr when there is none; else the
    ``header`` and each row's ``lines(row)`` on stdout."""
    if as_json:
        emit(True, [json_of(r) if json_of is not None else r.to_json() for r in rows], "")
    elif not rows:
        err(empty)
    else:
        emit(False, None, "\n".join(([header] if header is not None else []) + [ln for r in rows for ln in lines(r)]))


def progress(quiet: bool) -> Any:
    """Rich progress bars on stderr when it is a terminal (or rich's FORCE_COLOR, TTY_COMPATIBLE, TTY_INTERACTIVE
    say to draw); otherwise a plain line every ``Settings.progress_interval_s`` (``LineProgress``: what a log can
    read; 0 turns them off); nothing with ``quiet``. rich is imported only to draw: a script does not pay for it."""
    if quiet:
        return NoProgress()
    try:
        drawable = sys.stderr.isatty() or any(os.environ.get(v) for v in
                                              ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"))
    except (AttributeError, ValueError):  # a closed or replaced stream
        return NoProgress()
    if drawable:
        from blobstate.cli.progress import RichProgress

        return RichProgress(enabled=True)
    interval_s = settings().progress_interval_s
    if interval_s <= 0:
        return NoProgress()
    from blobstate.cli.progress_lines import LineProgress

    return LineProgress(sys.stderr, interval_s=interval_s)
