"""The executors' side of partitioned state: a batch's task (``batch_task``: the plan it gets, the prepare it
answers), a partition's copy on a host (``partition``: its lock, its RocksDB, the record it is at) and a partition's
snapshot task (``snapshot_task``). It may import ``blobstate.spark.executor``, ``blobstate.spark.errors``, the
core's model, local files and errors, and the core's door for executors, ``blobstate.worker``; never the
driver's side."""
