"""What the command modules share: error handling and exit codes, option decorators, output helpers.

Exit codes (``blobstate.errors``): 0 ok, 1 error, 2 usage, 3 integrity, 4 fenced, 5 nothing to restore. Results go
to stdout (``--json`` for scripts); progress, messages and errors to stderr. Every message passes through
``redact`` with the secret values given on this command line.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from blobstate.errors import EXIT_ERROR, BlobstateError

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]

_SECRETS: list[str] = []  # secret option values given on this command line, hidden in every message


def err(message: str) -> None:
    """Print ``message`` on stderr."""
    click.echo(message, err=True)


def redact(text: str) -> str:
    """``text`` without credentials (URL userinfo, secret-looking pairs, secrets given on this command line)."""
    from blobstate.storage_options import redact as redact_value

    return str(redact_value(text, secrets=_SECRETS))


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn blobstate errors into ``error: ...`` on stderr and their exit codes (tracebacks with BLOBSTATE_DEBUG)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException):
            raise
        except BlobstateError as exc:
            if os.environ.get("BLOBSTATE_DEBUG"):
                raise
            err(f"error: {type(exc).__name__}: {redact(str(exc))}")
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            err("interrupted")
            sys.exit(130)
        except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
            if os.environ.get("BLOBSTATE_DEBUG"):
                raise
            err(f"error: unexpected {type(exc).__name__}: {redact(str(exc))} (BLOBSTATE_DEBUG=1 for a traceback)")
            sys.exit(EXIT_ERROR)

    return wrapper


def storage_options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs to a dict (typed values, dotted keys nest; see ``blobstate.storage_options``); their
    secret values are remembered so that no message shows them."""
    from blobstate.storage_options import parse_options, secret_values

    options = parse_options(values)
    _SECRETS.extend(secret_values(options))
    return options


def _stack(*decorators: Decorator) -> Decorator:
    def apply(fn: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


#: ``--repo``, ``--log`` and ``--storage-option``: every command that opens a repository.
repo_options = _stack(
    click.option("--repo", required=True, envvar="BLOBSTATE_REPO",
                 help="Repository URL or path (file://, s3://, gs://, az://, ...)."),
    click.option("--log", "log_url", default=None, envvar="BLOBSTATE_LOG",
                 help="Checkpoint log URL (default: the file log inside the repository)."),
    click.option("--storage-option", "storage_option", multiple=True, metavar="KEY=VALUE",
                 help="fsspec storage option for the repository (repeatable)."),
)
ttl_mode_option = click.option("--ttl-mode", type=click.Choice(["lease", "native"]), default=None,
                               envvar="BLOBSTATE_TTL_MODE", help="How blob TTLs are kept (default: lease).")
concurrency_option = click.option("--max-concurrency", type=click.IntRange(1, 256), default=8, show_default=True,
                                  envvar="BLOBSTATE_MAX_CONCURRENCY", help="Parallel transfers.")
work_dir_option = click.option("--work-dir", default=None, envvar="BLOBSTATE_WORK_DIR",
                               help="Work directory base (journal, local checkpoints).")
#: ``--job``, ``--task``, ``--store``: the store key.
key_options = _stack(
    click.option("--job", default="default", show_default=True, envvar="BLOBSTATE_JOB",
                 help="Job name (store key part 1)."),
    click.option("--task", default="0", show_default=True, envvar="BLOBSTATE_TASK",
                 help="Task name (store key part 2)."),
    click.option("--store", default=None, envvar="BLOBSTATE_STORE",
                 help="Store name (store key part 3; default: the directory name)."),
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bars.")


def store_key(job: str, task: str, store: str | None, directory: str | None = None) -> Any:
    """The ``StoreKey`` the options name (``--store`` defaults to ``directory``'s name where there is one)."""
    from blobstate.model import StoreKey

    if store is None and directory is None:
        raise click.UsageError("--store is required here")
    if directory is None:
        return StoreKey(job, task, store)  # type: ignore[arg-type]
    return StoreKey.for_directory(directory, job=job, task=task, store=store)


def store_work_dir(base: str | None, repo: str, key: Any) -> str | None:
    """The store's work directory under ``--work-dir`` (None: the API's default)."""
    if base is None:
        return None
    from blobstate.backends import normalize_url
    from blobstate.workdir import store_work_dir as work_dir_of

    return work_dir_of(normalize_url(repo), key, base)


def emit(as_json: bool, payload: Any, text: str) -> None:
    """Print ``payload`` as JSON, or ``text``, on stdout."""
    click.echo(json.dumps(payload, indent=2) if as_json else text)


def progress(quiet: bool) -> Any:
    """Rich progress bars on stderr (silent with ``quiet`` or when stderr is not a terminal)."""
    from blobstate.cli.progress import RichProgress

    return RichProgress(enabled=not quiet)
