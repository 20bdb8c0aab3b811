"""What the command modules share: error handling and exit codes, option decorators, output helpers.

Exit codes (``blobstate.errors``): 0 ok, 1 error, 2 usage, 3 integrity, 4 fenced, 5 nothing to restore, 6 no
blobstate repository at the URL, 130 interrupted (SIGINT), 143 terminated (SIGTERM), 141 output pipe closed.
Results go to stdout (``--json`` for scripts); progress, messages and errors to stderr. Every message passes
through ``redact`` with the secret values given on this command line, and every id read from a repository is
printed through ``safe`` (no terminal escape sequences).
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from blobstate.errors import EXIT_ERROR, BlobstateError

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

_SECRETS: list[str] = []  # secret option values given on this command line, hidden in every message
#: The store a command is working on, for the message after an interrupt: (repo, job, task, store, work base).
_WATCHED: dict[str, Any] = {}
#: Signals received so far (SIGINT, SIGTERM), in order.
INTERRUPTS: list[int] = []
EXIT_BROKEN_PIPE = 141
# C0 and C1 control characters and Unicode bidirectional overrides: never sent to a terminal as they are.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe(text: object, *, lines: bool = False) -> str:
    """``text`` with control characters (terminal escape sequences, bidi overrides) shown as ``\\xNN`` escapes;
    with ``lines``, newlines and tabs are kept."""
    pattern = _CONTROL_KEEP_LINES if lines else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}",
                       str(text))


def err(message: str) -> None:
    """Print ``message`` on stderr, redacted and without control characters."""
    click.echo(safe(redact(message), lines=True), err=True)


def redact(text: str) -> str:
    """``text`` without credentials (URL userinfo, secret-looking pairs, secrets given on this command line or in
    the environment)."""
    from blobstate.repository.options import environment_secrets
    from blobstate.repository.options import redact as redact_value

    return str(redact_value(text, secrets=[*_SECRETS, *environment_secrets()]))


def watch_store(repo: str | None, job: str, task: str, store: str | None, work_base: str | None) -> None:
    """Remember the store this command works on: an interrupt then reports its unfinished commits."""
    _WATCHED.update(repo=repo, job=job, task=task, store=store, work_base=work_base)


def _report_interrupt() -> int:
    """Print what an interrupt left behind and how to finish it; return the exit code (130 or 143)."""
    signum = INTERRUPTS[0] if INTERRUPTS else signal.SIGINT
    name = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted (SIGINT)"
    code = 128 + int(signum)
    repo, store = _WATCHED.get("repo"), _WATCHED.get("store")
    if not repo or not store:
        err(name)
        return code
    try:
        from blobstate import api

        open_commits = api.unfinished_commits(repo=repo, job=_WATCHED["job"], task=_WATCHED["task"], store=store,
                                              work_base=_WATCHED.get("work_base"))
    except (KeyboardInterrupt, Exception):  # noqa: BLE001 - the report must not hide the interrupt
        open_commits = []
    again = " again during cleanup" if len(INTERRUPTS) > 1 else ""
    if not open_commits:
        err(f"{name}{again}: no commit of {_WATCHED['job']}/{_WATCHED['task']}/{store} is left open")
        return code
    for state in open_commits:
        left = len(state.blob_ids - state.deleted)
        err(f"{name}{again}: commit {state.commit_id} of {state.store_key or store} is left open at "
            f"{state.phase.name} with {left} blob(s) in the repository; they expire with their TTL (`blobstate gc`)")
    job, task = _WATCHED["job"], _WATCHED["task"]
    err(f"to finish or abort it now: blobstate recover --repo {repo} --job {job} --task {task} --store {store} "
        "(the next backup of this store does the same)")
    return code


def _quiet_broken_pipe() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not complain about the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _debug() -> bool:
    """``BLOBSTATE_DEBUG`` as the settings read it; False when the settings themselves are malformed."""
    from blobstate.errors import ConfigurationError
    from blobstate.repository.settings import current

    try:
        return current().debug
    except ConfigurationError:
        return False


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn blobstate errors into ``error: ...`` on stderr and their exit codes (tracebacks with BLOBSTATE_DEBUG);
    an interrupt into what it left and how to recover; a closed output pipe into a quiet exit 141."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except BrokenPipeError:
            _quiet_broken_pipe()
            sys.exit(EXIT_BROKEN_PIPE)
        except BlobstateError as exc:
            if _debug():
                raise
            err(f"error: {type(exc).__name__}: {exc}")
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(_report_interrupt())
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if _debug():
                raise
            from blobstate.repository.storage_errors import translate

            translated = translate(exc, str(_WATCHED.get("repo") or "the repository"))
            if translated is not None:  # a storage fault that reached here without the blob store's wrapper
                err(f"error: {type(translated).__name__}: {translated}")
                sys.exit(translated.exit_code)
            err(f"error: unexpected {type(exc).__name__}: {exc} (BLOBSTATE_DEBUG=1 for a traceback)")
            sys.exit(EXIT_ERROR)

    return wrapper


def storage_options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs to a dict (typed values, dotted keys nest; see ``blobstate.repository.options``); their
    secret values are remembered so that no message shows them."""
    from blobstate.repository.options import parse_options, secret_values

    options = parse_options(values)
    _SECRETS.extend(secret_values(options))
    return options


def log_options(values: tuple[str, ...]) -> dict[str, Any] | None:
    """``--log-option`` pairs (None when there are none: the log then shares the repository's options when it is
    on the same kind of URL)."""
    return storage_options(values) if values else None


def _stack(*decorators: Decorator) -> Decorator:
    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


class HumanUnit(click.ParamType):
    """A positive quantity in human units, converted by ``blobstate.model.units.<parser>``: a duration (``1d``, ``12h``,
    ``90s``, ``500ms``; a plain number is milliseconds) to ms, or a size (``64MiB``, ``1GiB``, ``500MB``; a plain
    number is bytes) to bytes."""

    def __init__(self, name: str, parser: str) -> None:
        self.name = name
        self.parser = parser

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from blobstate.errors import ConfigurationError
        from blobstate.model import units

        try:
            amount = int(getattr(units, self.parser)(value))
        except ConfigurationError as exc:
            self.fail(str(exc), param, ctx)
        if amount < 1:
            self.fail(f"{value!r} is not a positive {self.name}", param, ctx)
        return amount


def Duration() -> HumanUnit:  # noqa: N802 - used like a click type class
    """A duration option's type: ms."""
    return HumanUnit("duration", "parse_duration_ms")


def ByteSize() -> HumanUnit:  # noqa: N802 - used like a click type class
    """A size option's type: bytes."""
    return HumanUnit("size", "parse_size")


def repository(repo: str, log_url: str | None, storage_option: tuple[str, ...],
               log_option: tuple[str, ...]) -> dict[str, Any]:
    """The API's keywords for the repository options: ``repo``, ``log``, ``storage_options``, ``log_options``."""
    return {"repo": repo, "log": log_url, "storage_options": storage_options(storage_option),
            "log_options": log_options(log_option)}


def require_store(store: str | None) -> str:
    """``--store``, which this command needs."""
    if store is None:
        raise click.UsageError("--store is required here")
    return store


#: ``--repo``, ``--log`` and ``--storage-option``.
repo_options = _stack(
    click.option("--repo", required=True, envvar="BLOBSTATE_REPO",
                 help="Repository URL or path (file://, s3://, gs://, az://, ...)."),
    click.option("--log", "log_url", default=None, envvar="BLOBSTATE_LOG",
                 help="Checkpoint log URL (default: the file log inside the repository)."),
    click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
                 help="fsspec storage option for the repository (repeatable; also BLOBSTATE_STORAGE_OPTIONS as JSON)."),
)
log_option = click.option(
    "--log-option", "log_option", multiple=True, metavar="KEY=VALUE",
    help="Option for the checkpoint log's plugin (repeatable; default: the storage options when the log is on the "
         "same kind of URL as the repository).")
#: ``--repo``, ``--log``, ``--storage-option`` and ``--log-option``: every command that opens a repository.
repository_options = _stack(repo_options, log_option)
ttl_mode_option = click.option("--ttl-mode", type=click.Choice(["lease", "native"]), default=None,
                               envvar="BLOBSTATE_TTL_MODE", help="How blob TTLs are kept (default: lease).")
concurrency_option = click.option("--max-concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
                                  envvar="BLOBSTATE_MAX_CONCURRENCY", help="Parallel transfers.")
work_dir_option = click.option("--work-dir", default=None, envvar="BLOBSTATE_WORK_DIR",
                               help="Work directory base (journal, local checkpoints; default: the user state dir).")
#: ``--job``, ``--task``, ``--store``: the store key.
key_options = _stack(
    click.option("--job", default="default", show_default=True, envvar="BLOBSTATE_JOB",
                 help="Job name (store key part 1)."),
    click.option("--task", default="0", show_default=True, envvar="BLOBSTATE_TASK",
                 help="Task name (store key part 2)."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="Store name (store key part 3; default: the directory name)."),
)
#: ``--job``, ``--task``, ``--store`` as filters of a repository-wide command: without ``--store`` every store (of
#: the ``--job``/``--task`` given, if given).
filter_options = _stack(
    click.option("--job", default=None, envvar="BLOBSTATE_JOB", help="Only stores of this job."),
    click.option("--task", default=None, envvar="BLOBSTATE_TASK", help="Only stores of this task."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="One store (with --job, --task; default job 'default', task '0'); default: every store."),
)
checkpoint_option = click.option(
    "--checkpoint", default=None, envvar="BLOBSTATE_CHECKPOINT", metavar="CHECKPOINT",
    help="latest (default), a checkpoint id, a unique prefix of one, or a generation number.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary on stderr.")


def store_key(job: str, task: str, store: str | None, directory: str | None = None) -> Any:
    """The ``StoreKey`` the options name (``--store`` defaults to ``directory``'s name where there is one)."""
    from blobstate.model.records import StoreKey

    if store is None and directory is None:
        raise click.UsageError("--store is required here")
    if directory is None:
        return StoreKey(job, task, store)  # type: ignore[arg-type]
    return StoreKey.for_directory(directory, job=job, task=task, store=store)


def store_work_dir(base: str | None, repo: str, key: Any) -> str | None:
    """The store's work directory under ``--work-dir`` (None: the API's default)."""
    if base is None:
        return None
    from blobstate.local.workdir import store_work_dir as work_dir_of
    from blobstate.repository.backends import normalize_url

    return work_dir_of(normalize_url(repo), key, base)


def emit(as_json: bool, payload: Any, text: str) -> None:
    """Print ``payload`` as JSON, or ``text`` (control characters escaped), on stdout."""
    click.echo(json.dumps(payload, indent=2) if as_json else safe(text, lines=True))


#: Variables with which rich draws on a stderr that is not a terminal (rich's ``Console``: FORCE_COLOR, ...).
_RICH_FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


def progress(quiet: bool) -> Any:
    """Rich progress bars on stderr (silent with ``quiet`` or when stderr is not a terminal). rich is imported only
    when it may draw: a quiet or scripted command does not pay for it."""
    if quiet or not (_isatty(sys.stderr) or any(os.environ.get(v) for v in _RICH_FORCING)):
        from blobstate.model.progress import NoProgress

        return NoProgress()
    from blobstate.cli.progress import RichProgress

    return RichProgress(enabled=True)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False
