"""PySpark Structured Streaming integration: exactly-once RocksDB state, every micro-batch committed inside the batch.

``register(spark, repo=..., checkpoint_location=..., state_dir=...)`` restores the state Spark's own ``commits/``
calls for (the newest snapshot at or below Spark's last committed batch, then the deltas after it) and opens the
store; ``binding.start(writer, fn)`` runs ``fn(df, batch_id, state)`` per micro-batch through ``foreachBatch``: the
batch's writes are committed as one delta record before ``foreachBatch`` returns, and snapshots follow in the
background; ``binding.close()`` drains. Importing this package does not import pyspark (the ``spark`` extra).

Modules: ``binding`` (the Spark lifecycle), ``engine`` (the batch side: delta commits, apply, snapshots),
``scheduler`` (Spark-agnostic background snapshot scheduling), ``partitioned``, ``partition_job``,
``partition_task`` and ``partition_snapshot`` (partitioned state on the executors, one group checkpoint per batch,
snapshots off the batch's path), ``state_read``, ``state_write`` and ``state_task`` (a store's state and changes as
a DataFrame, one task per partition; a new store written from a DataFrame), ``rescale`` and ``rescale_task`` (a
committed group re-partitioned offline into another N, with Spark's own hash: read_state then write_state),
``alignment`` and ``location`` (what a restart restores, and Spark's checkpoint
location read through Spark's own Hadoop FileSystem), ``listener``, and the ``demo`` subpackage (``blobstate demo``).
"""

from blobstate.spark.alignment import AlignmentPlan, SparkAlignmentError
from blobstate.spark.binding import StateBinding, register
from blobstate.spark.location import CheckpointLocation
from blobstate.spark.partitioned import GroupBatchStats, PartitionedState, PartitioningError, partitioned
from blobstate.spark.rescale import RescaleAlreadyCommitted, RescaleRefused, RescaleResult, UnmappableKeyError, rescale
from blobstate.spark.scheduler import SnapshotCommitError
from blobstate.spark.state_read import read_changes, read_state
from blobstate.spark.state_write import (
    DestinationNotEmpty,
    StateAlreadyWritten,
    StateWriteRefused,
    StateWriteResult,
    UnwritableRows,
    write_state,
)

# the public names only: the engine, the scheduler and the planning functions live in their modules
__all__ = [
    "AlignmentPlan", "CheckpointLocation", "GroupBatchStats", "PartitionedState", "PartitioningError",
    "RescaleAlreadyCommitted", "RescaleRefused", "RescaleResult", "SnapshotCommitError", "SparkAlignmentError",
    "StateBinding", "UnmappableKeyError", "partitioned", "register", "rescale",
    "DestinationNotEmpty", "StateAlreadyWritten", "StateWriteRefused", "StateWriteResult", "UnwritableRows",
    "read_changes", "read_state", "write_state",
]
