"""The entry room: the one way every verb of the API (and so every command of the CLI) reaches a repository.

A verb builds its settings (``blobstate.config.settings.Settings.for_call``: the CLI's, or the environment's, with
the call's keywords), names its store here (``name_store``: the one place a store key is made from ``job``,
``task``, ``store`` or a directory's name; the CLI names its stores through it too), opens the repository here
(``open_repository``: ``Repository.open`` with those settings, which resolves the storage options once and hands
the settings to every factory), and, for a reader given a Spark checkpoint location, reads the engine's commit log
here (``engine_log``). Then it goes to its own room (``commit``, ``restoring``, ``maintenance``) with the open
repository, which carries the settings on (``Repository.settings``). A backup never passes through the read verbs'
room.

May import: ``blobstate.config``, ``blobstate.errors``, ``blobstate.model``, ``blobstate.repository``; nothing
above (no verb's room, no API, no CLI).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from blobstate.config.options import redact
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.model.align import UNCONFIRMED, EngineLog
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository

_logger = logging.getLogger("blobstate.api")  # one logger for the whole public API


def name_store(job: str | None, task: str | None, store: str | None, key: StoreKey | None = None,
               directory: str | None = None) -> StoreKey:
    """The store key the verbs' ``job``/``task``/``store`` (or ``key``, or a directory's name: ``store`` defaults
    to it) say; ``job`` defaults to ``default``, ``task`` to ``0``. Raises ``TypeError`` when nothing names the
    store, ``ConfigurationError`` for a part that is not a valid name."""
    if key is not None:
        return key
    if directory is not None:
        return StoreKey.for_directory(directory, job=job or "default", task=task or "0", store=store)
    if store is None:
        raise TypeError("name the store: store= (with job= and task=), or key=")
    return StoreKey(job or "default", task or "0", store)


#: The tasks a store is found under when the caller names none: a store on the driver (``0``, every verb's default)
#: and a partitioned one (``group``, ``blobstate.spark.partitioned``'s default).
DEFAULT_TASKS = ("0", "group")


def find_store(repository: Repository, job: str | None, task: str | None, store: str | None,
               key: StoreKey | None = None, directory: str | None = None) -> StoreKey:
    """The store a reader names, found in ``repository``'s log: ``key``, or ``job``/``task``/``store`` (``store``
    defaulting to ``directory``'s name) as ``name_store`` makes it; with ``task`` None, whichever of the driver's
    (``0``) and the partitioned (``group``) task holds checkpoints, so the CLI and the Python readers find a
    partitioned store without ``--task``. One log read per candidate task.

    Raises ``NothingToRestore`` (exit 5) when none holds checkpoints, naming the stores the log holds and the
    options that choose one; ``ConfigurationError`` (exit 2) when both do, naming both; what ``name_store``
    raises."""
    if key is not None or task is not None:
        named = name_store(job, task, store, key, directory=directory)
        check_store(repository, named)
        return named
    candidates = [name_store(job, t, store, directory=directory) for t in DEFAULT_TASKS]
    found = [k for k in candidates if repository.log.latest(k) is not None]
    if len(found) > 1:
        raise ConfigurationError(f"both {found[0]} (a store on the driver) and {found[1]} (a partitioned store) "
                                 "hold checkpoints: choose one with --task (task= in Python)")
    if not found:
        where = redact(repository.log.url or repository.url)
        raise NothingToRestore(f"no checkpoint for {' or '.join(map(str, candidates))} in {where}"
                               f"{repository.others(candidates, named_by_directory=store is None)}")
    return found[0]


def open_repository(repo: str, log_url: str | None, storage_options: dict[str, Any] | None,
                    log_options: dict[str, Any] | None = None, *, settings: Settings, create: bool = False,
                    **kwargs: Any) -> Repository:
    """The repository at ``repo`` with its log, opened with ``settings`` (``Repository.open``: the storage options
    resolved once, the settings handed to the backends and kept by the repository); ``create``: write the marker
    into an empty location. Raises ``RepositoryNotFound`` (exit 6) for a location that is not one (without
    ``create``), ``LogMismatchError``, ``EncryptionKeyError``, ``StorageError``."""
    repository = Repository.open(repo, log=log_url, storage_options=storage_options, log_options=log_options,
                                 create=create, settings=settings, **kwargs)
    _logger.info("opened repository %s (log %s)", redact(repository.url), redact(repository.log.url or "in it"))
    return repository


def check_store(repository: Repository, key: StoreKey) -> Checkpoint:
    """The latest record of ``key``; ``NothingToRestore`` (exit 5) naming the stores that have checkpoints when
    the log holds none of it: a mistyped ``--store`` is the same error in every verb (``Repository.choose``'s
    words)."""
    latest = repository.log.latest(key)
    if latest is None:
        raise NothingToRestore(f"no checkpoint for {key} in {redact(repository.log.url or repository.url)}"
                               f"{repository.others([key])}")
    return latest


def engine_log(checkpoint_location: str | None) -> EngineLog | None:
    """What the query's Spark checkpoint location ``checkpoint_location`` says (read without Spark,
    ``blobstate.repository.engine_log``), for the Align door; None without one. Raises ``StorageError``."""
    if checkpoint_location is None:
        return None
    from blobstate.repository.engine_log import read_spark_location

    return read_spark_location(checkpoint_location)


def warn_unconfirmed(key: StoreKey, records: Iterable[Checkpoint]) -> None:
    """Say, on the log (stderr in the CLI), that the newest state read of ``key`` may be a batch the engine re-runs,
    when its records name a query (``blobstate.model.align.UNCONFIRMED``)."""
    if any(cp.query_id for cp in records):
        _logger.warning("%s: %s", key, UNCONFIRMED)
