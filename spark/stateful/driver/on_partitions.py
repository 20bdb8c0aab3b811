"""A stateful processor on N partitions: the batch's one Spark job, and the batch committed before its output rows
go to the sink.

Per micro-batch ``b`` (``PartitionedRun``, the ``foreachBatch`` function):

1. the batch's times from Spark's offset log (``blobstate.spark.stateful.driver.times``), the heartbeat's rows
   dropped (``inputs``);
2. ``PartitionedState.run_batch`` (``blobstate.spark.partitioned.driver.state``: the group's records read, a fenced
   driver refused, one group record committed for the N prepares) with ``stateful_job`` as the batch's job: the rows
   repartitioned by the key columns into N partitions (with the initial state's rows in the query's first batch),
   ``mapInArrow`` running ``blobstate.spark.stateful.executor.task.stateful_task`` per partition (the output rows,
   then the prepare row), ``localCheckpoint(eager=True)``: the tasks' rows are computed once and kept on the
   executors, so the output handed to the sink is the one whose state was staged (never recomputed into another
   answer); only the N prepare rows are collected to the driver;
3. once the group record of ``b`` is committed: ``sink(output, b)``, the output a DataFrame over the kept rows
   (never collected); then the kept blocks are released.

A crash before the commit, or between the commit and the sink, makes Spark re-run ``b`` (``commits/b`` is written
only once ``foreachBatch`` returns): the re-run starts from the state after ``b - 1`` (the newest record of a batch
wins), with the same times, so its output is the same and an idempotent sink (an overwrite by batch id, Delta's
``txnVersion``) sees it exactly once.

Placement (classic PySpark with blobstate's JVM helper; ``placed_rows``): as the partitioned state's own job, task
``p`` runs on the executor holding partition ``p``'s copy. The repartitioned rows' JVM ``RDD[InternalRow]``
(``queryExecution().toRdd()``: the shuffle's reduce side, N partitions) is wrapped one to one in the helper's
``PlacedRDD`` through ``SparkPlacement.place`` (the locations ``Placement.choose`` gave, preferred by Spark's
scheduler), a DataFrame is made over it again (``SparkSession.internalCreateDataFrame``: a ``LogicalRDD``, no copy)
and ``mapInArrow`` runs on that, so the Arrow path is kept. ``PlacedRDD.compute`` runs before the Arrow runner sends
the task's local properties to the Python worker, so each task reports its executor in its prepare and
``PartitionedState.run_batch`` records it (``Placement.record``) as for its own job. Under Spark Connect there is no
placer (no JVM handle in the server's Python worker) and the tasks go where Spark's shuffle puts them: a partition
whose copy is on another host is restored there.
"""

from __future__ import annotations

import functools
import logging
import pickle
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.partitioned.driver.state import PartitionedState
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, Prepare
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.stateful.driver.inputs import without_heartbeat
from blobstate.spark.stateful.driver.times import read_batch_times
from blobstate.spark.stateful.executor.task import PREPARE, TaskJob, stateful_task, task_schema

log = logging.getLogger(__name__)

Sink = Callable[[Any, int], None]


@dataclass
class Kept:
    """The batch's rows kept on the executors (``localCheckpoint``) and its output over them."""

    rows: Any = None
    output: Any = None


def stateful_job(df: Any, plan: BatchPlan, update: Any, key_cols: list[str], *, job: TaskJob, kept: Kept,
                 initial: Callable[[Any], Any] | None = None, place: Any = None) -> list[Prepare]:
    """The batch's Spark job (``PartitionedState.run_batch``'s ``job``): see step 2 of the module docstring.
    ``initial(df) -> df`` adds the initial state's rows (the first batch of a new state only); ``place(rdd) ->
    rdd`` (``SparkPlacement.place`` with the batch's locations; None under Spark Connect) places the tasks
    (``placed_rows``). Returns the prepares collected; ``kept`` holds the output."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    first = plan.upto is None and not any(plan.records.values())
    if initial is not None and first:
        df = initial(df)
        job = TaskJob(job.processor, job.spec, job.times, True, job.initial_columns)
    schema = task_schema(job.spec)
    shuffled = df.repartition(plan.num_partitions, *key_cols)
    if place is not None:
        shuffled = placed_rows(shuffled, place)
    rows = shuffled.mapInArrow(functools.partial(stateful_task, plan, job), from_arrow_schema(schema))
    kept.rows = rows.localCheckpoint(eager=True)
    prepares = [pickle.loads(r[0]) for r in kept.rows.filter(F.col(PREPARE).isNotNull()).select(PREPARE).collect()]
    kept.output = kept.rows.filter(F.col(PREPARE).isNull()).drop(PREPARE)
    return prepares


def placed_rows(shuffled: Any, place: Callable[[Any], Any]) -> Any:
    """``shuffled`` (a classic DataFrame of N partitions) over the same rows, partition ``p`` preferring the location
    ``place`` gives it (see the module docstring); ``shuffled`` itself when ``place`` returns its input unchanged
    (the JVM helper unavailable: logged once by ``SparkPlacement``)."""
    from pyspark.rdd import RDD
    from pyspark.sql import DataFrame

    spark = shuffled.sparkSession
    rows = RDD(shuffled._jdf.queryExecution().toRdd().toJavaRDD(), spark.sparkContext)
    placed = place(rows)
    if placed is rows:
        return shuffled
    jdf = spark._jsparkSession.internalCreateDataFrame(placed._jrdd.rdd(), shuffled._jdf.schema(), False)
    return DataFrame(jdf, spark)


def release(kept: Kept) -> None:
    """Drop the kept blocks of a batch (its locally checkpointed RDD) from the executors; what cannot be reached
    (Spark Connect) is left to Spark's context cleaner."""
    if kept.rows is None:
        return
    try:
        kept.rows._jdf.queryExecution().logical().rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - not classic PySpark, or another plan shape: the cleaner frees it
        log.debug("could not unpersist a batch's kept rows", exc_info=True)
    kept.rows = kept.output = None


@dataclass
class PartitionedRun:
    """The ``foreachBatch`` function of a stateful processor on ``state`` (a ``PartitionedState``): ``processor``,
    ``spec`` (``query_id``/``run_id`` filled per batch), ``sink(df, batch_id)``, ``initial(df) -> df`` (the
    initial state's rows added to the first batch, or None), ``initial_columns``."""

    state: PartitionedState
    processor: Any
    spec: ProcessorSpec
    sink: Sink
    initial: Callable[[Any], Any] | None = None
    initial_columns: tuple[str, ...] = ()

    def __call__(self, df: Any, batch_id: int) -> None:
        location = CheckpointLocation(df.sparkSession, self.state.checkpoint_location)
        times = read_batch_times(location, batch_id, self.spec.time_mode)
        spec = self.spec
        if not spec.query_id:
            spec = self.spec = replace(spec, query_id=location.query_id() or "")
        kept = Kept()
        job = functools.partial(stateful_job, job=TaskJob(self.processor, spec, times, False, self.initial_columns),
                                kept=kept, initial=self.initial)
        try:
            self.state.run_batch(without_heartbeat(df), batch_id, job=job)
            self.sink(kept.output, batch_id)  # only once the group record of batch_id is committed
        finally:
            release(kept)


__all__ = ["Kept", "PartitionedRun", "placed_rows", "release", "stateful_job"]
