"""PySpark Structured Streaming integration: exactly-once RocksDB state, every micro-batch committed inside the batch.

``register(spark, repo=..., checkpoint_location=..., state_dir=...)`` restores the state Spark's own ``commits/``
calls for (the newest snapshot at or below Spark's last committed batch, then the deltas after it) and opens the
store; ``binding.start(writer, fn)`` runs ``fn(df, batch_id, state)`` per micro-batch through ``foreachBatch``: the
batch's writes are committed as one delta record before ``foreachBatch`` returns, and snapshots follow in the
background; ``binding.close()`` drains. Importing this package does not import pyspark (the ``spark`` extra).

Rooms (each ``__init__`` says what it holds and what it may import; ``tests/project/test_spark_rooms.py`` keeps
them so): ``errors`` (every error of this package), ``executor/`` (what every task on an executor shares: who runs
it, its rows in and its answer out, the databases a Python worker keeps open between tasks, a host's leftovers),
``committed/`` (what Spark committed: its checkpoint location, the alignment of a store with it, the listener),
``placement/`` (blobstate's ``StateStoreCoordinator``: which executor holds each partition's copy, the JVM helper),
``binding/`` (the driver binding: one RocksDB on the driver), ``partitioned/`` (partitioned state: ``driver/``, the
batch's job and its one group commit, snapshots asked for, stats, the partitioning; ``executor/``, the batch's task,
the partition's local copy, the snapshot task), ``data/`` (state as data: read, write, rescale, and their tasks in
``data/executor/``), ``stateful/`` (``transform_with_state``: a class written for Spark 4's ``StatefulProcessor`` run
by the processor runtime on the driver's store or on N partitions, each batch's output to a sink once its state is
committed: ``driver/`` and ``executor/``), and ``demo/`` (``blobstate demo``). The executor side (every ``executor/``
folder) reaches the core through one door, ``blobstate.worker``, and runs the processor runtime (``processor/``,
Spark-agnostic, held to the executor side's rules).
"""

from blobstate.spark.binding.lifecycle import StateBinding, register
from blobstate.spark.committed.alignment import AlignmentPlan
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.data.read import read_changes, read_state, read_timers
from blobstate.spark.data.rescale import RescaleResult, rescale
from blobstate.spark.data.write import StateWriteResult, write_state
from blobstate.spark.errors import (
    DestinationNotEmpty,
    PartitioningError,
    RescaleAlreadyCommitted,
    RescaleRefused,
    SnapshotCommitError,
    SparkAlignmentError,
    StateAlreadyWritten,
    StateWriteRefused,
    UnmappableKeyError,
    UnwritableRows,
)
from blobstate.spark.executor.rows import arrow_input
from blobstate.spark.partitioned.driver.state import PartitionedState, partitioned
from blobstate.spark.partitioned.driver.stats import GroupBatchStats
from blobstate.spark.stateful.driver.entry import StatefulQuery, transform_with_state

# the public names only: the engine, the scheduler and the planning functions live in their modules
__all__ = [
    "AlignmentPlan", "CheckpointLocation", "GroupBatchStats", "PartitionedState", "PartitioningError",
    "RescaleAlreadyCommitted", "RescaleRefused", "RescaleResult", "SnapshotCommitError", "SparkAlignmentError",
    "StateBinding", "UnmappableKeyError", "partitioned", "register", "rescale",
    "DestinationNotEmpty", "StateAlreadyWritten", "StateWriteRefused", "StateWriteResult", "UnwritableRows",
    "read_changes", "read_state", "read_timers", "write_state", "StatefulQuery", "transform_with_state", "arrow_input",
]
