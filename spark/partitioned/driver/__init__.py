"""The driver's side of partitioned state: one query's state opened through the Open door and a batch's one group
commit (``state``), the batch's Spark job (``job``), the snapshots the listener asks for (``snapshots``), what each
committed batch reports (``stats``) and the partitioning its group records carry, checked (``partitioning``). It may
import ``blobstate.spark.partitioned.executor``, ``blobstate.spark.executor``, ``committed``, ``placement``,
``blobstate.spark.errors`` and the core; not ``binding`` or ``data``."""
