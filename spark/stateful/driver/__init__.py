"""The driver's side of a stateful processor query: ``entry`` (``transform_with_state``), ``times`` (a batch's
processing time and watermarks from Spark's offset log), ``inputs`` (the batch's input, the heartbeat filtered
out), ``on_driver`` (the driver store: one delta record per batch), ``on_partitions`` (N partitions: the batch's
Spark job and one group record). It may import ``blobstate.spark.stateful.executor``, ``binding``, ``partitioned``,
``committed``, ``processor``, ``blobstate.spark.errors`` and the core."""
