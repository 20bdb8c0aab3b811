"""What the command modules share: error handling and exit codes, option decorators, output helpers.

Exit codes (``blobstate.errors``): 0 ok, 1 error, 2 usage, 3 integrity, 4 fenced, 5 nothing to restore, 6 no
blobstate repository at the URL, 130 interrupted (SIGINT), 143 terminated (SIGTERM), 141 output pipe closed.

Settings: a command builds what it runs with once (``settings``: the ``BLOBSTATE_*`` environment and the command's
options, ``--key-file`` included) and hands it to every API call it makes (``repository`` puts it among the
keywords), never a variable set for it in the environment.
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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from blobstate.errors import EXIT_ERROR, BlobstateError
from blobstate.model.progress import NoProgress

if TYPE_CHECKING:
    from blobstate.config.settings import Settings

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
    from blobstate.config.options import environment_secrets
    from blobstate.config.options import redact as redact_value

    return str(redact_value(text, secrets=[*_SECRETS, *environment_secrets()]))


#: CLI parameter names that differ from the API's (the settings hold a command's options under the API's names).
_RENAMED = {"log_url": "log", "as_json": "json", "work_dir": "work_base"}
_COMMAND = "blobstate.command"  # click context meta: (command name, its options under the API's names)
_SETTINGS = "blobstate.settings"  # click context meta: the command's settings, once built
_KEY_FILE_META = "blobstate.key_file"  # click context meta: --key-file


def record_command(command: str, options: dict[str, Any]) -> None:
    """Record the command being run and its options (under the API's names) for ``settings``."""
    meta = click.get_current_context().meta
    meta[_COMMAND] = (command, {_RENAMED.get(name, name): value for name, value in options.items()})
    meta.pop(_SETTINGS, None)


def settings() -> Settings:
    """What this command runs with, built once (on first use, so a malformed variable is reported by
    ``handle_errors``): the ``BLOBSTATE_*`` environment with the command's options (``record_command``) and
    ``--key-file``. Raises ``ConfigurationError``."""
    from blobstate.config.settings import Settings

    ctx = click.get_current_context(silent=True)
    meta: dict[str, Any] = ctx.meta if ctx is not None else {}
    built = meta.get(_SETTINGS)
    if built is None:
        command, options = meta.get(_COMMAND, (None, {}))
        key_file = meta.get(_KEY_FILE_META)
        built = Settings.from_environ().with_options(command, **options, **({"key_file": key_file} if key_file
                                                                             else {}))
        meta[_SETTINGS] = built
    return built


def watch_store(repo: str | None, job: str, task: str | None, store: str | None, work_base: str | None,
                options: dict[str, Any] | None = None) -> None:
    """Remember the store this command works on (``options``: its storage options): an interrupt then reports its
    unfinished commits and the objects they left. ``task`` None: a reader's store found under ``0`` or ``group``
    (``blobstate.entry.find_store``): the report looks under both."""
    _WATCHED.update(repo=repo, job=job, task=task, store=store, work_base=work_base, options=options)


def _objects_left(state: Any) -> list[str] | None:
    """The objects open commit ``state`` left in the watched repository (``recover.objects_left``); None when the
    store does not answer (the message then gives the journal's count)."""
    try:
        from blobstate.commit.recover import objects_left
        from blobstate.model.records import StoreKey
        from blobstate.repository.backends import open_blob_store

        blob_store = open_blob_store(str(_WATCHED["repo"]), settings=settings(),
                                     storage_options=_WATCHED.get("options"))
        try:
            key = StoreKey(_WATCHED["job"], _WATCHED["task"], _WATCHED["store"])
            return objects_left(blob_store, key, state)
        finally:
            blob_store.close()
    except (KeyboardInterrupt, Exception):  # noqa: BLE001 - the report must not hide the interrupt
        return None


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
        from blobstate.entry import DEFAULT_TASKS

        tasks = [_WATCHED["task"]] if _WATCHED["task"] is not None else list(DEFAULT_TASKS)
        open_commits = [state for task in tasks for state in api.unfinished_commits(
            repo=repo, job=_WATCHED["job"], task=task, store=store, work_base=_WATCHED.get("work_base"),
            settings=settings())]
        if open_commits and _WATCHED["task"] is None:
            _WATCHED["task"] = str(open_commits[0].store_key).split("/")[1] if open_commits[0].store_key else "0"
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - the report must not hide the interrupt
        open_commits = None
        unread = f"{type(exc).__name__}: {exc}"
    again = " again during cleanup" if len(INTERRUPTS) > 1 else ""
    if open_commits == []:
        err(f"{name}{again}: no commit of {_WATCHED['job']}/{_WATCHED['task']}/{store} is left open")
        return code
    if open_commits is None:
        err(f"{name}{again}: the journal of {_WATCHED['job']}/{_WATCHED['task']}/{store} could not be read ({unread}); "
            "a commit may be left open")
    for state in open_commits or []:
        left = _objects_left(state)
        what = (f"{len(left)} blob(s) in the repository" + (f": {', '.join(left[:10])}" if left else "") +
                (f" and {len(left) - 10} more" if len(left) > 10 else "")) if left is not None else \
            f"up to {len(state.blob_ids - state.deleted)} blob(s) in the repository (the store did not answer)"
        err(f"{name}{again}: commit {state.commit_id} of {state.store_key or store} is left open at "
            f"{state.phase.name} with {what}; they expire with their TTL (`blobstate gc`)")
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
    """``BLOBSTATE_DEBUG`` as the command's settings read it; False when the settings themselves are malformed."""
    from blobstate.errors import ConfigurationError

    try:
        return settings().debug
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
            from blobstate.repository.translate import translate

            translated = translate(exc, str(_WATCHED.get("repo") or "the repository"))
            if translated is not None:  # a storage fault that reached here without the blob store's wrapper
                err(f"error: {type(translated).__name__}: {translated}")
                sys.exit(translated.exit_code)
            err(f"error: unexpected {type(exc).__name__}: {exc} (BLOBSTATE_DEBUG=1 for a traceback)")
            sys.exit(EXIT_ERROR)

    return wrapper


def storage_options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs to a dict (typed values, dotted keys nest; see ``blobstate.config.options``); their
    secret values are remembered so that no message shows them."""
    from blobstate.config.options import parse_options, secret_values

    options = parse_options(values)
    _SECRETS.extend(secret_values(options))
    return options


def log_options(values: tuple[str, ...]) -> dict[str, Any] | None:
    """``--log-option`` pairs (None when there are none: the log then shares the repository's options when it is
    on the same kind of URL)."""
    return storage_options(values) if values else None


def stack(*decorators: Decorator) -> Decorator:
    """One decorator applying ``decorators`` in the order written (options listed in that order in ``--help``)."""
    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


class HumanUnit(click.ParamType):
    """A positive quantity in human units, converted by ``blobstate.config.units.<parser>``: a duration (``1d``,
    ``12h``, ``90s``, ``500ms``; a plain number is milliseconds) to ms, or a size (``64MiB``, ``1GiB``, ``500MB``; a
    plain number is bytes) to bytes."""

    def __init__(self, name: str, parser: str) -> None:
        self.name = name
        self.parser = parser

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        from blobstate.config import units
        from blobstate.errors import ConfigurationError

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
    """The API's keywords for the repository options: ``repo``, ``log``, ``storage_options``, ``log_options``, and
    the command's ``settings``."""
    return {"repo": repo, "log": log_url, "storage_options": storage_options(storage_option),
            "log_options": log_options(log_option), "settings": settings()}


def require_store(store: str | None) -> str:
    """``--store``, which this command needs."""
    if store is None:
        raise click.UsageError("--store is required here")
    return store


_KEY_FILE = "BLOBSTATE_KEY_FILE"


def _use_key_file(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--key-file FILE`` goes into this command's settings (``settings().key_file``, over
    ``BLOBSTATE_KEY_FILE``), so the repository opens with it wherever the command opens one (a Spark job's
    executors get it with the settings each task is sent)."""
    if value:
        ctx.meta[_KEY_FILE_META] = value
        ctx.meta.pop(_SETTINGS, None)


#: ``--key-file``: the key file of an encrypted repository (a new repository is created encrypted with it).
key_file_option = click.option(
    "--key-file", envvar=_KEY_FILE, metavar="FILE", expose_value=False, callback=_use_key_file,
    help="Key file of an encrypted repository (a repository created with a key is encrypted; see `blobstate init "
         "--encrypt`).")

#: ``--repo``, ``--log``, ``--storage-option`` and ``--key-file``.
repo_options = stack(
    click.option("--repo", required=True, envvar="BLOBSTATE_REPO",
                 help="Repository URL or path (file://, s3://, gs://, az://, ...)."),
    click.option("--log", "log_url", default=None, envvar="BLOBSTATE_LOG",
                 help="Checkpoint log URL (default: the file log inside the repository)."),
    click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
                 help="fsspec storage option for the repository (repeatable; also BLOBSTATE_STORAGE_OPTIONS as JSON)."),
    key_file_option,
)
log_option = click.option(
    "--log-option", "log_option", multiple=True, metavar="KEY=VALUE",
    help="Option for the checkpoint log's plugin (repeatable; default: the storage options when the log is on the "
         "same kind of URL as the repository).")
#: ``--repo``, ``--log``, ``--storage-option`` and ``--log-option``: every command that opens a repository.
repository_options = stack(repo_options, log_option)
ttl_mode_option = click.option("--ttl-mode", type=click.Choice(["lease", "native"]), default=None,
                               envvar="BLOBSTATE_TTL_MODE", help="How blob TTLs are kept (default: lease).")
concurrency_option = click.option("--max-concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
                                  envvar="BLOBSTATE_MAX_CONCURRENCY", help="Parallel transfers.")
work_dir_option = click.option("--work-dir", default=None, envvar="BLOBSTATE_WORK_DIR",
                               help="Work directory base (journal, local checkpoints; default: the user state dir).")
#: ``--job``, ``--task``, ``--store``: the store key.
key_options = stack(
    click.option("--job", default="default", show_default=True, envvar="BLOBSTATE_JOB",
                 help="Job name (store key part 1)."),
    click.option("--task", default="0", show_default=True, envvar="BLOBSTATE_TASK",
                 help="Task name (store key part 2)."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="Store name (store key part 3; default: the directory name)."),
)
#: ``--job``, ``--task``, ``--store`` of a command that reads one store: without ``--task`` the store is found under
#: task ``0`` or ``group`` (a partitioned store), whichever holds checkpoints (``blobstate.entry.find_store``).
read_key_options = stack(
    click.option("--job", default="default", show_default=True, envvar="BLOBSTATE_JOB",
                 help="Job name (store key part 1)."),
    click.option("--task", default=None, envvar="BLOBSTATE_TASK",
                 help="Task name (store key part 2; default: 0, or group for a partitioned store, whichever holds "
                      "checkpoints)."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="Store name (store key part 3; default: the directory name)."),
)
#: ``--job``, ``--task``, ``--store`` as filters of a repository-wide command: without ``--store`` every store (of
#: the ``--job``/``--task`` given, if given).
filter_options = stack(
    click.option("--job", default=None, envvar="BLOBSTATE_JOB", help="Only stores of this job."),
    click.option("--task", default=None, envvar="BLOBSTATE_TASK", help="Only stores of this task."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="One store (with --job, --task; default job 'default', task '0'); default: every store."),
)
checkpoint_option = click.option(
    "--checkpoint", default=None, envvar="BLOBSTATE_CHECKPOINT", metavar="CHECKPOINT",
    help="latest (default), a checkpoint id, a unique prefix of one, or a generation number.")
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")


class KeepCount(click.ParamType):
    """A ``--keep-*`` count: a number >= 1, or ``all`` (-1: every bucket, restic's ``unlimited``)."""

    name = "count"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        if str(value).strip().lower() in ("all", "unlimited", "-1"):
            return -1
        try:
            count = int(value)
        except ValueError:
            self.fail(f"{value!r} is not a count (a number >= 1, or 'all')", param, ctx)
        if count < 1:
            self.fail(f"{value!r} is not a count (a number >= 1, or 'all')", param, ctx)
        return count


#: ``--keep-last/-within/-hourly/-daily/-weekly/-monthly/-yearly``: restic's ``forget`` rules
#: (``blobstate.model.retention``); ``retention_policy`` turns them (and ``--retain``) into the API's ``retention``.
KEEP_RULES = {"last": "", "hourly": "hours", "daily": "days", "weekly": "ISO weeks", "monthly": "months",
              "yearly": "years"}
keep_options = stack(
    click.option("--keep-within", "keep_within", default=None, envvar="BLOBSTATE_KEEP_WITHIN", metavar="DURATION",
                 help="Keep every checkpoint made within DURATION of the newest (2d, 12h, 90min, 2w, 6mo, 1y)."),
    *(click.option(f"--keep-{rule}", f"keep_{rule}", type=KeepCount(), default=None,
                   envvar=f"BLOBSTATE_KEEP_{rule.upper()}", metavar="N",
                   help=("Keep the N newest checkpoints (the same as --retain)." if rule == "last" else
                         f"Keep the newest checkpoint of each of the last N {unit} (UTC; 'all' for every one).")
                   ) for rule, unit in KEEP_RULES.items()),
)
append_only_option = click.option(
    "--append-only", "append_only", is_flag=True, default=None, envvar="BLOBSTATE_APPEND_ONLY",
    help="Delete nothing (restic's append-only mode): retention, aborts and restore's init cleanup leave deletes to "
         "`blobstate gc`, so this writer's credentials can be write-only (docs/operations.md: S3 policies per role).")
limit_upload_option = click.option(
    "--limit-upload", "limit_upload", type=ByteSize(), default=None, envvar="BLOBSTATE_LIMIT_UPLOAD", metavar="RATE",
    help="Upload at most RATE bytes per second, all transfers together (10MiB, 500KiB; a number is bytes).")
limit_download_option = click.option(
    "--limit-download", "limit_download", type=ByteSize(), default=None, envvar="BLOBSTATE_LIMIT_DOWNLOAD",
    metavar="RATE", help="Download at most RATE bytes per second, all transfers together (10MiB, 500KiB).")


def retention_policy() -> Any:
    """The ``RetentionPolicy`` that the running command's ``--retain`` and ``--keep-*`` options name, or None when
    none is given (the store's recorded policy then applies). ``--retain N`` is ``--keep-last N``; both at once must
    agree."""
    from blobstate.errors import ConfigurationError
    from blobstate.model.retention import RetentionPolicy

    params = click.get_current_context().params
    retain = params.get("retain")
    rules = {name.removeprefix("keep_"): value for name, value in params.items()
             if name.startswith("keep_") and value is not None}
    if retain is not None:
        if rules.get("last", retain) != retain:
            raise click.UsageError(f"--retain {retain} and --keep-last {rules['last']} disagree: give one")
        rules["last"] = retain
    if not rules:
        return None
    try:
        return RetentionPolicy(**rules)
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc)) from None
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars or summary on stderr.")


def store_key(job: str, task: str, store: str | None, directory: str | None = None) -> Any:
    """The ``StoreKey`` the options name (``--store`` defaults to ``directory``'s name where there is one), named
    as every verb names it (``blobstate.entry.name_store``)."""
    from blobstate.entry import name_store

    if store is None and directory is None:
        raise click.UsageError("--store is required here")
    return name_store(job, task, store, directory=directory)


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
