"""The options commands declare, written once: decorators for the repository (``--repo``, ``--log``,
``--storage-option``, ``--key-file``, ``--log-option``), the store key (``--job``, ``--task``, ``--store``) or a
filter of stores, a checkpoint, ``--json``, ``--quiet``, transfer limits and retention (``--keep-*``), with their
environment variables, and the parameter types they convert with (durations to ms, sizes to bytes, counts).
``stack`` combines them in the order written (the order ``--help`` lists them)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from blobstate.cli.command_settings import use_key_file

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


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


_KEY_FILE = "BLOBSTATE_KEY_FILE"


def _use_key_file(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    """``--key-file FILE`` goes into this command's settings (``settings().key_file``, over
    ``BLOBSTATE_KEY_FILE``), so the repository opens with it wherever the command opens one (a Spark job's
    executors get it with the settings each task is sent)."""
    if value:
        use_key_file(ctx, value)


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
