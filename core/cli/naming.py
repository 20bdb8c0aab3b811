"""What a command names, as the API takes it: the repository (its URL, log, storage and log options, and the
command's settings, as an API call's keywords) and the store key (``--job``, ``--task``, ``--store``, named as every
verb names it: ``blobstate.entry.name_store``). Secret storage option values are hidden from every message."""

from __future__ import annotations

from typing import Any

import click

from blobstate.cli.command_settings import settings
from blobstate.cli.output import hide


def storage_options(values: tuple[str, ...]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs to a dict (typed values, dotted keys nest; see ``blobstate.config.options``); their
    secret values are remembered so that no message shows them."""
    from blobstate.config.options import parse_options, secret_values

    options = parse_options(values)
    hide(secret_values(options))
    return options


def log_options(values: tuple[str, ...]) -> dict[str, Any] | None:
    """``--log-option`` pairs (None when there are none: the log then shares the repository's options when it is
    on the same kind of URL)."""
    return storage_options(values) if values else None


def repository(repo: str, log_url: str | None, storage_option: tuple[str, ...],
               log_option: tuple[str, ...]) -> dict[str, Any]:
    """The API's keywords for the repository options: ``repo``, ``log``, ``storage_options``, ``log_options``, and
    the command's ``settings``."""
    return {"repo": repo, "log": log_url, "storage_options": storage_options(storage_option),
            "log_options": log_options(log_option), "settings": settings()}


def require_store(store: str | None) -> str:
    """``--store``, which this command needs; ``click.UsageError`` (exit 2) without it."""
    if store is None:
        raise click.UsageError("--store is required here")
    return store


def store_key(job: str, task: str, store: str | None, directory: str | None = None) -> Any:
    """The ``StoreKey`` the options name (``--store`` defaults to ``directory``'s name where there is one), named
    as every verb names it (``blobstate.entry.name_store``); ``click.UsageError`` without either."""
    from blobstate.entry import name_store

    if store is None and directory is None:
        raise click.UsageError("--store is required here")
    return name_store(job, task, store, directory=directory)
