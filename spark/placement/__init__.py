"""Placement, blobstate's ``StateStoreCoordinator``: the driver's record of which executor holds each partition's
newest copy and its choice of where each task runs (``coordinator``), applied through the JVM helper ``PlacedRDD``
(``helper_jar``, its Java source and jar in ``jvm/``). Driver side only: a task learns where it ran from
``blobstate.spark.executor.identity``. It may import ``blobstate.spark.errors`` and the core; no other room of
``blobstate.spark`` (the tasks it runs on every executor are handed to it)."""
