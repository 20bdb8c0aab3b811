"""Every error ``blobstate.spark`` raises of its own, each a subclass of one of ``blobstate.errors`` (so its exit code
is that error's), in one place; each module of the rooms raises them from here.

- what Spark committed: ``SparkAlignmentError`` (the records cannot be aligned with Spark's checkpoint location);
- partitioned state: ``PartitioningError`` (other key columns or types than the group records hold),
  ``KeyGroupError`` (a copy of a key-grouped store holds a key of no key group: nothing is cut);
- the driver binding: ``SnapshotCommitError`` (a background snapshot commit failed);
- state as data: ``StateWriteRefused`` and its ``DestinationNotEmpty``, ``StateAlreadyWritten``, ``UnwritableRows``;
  ``RescaleRefused`` and its ``UnmappableKeyError``, ``RescaleAlreadyCommitted``;
- placement: ``HelperUnavailable`` (the JVM helper cannot be built or loaded; never reaches a user: placement is
  skipped);
- the stateful-processor runtime: ``StateVariableError`` (a state variable or timer used against Spark's rules),
  ``StateSchemaError`` (a restart declares a variable incompatibly with what the store recorded), both exit 2 and
  raised before a batch's writes are applied.

Imports ``blobstate.errors`` and the model's record type, nothing of ``blobstate.spark``: every room may import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from blobstate.errors import ConfigurationError, NothingToRestore, PartitionCountError, StorageError

if TYPE_CHECKING:
    from blobstate.model.records import Checkpoint


class SparkAlignmentError(NothingToRestore):
    """The repository's records cannot be aligned with Spark's checkpoint location (exit code 5); nothing changed."""


class PartitioningError(PartitionCountError):
    """A partitioned store is opened (or fed a batch) with other key columns, in another order or of other Spark
    types than its group checkpoints record (exit code 2): Spark's hash would send keys to partitions whose state
    does not hold them. Nothing is changed."""


class KeyGroupError(ConfigurationError):
    """A copy of a key-grouped store holds a key that is not a key-group key (``bytes`` starting with a key group
    below the store's number of key groups, ``blobstate.model.keygroups``), exit code 2: a cut to a range of key
    groups would lose it, so nothing was cut."""


class KeyGroupsUnsupported(ConfigurationError):
    """``transform_with_state`` asked to run on a key-grouped store (``key_groups=``, or a store whose group records
    name key groups), exit code 2, refused at start (nothing run, restored or written): the stateful processor's
    operator routes rows by ``pmod(hash(key_cols), N)`` and stores its variables' keys without the key-group prefix,
    so such a store would hold keys a rescale at restart cuts to the wrong partition."""


class SnapshotCommitError(StorageError):
    """The snapshot commit of a batch failed; ``batch_id`` names it, ``__cause__`` the reason. The deltas committed
    before and after it are intact: only the snapshot lag grows. The exit code is the cause's."""

    def __init__(self, message: str, *, batch_id: int | None, cause: BaseException) -> None:
        super().__init__(message)
        self.batch_id = batch_id
        self.exit_code = getattr(cause, "exit_code", StorageError.exit_code)


class StateWriteRefused(ConfigurationError):
    """A state write that cannot be done as asked (exit 2); nothing is committed, what was uploaded is deleted (or
    expires by its TTL)."""


class DestinationNotEmpty(StateWriteRefused):
    """The destination store key already holds checkpoints: a state is written into an empty store key only."""


class StateAlreadyWritten(StateWriteRefused):
    """The destination already holds exactly this write (its one record: the same batch, query id and partitions,
    snapshots only): an earlier run committed it, then was killed or lost its answer. Nothing is done (exit 2, so
    that a script expecting a fresh copy notices). ``checkpoint``: that record."""

    def __init__(self, message: str, *, checkpoint: Checkpoint) -> None:
        self.checkpoint = checkpoint
        super().__init__(message)


class UnwritableRows(StateWriteRefused):
    """Rows that cannot make a store: a key in two rows (``duplicates``), a null key or value, raw bytes of no type
    rocksdict stores; ``problems`` shows up to 5 per partition. Nothing is committed."""

    def __init__(self, message: str, *, problems: list[str], duplicates: bool) -> None:
        self.problems = problems
        self.duplicates = duplicates
        super().__init__(message)


class RescaleRefused(ConfigurationError):
    """A rescale that cannot be done as asked (exit 2): the destination holds records, a bad key schema, a source
    of mixed partition counts, keys held by two partitions. Nothing is committed; what was uploaded is deleted
    (or expires by its TTL)."""


class UnmappableKeyError(RescaleRefused):
    """``key_of`` cannot map a stored key to key-column values (it raised, or returned the wrong number or types of
    values); the message names the key. Nothing is uploaded."""


class RescaleAlreadyCommitted(RescaleRefused):
    """The destination already holds exactly this rescale (the same source batch and query id, the same number of
    partitions, snapshots only): an earlier run committed it, then was killed or lost its answer. Nothing is done;
    the query can restart on the destination (exit 2, like any refusal, so a script that expected a fresh copy
    notices)."""


class StateVariableError(ConfigurationError):
    """A state variable or timer used against Spark's rules: a TTL without the ProcessingTime time mode, a
    negative TTL, a variable declared twice or outside ``init``, a state call without a grouping key, a value that
    does not fit its schema, an empty list given to ``ListState.put``, a timer in time mode None (exit 2)."""


class StateSchemaError(ConfigurationError):
    """A restart declares a state variable (or the grouping key, or the time mode) incompatibly with what the store
    recorded: a field removed or retyped, a map's user key changed, a variable of another kind (exit 2). Raised
    right after the processor's ``init``, before the batch writes anything.

    ``variable`` names the variable (``"<grouping key>"``, ``"<time mode>"`` for those), ``role`` the schema
    (``"value"``, ``"user key"``, ``"kind"``), ``recorded``/``declared`` both sides."""

    def __init__(self, variable: str, role: str, recorded: str, declared: str, detail: str = "") -> None:
        self.variable, self.role, self.recorded, self.declared = variable, role, recorded, declared
        super().__init__(f"state variable {variable!r}: the {role} schema declared now ({declared}) is incompatible "
                         f"with the one recorded with the store ({recorded})" + (f": {detail}" if detail else "")
                         + "; only nullable fields may be added. Use a new variable name, or "
                         "handle.deleteIfExists() the old one first")


class HelperUnavailable(RuntimeError):
    """The JVM helper jar cannot be built or loaded (no ``javac``, no pyspark jars, a JVM refusing the class)."""


__all__ = ["DestinationNotEmpty", "HelperUnavailable", "KeyGroupError", "KeyGroupsUnsupported", "PartitioningError",
           "RescaleAlreadyCommitted", "RescaleRefused", "SnapshotCommitError", "SparkAlignmentError",
           "StateAlreadyWritten", "StateSchemaError", "StateVariableError", "StateWriteRefused", "UnmappableKeyError",
           "UnwritableRows"]
