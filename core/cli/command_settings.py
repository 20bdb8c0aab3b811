"""The settings a command runs with: built once, on first use, from the ``BLOBSTATE_*`` environment, the command's
options (under the API's names) and ``--key-file``, and handed to every API call the command makes, never a
variable set for it in the environment. They live in the click context of the running command, so they last
exactly that command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from blobstate.config.settings import Settings

#: CLI parameter names that differ from the API's (the settings hold a command's options under the API's names).
_RENAMED = {"log_url": "log", "as_json": "json", "work_dir": "work_base"}
_COMMAND = "blobstate.command"  # click context meta: (command name, its options under the API's names)
_SETTINGS = "blobstate.settings"  # click context meta: the command's settings, once built
_KEY_FILE = "blobstate.key_file"  # click context meta: --key-file


def record_command(command: str, options: dict[str, Any]) -> None:
    """Record the command being run and its options (under the API's names) for ``settings``."""
    meta = click.get_current_context().meta
    meta[_COMMAND] = (command, {_RENAMED.get(name, name): value for name, value in options.items()})
    meta.pop(_SETTINGS, None)


def use_key_file(ctx: click.Context, key_file: str) -> None:
    """Record ``--key-file`` (a path) for the settings of the command ``ctx`` runs: ``settings().key_file``, over
    ``BLOBSTATE_KEY_FILE``."""
    ctx.meta[_KEY_FILE] = key_file
    ctx.meta.pop(_SETTINGS, None)


def settings() -> Settings:
    """What this command runs with, built once (on first use, so a malformed variable is reported by the command's
    error handler, ``blobstate.cli.exits.handle_errors``): the ``BLOBSTATE_*`` environment with the command's
    options (``record_command``) and ``--key-file``; outside a command, the environment's. Raises
    ``ConfigurationError``."""
    from blobstate.config.settings import Settings

    ctx = click.get_current_context(silent=True)
    meta: dict[str, Any] = ctx.meta if ctx is not None else {}
    built = meta.get(_SETTINGS)
    if built is None:
        command, options = meta.get(_COMMAND, (None, {}))
        key_file = meta.get(_KEY_FILE)
        built = Settings.from_environ().with_options(command, **options, **({"key_file": key_file} if key_file
                                                                             else {}))
        meta[_SETTINGS] = built
    return built
