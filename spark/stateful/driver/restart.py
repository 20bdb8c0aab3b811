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
from blobstate.spark.processor.handle import check_declarations
from blobstate.spark.processor.metadata import Metadata


def refuse_incompatible(processor: Any, *, time_mode: str, repo: str, job: str, store: str, partitioned: bool,
                        task: str | None = None, log: str | None = None,
                        storage_options: dict[str, Any] | None = None, settings: Settings | None = None) -> None:
    """Run ``processor``'s ``init`` once on the driver against what the store ``(job, task, store)`` recorded
    (``task`` default: ``group`` if ``partitioned`` else ``0``, as the state opens it; a new repository or store
    recorded nothing). Raises ``StateSchemaError`` when a declaration is incompatible with the record,
    ``StateVariableError`` when ``init`` misuses the API (a TTL outside ProcessingTime, a name declared twice), and
    what opening the repository raises (but ``RepositoryNotFound``: a new repository)."""
    key = StoreKey(job, task or ("group" if partitioned else "0"), store)
    metadata = Metadata()
    try:
        repository = open_repository(repo, log, storage_options, settings=Settings.for_call(settings))
    except RepositoryNotFound:
        repository = None
    if repository is not None:
        with repository:
            if repository.log.latest(key) is not None:
                metadata = store_metadata(repository, plan_state(repository, key).chains.values())
    check_declarations(processor, metadata, time_mode=time_mode)


__all__ = ["refuse_incompatible"]
