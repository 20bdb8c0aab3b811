"""The executor's side of a stateful processor query: ``task``, one partition's batch of the processor (the
runtime's ``run_batch`` on the partition's staged writes, inside the partitioned state's ``run_partition``), its
output rows and its prepare handed back as Arrow. It may import ``blobstate.spark.executor``,
``blobstate.spark.partitioned.executor``, the runtime ``blobstate.spark.processor``, ``blobstate.spark.errors`` and
the core's door for executors, ``blobstate.worker``; never a driver side."""
