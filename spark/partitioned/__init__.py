"""Partitioned state on the executors (``blobstate.spark.partitioned``): N RocksDB partitions, one group checkpoint
per micro-batch, with the driver's side (``driver/``) and the executors' side (``executor/``) apart. The driver
side may import the executor side (it ships its tasks), never the other way round."""
