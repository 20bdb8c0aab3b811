"""How a command ends when something goes wrong: a blobstate error becomes ``error: ...`` on stderr and its exit
code, an interrupt a report of what it left and how to finish it, a closed output pipe a quiet exit.

Exit codes (``blobstate.errors``): 0 ok, 1 error, 2 usage, 3 integrity, 4 fenced, 5 nothing to restore, 6 no
blobstate repository at the URL, 130 interrupted (SIGINT), 143 terminated (SIGTERM), 141 output pipe closed.
With ``BLOBSTATE_DEBUG`` (the command's settings) the traceback is kept instead.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from blobstate.cli.command_settings import settings
from blobstate.cli.output import err
from blobstate.errors import EXIT_ERROR, BlobstateError

#: The store a command is working on, for the message after an interrupt: (repo, job, task, store, work base).
_WATCHED: dict[str, Any] = {}
#: Signals received so far (SIGINT, SIGTERM), in order.
INTERRUPTS: list[int] = []
EXIT_BROKEN_PIPE = 141


def watch_store(repo: str | None, job: str, task: str | None, store: str | None, work_base: str | None,
                options: dict[str, Any] | None = None) -> None:
    """Remember the store this command works on (``options``: its storage options): an interrupt then reports its
    unfinished commits and the objects they left. ``task`` None: a reader's store found under ``0`` or ``group``
    (``blobstate.entry.find_store``): the report looks under both."""
    _WATCHED.update(repo=repo, job=job, task=task, store=store, work_base=work_base, options=options)


def forget() -> None:
    """Forget the signals received and the store watched (a new command starts in this process)."""
    INTERRUPTS.clear()
    _WATCHED.clear()


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


def report_interrupt() -> int:
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


def quiet_broken_pipe() -> None:
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
            quiet_broken_pipe()
            sys.exit(EXIT_BROKEN_PIPE)
        except BlobstateError as exc:
            if _debug():
                raise
            err(f"error: {type(exc).__name__}: {exc}")
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(report_interrupt())
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
