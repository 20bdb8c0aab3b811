"""The Spark job of a partitioned micro-batch: ``mapInArrow`` under Spark Connect, the RDD API on classic PySpark.

``run_tasks(df, plan, update, key_cols)`` repartitions the batch by ``key_cols`` into N partitions (Spark's hash
partitioning, ``pmod(murmur3(key_cols), N)``; a key-grouped store's by key-group range,
``blobstate.spark.partitioned.driver.routing``; a repartition to an explicit number is never coalesced by adaptive
execution), runs ``blobstate.spark.partitioned.executor.batch_task.run_partition`` once per partition ``p`` and
``collect()``s one ``Prepare`` per task:

- the DataFrame path (Spark Connect, where a DataFrame has no ``rdd``): ``repartition(N, *key_cols)
  .mapInArrow(task, "prepare binary")``. The task reading shuffle partition ``p`` (``TaskContext.partitionId()``)
  receives it as Arrow record batches (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
  default) and hands ``update`` an iterator of ``pyspark.sql.Row``, converted one record batch at a time (never
  the whole partition) by Spark's own Arrow-to-Row conversion, so the values are those ``collect()`` gives; the
  ``Prepare`` comes back pickled in the one row the task outputs;
- the RDD path (classic): ``repartition(N, *key_cols).rdd.mapPartitionsWithIndex``, with the number of partitions
  Spark planned checked against N (free there: the RDD is planned once). On classic it costs about 50 ms less per
  batch than the DataFrame path (Spark's Arrow runner per task; ``python -m bench.partition_job``), and needs no
  pyarrow. An update that takes Arrow (``arrow_input``) runs on the DataFrame path on classic too, its tasks
  handing it the record batches as they are (no Row per row). The shuffled rows are wrapped by ``place``
  (``blobstate.spark.placement.coordinator.SparkPlacement.place``) so that task ``p`` runs on the executor holding
  partition ``p``'s copy.

A partition with no rows still runs its task (its state moves to the batch, with an empty changelog); a task whose
output never reaches ``collect`` (a failed, retried or speculative attempt) leaves nothing to accept: the driver's
``accept`` checks that the prepares cover exactly the N partitions (the DataFrame path's only check of N: asking
Spark for the planned count would plan the job a second time, about 50 ms).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from blobstate.errors import ConfigurationError
from blobstate.spark.committed.location import is_connect
from blobstate.spark.executor.rows import OUTPUT_SCHEMA, collect_pickled, takes_arrow
from blobstate.spark.partitioned.driver.routing import by_key_group_range
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, Prepare, Update, arrow_task, run_partition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def run_tasks(df: DataFrame, plan: BatchPlan, update: Update, key_cols: list[str], *,
              arrow: bool | None = None, place: Callable[[Any], Any] | None = None) -> list[Prepare]:
    """Run batch ``plan.batch_id``'s one Spark job over ``df`` and return the tasks' prepares, in the order
    ``collect`` gives them (one per successful task; ``accept`` checks them). ``arrow``: the DataFrame path (default:
    under Spark Connect only); ``place(rdd) -> rdd``: the RDD path's shuffled rows with preferred locations.

    An ``update`` marked by ``blobstate.spark.executor.rows.arrow_input`` (it takes ``pyarrow.RecordBatch``es) always
    takes the DataFrame path: its tasks hand it Spark's Arrow batches as they are.

    Raises what Spark raises once a task failed after its retries (the task's error in Spark's message), and
    ``ConfigurationError`` when the RDD path's Spark planned another number of partitions than N.
    """
    if plan.key_groups:  # a key-grouped store: partition p gets the rows of its key-group range
        shuffled = by_key_group_range(df, key_cols, plan.key_groups, plan.num_partitions, plan.routes)
    else:
        shuffled = df.repartition(plan.num_partitions, *key_cols)
    if takes_arrow(update):
        arrow = True
    if not (is_connect(df.sparkSession) if arrow is None else arrow):
        rdd = shuffled.rdd
        if rdd.getNumPartitions() != plan.num_partitions:
            raise ConfigurationError(f"Spark planned {rdd.getNumPartitions()} partitions, not {plan.num_partitions}")
        if place is not None:
            rdd = place(rdd)
        return rdd.mapPartitionsWithIndex(functools.partial(run_partition, plan, update)).collect()
    return collect_pickled(shuffled.mapInArrow(functools.partial(arrow_task, plan, update), OUTPUT_SCHEMA))


__all__ = ["run_tasks"]
