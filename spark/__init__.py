"""PySpark Structured Streaming integration: every completed micro-batch becomes a committed snapshot.

``register(spark, repo=..., checkpoint_location=..., state_dir=...)`` restores the store aligned with the query's
own ``commits/`` log, opens it (RocksDB via rocksdict) and adds the ``CommitListener``; ``binding.start(writer, fn)``
runs ``fn(df, batch_id, db)`` per micro-batch through ``foreachBatch``; ``binding.close()`` drains pending commits.
Importing this package does not import pyspark (the ``spark`` extra): only ``open()`` does.
"""

from blobstate.spark.alignment import (
    AlignmentPlan,
    SparkAlignmentError,
    committed_batches,
    last_committed_batch,
    plan_alignment,
    rewind_commit,
)
from blobstate.spark.binding import BackpressureTimeout, SnapshotCommitError, StateBinding, register

__all__ = [
    "AlignmentPlan", "BackpressureTimeout", "SnapshotCommitError", "SparkAlignmentError", "StateBinding",
    "committed_batches", "last_committed_batch", "plan_alignment", "register", "rewind_commit",
]
