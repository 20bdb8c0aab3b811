"""The executor side every room shares: what a blobstate task on an executor needs whatever it does. Who runs it
(``identity``: the executor the JVM helper names, Spark's attempt ids, the partition), its rows in and its answer out
(``rows``), the RocksDB partitions a Python worker keeps open between tasks (``open_partitions``) and a host's
leftovers swept (``leftovers``). The bottom of the executor side: it may import ``blobstate.spark.errors``, the
core's model, local files and errors, and the core's door for executors, ``blobstate.worker``; nothing else
of ``blobstate.spark`` and no other module of the core."""
