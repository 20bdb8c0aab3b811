"""Stateful processors on blobstate state (``blobstate.spark.transform_with_state``): a class written for Spark 4's
``StatefulProcessor`` run by the processor runtime (``blobstate.spark.processor``) inside a Spark query, on the
driver's store or on N partitions, every batch's state committed before its output reaches the user's sink.
``driver/``: the entry point, the batch's times read from Spark's offset log, the driver-store run and the
partitioned run with its Spark job; ``executor/``: the task that runs a batch of the processor on a partition's
store and hands back its output rows and its prepare. The driver side may import ``binding``, ``partitioned``,
``committed``, ``processor``, ``blobstate.spark.errors`` and the core; the executor side only what every executor
side may (``blobstate.spark.executor``, ``blobstate.spark.partitioned.executor``, ``blobstate.spark.errors``, the
core's door ``blobstate.worker``) and the Spark-agnostic runtime ``blobstate.spark.processor``."""
