"""The ``blobstate`` command line (click): one module per command (``main_<command>``), each calling only the
public API (``blobstate.api``).

Commands are loaded lazily: ``blobstate --version`` or ``blobstate list`` import only what they use, so start-up
is not most of a small incremental backup. Every subcommand gets ``-v`` (added to the group's), shows the
environment variable of each option in its ``--help`` and the general ones in its epilog, and runs under the
same signal handling: SIGTERM (what Kubernetes sends) is handled like SIGINT, a second one during cleanup says
what is left and how to recover, a closed output pipe (``| head``) ends quietly. Exit codes: 0 ok, 1 error,
2 usage, 3 integrity, 4 fenced, 5 nothing to restore, 6 no blobstate repository, 130 SIGINT, 141 closed pipe,
143 SIGTERM. Shell completion: ``eval "$(_BLOBSTATE_COMPLETE=bash_source blobstate)"`` (``zsh_source``,
``fish_source``).

May import: every room below it; its commands call the public API (``blobstate.api``), with the settings the
command builds once (``blobstate.cli.command_settings.settings``), and name stores as the API does
(``blobstate.entry``).
Rooms: ``blobstate.api``, ``blobstate.entry``, ``blobstate.config``, ``blobstate.errors``, ``blobstate.model``,
``blobstate.journal``, ``blobstate.plugin``, ``blobstate.repository``, ``blobstate.commit``,
``blobstate.restoring``, ``blobstate.maintenance``, ``blobstate.spark``.
"""

from __future__ import annotations

import functools
import importlib
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

import click

#: command name -> ``module:attribute`` of its click command, imported on first use.
COMMANDS = {
    "init": "blobstate.cli.main_init:init",
    "backup": "blobstate.cli.main_backup:backup",
    "restore": "blobstate.cli.main_restore:restore",
    "copy": "blobstate.cli.main_copy:copy",
    "list": "blobstate.cli.main_list:list_checkpoints",
    "ls": "blobstate.cli.main_ls:ls",
    "diff": "blobstate.cli.main_diff:diff",
    "stats": "blobstate.cli.main_stats:stats",
    "verify": "blobstate.cli.main_verify:verify",
    "gc": "blobstate.cli.main_gc:gc",
    "recover": "blobstate.cli.main_recover:recover",
    "journal": "blobstate.cli.main_journal:journal",
    "key": "blobstate.cli.main_key:key",
    "doctor": "blobstate.cli.main_doctor:doctor",
    "plugins": "blobstate.cli.main_plugins:plugins",
    "demo": "blobstate.cli.main_demo:demo",
    "spark": "blobstate.cli.main_spark:spark",
    "state": "blobstate.cli.main_state:state",
}

#: The variables every command reads besides its options' own (shown in each command's --help).
ENVIRONMENT_EPILOG = """\b
Environment (besides each option's own variable, shown with it):
  BLOBSTATE_STORAGE_OPTIONS   storage options as a JSON object (credentials, endpoint_url, ...)
  BLOBSTATE_WORK_DIR          work directory base (journals, local checkpoints, checksum cache)
  BLOBSTATE_RETRY_ATTEMPTS    attempts per storage call (default 5)
  BLOBSTATE_TRANSFER_BUDGET   bytes in flight per store (96MiB, 1GiB; default 128MiB)
  BLOBSTATE_PLUGINS           extra plugin modules, comma-separated
  BLOBSTATE_DISABLE_PLUGINS   plugins to block by name, comma-separated (built-ins too)
  BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD=1  ignore installed plugins' entry points
  BLOBSTATE_TRACE_PLUGINS=1   trace every plugin hook call on stderr
  BLOBSTATE_BACKEND_<SCHEME>  backend name to use for a URL scheme
  BLOBSTATE_DEBUG=1           tracebacks instead of one-line errors
"""


def _verbose(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        from blobstate.cli import logs

        logs.configure(value)


def _verbose_option() -> click.Option:
    return click.Option(["-v", "--verbose"], count=True, expose_value=False, is_eager=True, callback=_verbose,
                        help="More logging on stderr: -v steps, -vv debug, -vvv every library's debug lines.")


def _record_configuration(command_name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a command's callback so that the settings it runs with (``command_settings.settings``: built once, handed to
    every API call and, through the plugin manager, to ``blobstate_configure``) hold its name and options."""

    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        from blobstate.cli import command_settings

        command_settings.record_command(command_name, kwargs)
        return callback(*args, **kwargs)

    return run


def prepare(command: click.Command, name: str) -> click.Command:
    """Give ``command`` (and its subcommands) ``-v``, the environment in ``--help`` and the configuration hook."""
    if getattr(command, "_blobstate_prepared", False):
        return command
    command._blobstate_prepared = True  # type: ignore[attr-defined]
    if not any(isinstance(p, click.Option) and "--verbose" in p.opts for p in command.params):
        command.params.append(_verbose_option())
    for param in command.params:
        if isinstance(param, click.Option) and param.envvar:
            param.show_envvar = True
    command.epilog = ENVIRONMENT_EPILOG if not command.epilog else f"{command.epilog}\n\n{ENVIRONMENT_EPILOG}"
    if isinstance(command, click.Group):
        for sub_name, sub in command.commands.items():
            prepare(sub, f"{name} {sub_name}")
    elif command.callback is not None:
        command.callback = _record_configuration(name, command.callback)
    return command


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when invoked or listed (click's documented pattern)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        reference = COMMANDS.get(cmd_name)
        if reference is None:
            return None
        module_name, _, attr = reference.partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return prepare(command, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        from blobstate.cli import exits

        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            sys.exit(exits.report_interrupt())
        except BrokenPipeError:
            exits.quiet_broken_pipe()
            sys.exit(exits.EXIT_BROKEN_PIPE)


def _install_signal_handlers(ctx: click.Context) -> None:
    """SIGTERM like SIGINT: both raise ``KeyboardInterrupt`` in the main thread (a running commit is aborted and
    its blobs deleted); each is counted, so that the report can say it came during cleanup. The previous
    handlers come back when the command ends."""
    if threading.current_thread() is not threading.main_thread():
        return
    from blobstate.cli import exits

    def on_signal(signum: int, frame: object) -> None:
        exits.INTERRUPTS.append(signum)
        raise KeyboardInterrupt

    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, on_signal)

    def restore() -> None:
        for s, handler in previous.items():
            signal.signal(s, handler)

    ctx.call_on_close(restore)


@click.group(cls=LazyGroup, epilog=ENVIRONMENT_EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="blobstate")
@click.option("-v", "--verbose", count=True, help="More logging on stderr: -v steps, -vv debug, -vvv every "
              "library's debug lines (each subcommand takes -v too).")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """blobstate: incremental, crash-safe backups of stream-processing state to blob stores."""
    from blobstate.cli import exits, logs

    logs.reset()
    exits.forget()
    logs.configure(verbose)
    _install_signal_handlers(ctx)


__all__ = ["COMMANDS", "main", "prepare"]
