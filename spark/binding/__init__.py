"""The driver binding: one RocksDB on the driver, fed from ``foreachBatch`` (``blobstate.spark.register``). Its
lifecycle on a Spark session (``lifecycle``: register, start one query, listen, close), the batch side (``engine``:
a delta commit inside every batch, snapshots in the background) and the background snapshot scheduling
(``scheduler``, Spark-agnostic). Driver side only. It may import ``committed``, ``blobstate.spark.errors`` and the
core; not ``partitioned``, ``placement``, ``data`` or the executor side."""
