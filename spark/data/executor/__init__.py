"""The executors' side of state as data: the read and write tasks, one per partition (``tasks``), and the rescale's
key mapping (``keys``). It may import ``blobstate.spark.executor``, ``blobstate.spark.errors``, the core's model,
local files and errors, and the core's door for executors, ``blobstate.worker``; never the driver's side."""
