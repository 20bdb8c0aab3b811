"""A stateful processor's state variable or timers read on this machine, without Spark: what ``blobstate state dump
--state-var`` prints. Each partition's chain is restored into a private temporary directory (removed once read),
decoded by the processor runtime's reader (``blobstate.spark.processor.StateReader``), and given as rows in the
shapes of ``blobstate.spark.read_state(..., state_var=...)`` / ``read_timers`` (Spark's state data source's), as
Python values (structs as dicts).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from blobstate.config.settings import Settings
from blobstate.entry import engine_log, find_store, open_repository
from blobstate.restoring.state import plan_state
from blobstate.spark.data.executor.variables import PARTITION_ID
from blobstate.spark.data.metadata import restored_db, store_metadata
from blobstate.spark.processor.readers import StateReader


def variable_rows(*, repo: str, job: str, store: str, state_var: str | None, timers: bool = False,
                  task: str | None = None, partition: int | None = None, batch_id: int | None = None,
                  checkpoint: str | int | None = None, checkpoint_location: str | None = None,
                  log: str | None = None, storage_options: dict[str, Any] | None = None,
                  log_options: dict[str, Any] | None = None,
                  settings: Settings | None = None) -> Iterator[dict[str, Any]]:
    """The rows of ``state_var`` (``timers``: the registered timers instead) of the store as after ``batch_id``
    (default: the newest; ``checkpoint_location``: the batch Spark committed), of every partition or of
    ``partition``, each with ``partition_id`` (None for the driver's store). The store and the variable are checked
    at once (``StateVariableError``, exit 2, naming the variables there are; ``NothingToRestore``, exit 5), the
    partitions read as the iterator is consumed."""
    settings = Settings.for_call(settings)
    with open_repository(repo, log, storage_options, log_options, settings=settings) as repository:
        key = find_store(repository, job, task, store)
        state = plan_state(repository, key, partitions=None if partition is None else [partition],
                           batch_id=batch_id, checkpoint=checkpoint, engine=engine_log(checkpoint_location))
        if not timers:
            assert state_var is not None
            StateReader(None, store_metadata(repository, state.chains.values())).variable(state_var)
    return _rows(state.chains, lambda: open_repository(repo, log, storage_options, log_options, settings=settings),
                 state_var, timers)


def _rows(chains: dict[int | None, Any], reopen: Any, state_var: str | None, timers: bool) -> Iterator[dict[str, Any]]:
    with reopen() as repository:
        for p, chain in chains.items():
            with restored_db(repository, chain, "blobstate-state-") as db:
                reader = None if db is None else StateReader(db)
                if reader is None or reader.metadata.key_schema is None or (
                        not timers and state_var not in reader.metadata.variables):
                    continue
                table = reader.read_timers() if timers else reader.read_variable(state_var)  # type: ignore[arg-type]
                for row in table.to_pylist():
                    yield {**row, PARTITION_ID: p}


__all__ = ["variable_rows"]
