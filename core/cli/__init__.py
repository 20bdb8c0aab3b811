"""The ``blobstate`` command line (click): one module per command (``main_<command>``), each calling only the
public API (``blobstate.api``).

Commands are loaded lazily: ``blobstate --version`` or ``blobstate list`` import only what they use, so start-up
is not most of a small incremental backup. Exit codes: 0 ok, 1 error, 2 usage, 3 integrity (checksum, corrupt
index or journal, missing blob, unsafe path), 4 fenced, 5 nothing to restore. Options also come from the
environment (``BLOBSTATE_REPO``, ``BLOBSTATE_LOG``, ``BLOBSTATE_JOB``, ``BLOBSTATE_TASK``, ``BLOBSTATE_STORE``,
``BLOBSTATE_TTL_MODE``, ``BLOBSTATE_MAX_CONCURRENCY``, ``BLOBSTATE_WORK_DIR``, and ``BLOBSTATE_STORAGE_OPTIONS`` as
JSON).
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

#: command name -> ``module:attribute`` of its click command, imported on first use.
COMMANDS = {
    "backup": "blobstate.cli.main_backup:backup",
    "restore": "blobstate.cli.main_restore:restore",
    "list": "blobstate.cli.main_list:list_checkpoints",
    "verify": "blobstate.cli.main_verify:verify",
    "gc": "blobstate.cli.main_gc:gc",
    "recover": "blobstate.cli.main_recover:recover",
    "journal": "blobstate.cli.main_journal:journal",
    "plugins": "blobstate.cli.main_plugins:plugins",
    "demo": "blobstate.cli.main_demo:demo",
}


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
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="blobstate")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
def main(verbose: int) -> None:
    """blobstate: incremental, crash-safe backups of stream-processing state to blob stores."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


__all__ = ["COMMANDS", "main"]
