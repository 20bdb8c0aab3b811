"""A restart's declarations checked before the query starts: the processor's ``init`` run on the driver against
the schemas the store recorded, so that an incompatible state variable (a field removed or retyped, another kind,
another map user key, another time mode) is refused with ``StateSchemaError`` (exit 2, naming the variable and both
schemas) by ``transform_with_state`` itself, before Spark runs a batch and before anything is restored or written.
A compatible change (a nullable field added, a new variable, another TTL) passes; the first batch records it.

The recorded document is the newest state's (``blobstate.spark.data.metadata``: its changelogs, else one chain
restored on the driver). A new store (no repository yet, no record) recorded nothing: ``init`` still runs, so a
misuse of the API in it (a TTL outside ProcessingTime, a variable declared twice) is refused before the query
starts too. The batches check again
as they run (``blobstate.spark.processor.handle.Handle.seal``), so a store changed between this check and a batch
is refused there, before that batch writes anything.
"""

from __future__ import annotations

from typing import Any

from blobstate.config.settings import Settings
from blobstate.entry import open_repository
from blobstate.errors import RepositoryNotFound
from blobstate.model.records import StoreKey
from blobstate.restoring.state import plan_state
from blobstate.spark.data.metadata import store_metadata
from blobstate.spark.errors import KeyGroupsUnsupported
from blobstate.spark.processor.handle import check_declarations
from blobstate.spark.processor.metadata import Metadata


def refuse_incompatible(processor: Any, *, time_mode: str, repo: str, job: str, store: str, partitioned: bool,
                        task: str | None = None, log: str | None = None,
                        storage_options: dict[str, Any] | None = None, settings: Settings | None = None,
                        key_groups: int | None = None) -> None:
    """Run ``processor``'s ``init`` once on the driver against what the store ``(job, task, store)`` recorded
    (``task`` default: ``group`` if ``partitioned`` else ``0``, as the state opens it; a new repository or store
    recorded nothing). Raises ``KeyGroupsUnsupported`` (exit 2) when ``key_groups`` is asked or the store records
    key groups (``refuse_key_groups``), ``StateSchemaError`` when a declaration is incompatible with the record,
    ``StateVariableError`` when ``init`` misuses the API (a TTL outside ProcessingTime, a name declared twice), and
    what opening the repository raises (but ``RepositoryNotFound``: a new repository)."""
    key = StoreKey(job, task or ("group" if partitioned else "0"), store)
    refuse_key_groups(key_groups, f"{key}")
    metadata = Metadata()
    try:
        repository = open_repository(repo, log, storage_options, settings=Settings.for_call(settings))
    except RepositoryNotFound:
        repository = None
    if repository is not None:
        with repository:
            if repository.log.latest(key) is not None:
                state = plan_state(repository, key)
                refuse_key_groups(state.key_groups, f"{key}", recorded=True)
                metadata = store_metadata(repository, state.chains.values())
    check_declarations(processor, metadata, time_mode=time_mode)


def refuse_key_groups(key_groups: int | None, what: str, *, recorded: bool = False) -> None:
    """``KeyGroupsUnsupported`` (exit 2) for a processor's store of key groups (``key_groups``: asked, or
    ``recorded`` by the store ``what``); nothing for None or 0."""
    if key_groups:
        why = (f"{what} records {key_groups} key groups (it was written by blobstate.spark.partitioned with "
               "key_groups=)" if recorded else f"key_groups={key_groups} was asked for {what}")
        raise KeyGroupsUnsupported(
            f"transform_with_state does not run on key groups: {why}. Its operator routes rows by Spark's hash "
            "modulo num_partitions and stores its variables' keys without a key-group prefix, so a rescale at "
            "restart would cut them to the wrong partitions; nothing was run or written. Use a store without key "
            "groups (its rescale is offline: blobstate spark rescale)")


__all__ = ["refuse_incompatible", "refuse_key_groups"]
