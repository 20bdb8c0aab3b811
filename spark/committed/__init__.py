"""What Spark committed, shared by every way of holding state: Spark's checkpoint location read through Spark's own
file system (``location``), a store's records aligned with it (``alignment``: which state a (re)start restores,
the run its records carry) and the ``StreamingQueryListener`` reporting each batch Spark completed (``listener``).
Driver side only. It may import ``blobstate.spark.errors`` and the core; no other room of ``blobstate.spark``."""
