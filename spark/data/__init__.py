"""State as data: a store's state and changes read as a DataFrame (``read``: ``read_state``, ``read_changes``), a new
store written from one (``write``: ``write_state``), a committed group re-partitioned offline (``rescale``: read
then write), a stateful processor's variables and timers (``read`` with ``metadata``; ``local``: without Spark, for
the CLI); their tasks on the executors in ``executor/``. The driver's modules may import ``data.executor``,
``blobstate.spark.executor``, ``committed``, ``processor`` (its reader and metadata), ``blobstate.spark.errors``
and the core; not ``binding``, ``partitioned`` or ``placement``."""
