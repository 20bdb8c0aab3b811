"""The executor side of a processor's state as data: one partition's state variable, its timers, or its changes,
as Arrow record batches in the shapes of Spark's state data source for ``transformWithState`` (the columns of
``blobstate.spark.processor.readers``, then ``partition_id``; changes get ``batch_id`` first).

``VariableRead`` is what the driver decided (picklable, in every task's ``ReadPlan``): the variable (or the timers),
the store's metadata document as of the batch read and the output schema built from it. Each partition is read
with its own metadata (the one its restored state holds) and cast to the driver's schema; a partition whose state
holds no processor metadata yet (it never ran a batch) gives no rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from blobstate.model import changelog
from blobstate.spark.processor.metadata import Metadata
from blobstate.spark.processor.readers import StateReader

PARTITION_ID = "partition_id"
BATCH_ID = "batch_id"


@dataclass(frozen=True)
class VariableRead:
    """A read of a processor's state: ``state_var`` (None with ``timers``: the registered timers), the store's
    ``metadata`` on the driver, and the ``schema`` (``pyarrow.Schema``) every task's batches have."""

    state_var: str | None
    timers: bool
    metadata: Metadata
    schema: Any


def output_schema(metadata: Metadata, state_var: str | None, *, timers: bool = False, changes: bool = False) -> Any:
    """The ``pyarrow.Schema`` of a read: the reader's columns, then ``partition_id`` (int32); with ``changes``
    ``batch_id`` (int64) first. Raises ``StateVariableError`` naming the variables there are when ``state_var``
    is not one of ``metadata``'s."""
    import pyarrow as pa

    reader = StateReader(None, metadata)
    if timers:
        inner = reader.timers_schema()
    elif changes:
        assert state_var is not None
        inner = reader.changes_schema(state_var)
    else:
        assert state_var is not None
        inner = reader.variable_schema(state_var)
    head = [pa.field(BATCH_ID, pa.int64())] if changes else []
    return pa.schema(head + list(inner) + [pa.field(PARTITION_ID, pa.int32())])


def _finish(table: Any, read: VariableRead, partition: int | None, batch_ids: list[int] | None = None) -> Any:
    """``table`` with ``partition_id`` (and ``batch_id``) added, cast to the driver's schema."""
    import pyarrow as pa

    if batch_ids is not None:
        table = table.add_column(0, BATCH_ID, pa.array(batch_ids, pa.int64()))
    table = table.append_column(PARTITION_ID, pa.array([partition] * table.num_rows, pa.int32()))
    return table.cast(read.schema)


def state_batches(read: VariableRead, db: Any, partition: int | None) -> Iterator[Any]:
    """The partition's variable (or timers) as record batches, from ``db`` (its restored state, open)."""
    reader = StateReader(db)
    if read.timers:
        if reader.metadata.key_schema is None:
            return
        table = reader.read_timers()
    else:
        assert read.state_var is not None
        if read.state_var not in reader.metadata.variables or reader.metadata.key_schema is None:
            return
        table = reader.read_variable(read.state_var)
    yield from _finish(table, read, partition).to_batches()


def change_batches(read: VariableRead, changes: Iterable[Any], partition: int | None) -> Iterator[Any]:
    """The changes to the variable among ``changes`` (``blobstate.worker.read_changes``'s rows, in order), one
    table per batch, read with the driver's metadata."""
    assert read.state_var is not None
    reader = StateReader(None, read.metadata)
    batch: int | None = None
    ops: list[tuple[bytes, Any, Any]] = []

    def flush() -> Iterator[Any]:
        table = reader.changes(ops, read.state_var)  # type: ignore[arg-type]
        if table.num_rows:
            yield from _finish(table, read, partition, [batch] * table.num_rows).to_batches()  # type: ignore[list-item]

    for change in changes:
        if change.batch_id != batch and ops:
            yield from flush()
            ops = []
        batch = change.batch_id
        ops.append((changelog.DELETE if change.op == "delete" else changelog.PUT, change.key, change.value))
    if ops:
        yield from flush()


__all__ = ["BATCH_ID", "PARTITION_ID", "VariableRead", "change_batches", "output_schema", "state_batches"]
