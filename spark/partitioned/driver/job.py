"""The Spark job of a partitioned micro-batch: ``mapInArrow`` under Spark Connect, the RDD API on classic PySpark.

``run_tasks(df, plan, update, key_cols)`` repartitions the batch by ``key_cols`` into N partitions (Spark's hash
partitioning, ``pmod(murmur3(key_cols), N)``; a repartition to an explicit number is never coalesced by adaptive
execution), runs ``blobstate.spark.partition_task.run_partition`` once per partition ``p`` and ``collect()``s one
``Prepare`` per task:

- the DataFrame path (Spark Connect, where a DataFrame has no ``rdd``): ``repartition(N, *key_cols)
  .mapInArrow(task, "prepare binary")``. The task reading shuffle partition ``p`` (``TaskContext.partitionId()``)
  receives it as Arrow record batches (``spark.sql.execution.arrow.maxRecordsPerBatch`` rows each, 10,000 by
  default) and hands ``update`` an iterator of ``pyspark.sql.Row``, converted one record batch at a time (never
  the whole partition) by Spark's own Arrow-to-Row conversion, so the values are those ``collect()`` gives; the
  ``Prepare`` comes back pickled in the one row the task outputs;
- the RDD path (classic): ``repartition(N, *key_cols).rdd.mapPartitionsWithIndex``, with the number of partitions
  Spark planned checked against N (free there: the RDD is planned once). On classic it costs about 50 ms less per
  batch than the DataFrame path (Spark's Arrow runner per task; ``python -m bench.partition_job``), and needs no
  pyarrow. The shuffled rows are wrapped by ``place`` (``blobstate.spark.placement.SparkPlacement.place``) so that
  task ``p`` runs on the executor holding partition ``p``'s copy.

A partition with no rows still runs its task (its state moves to the batch, with an empty changelog); a task whose
output never reaches ``collect`` (a failed, retried or speculative attempt) leaves nothing to accept: the driver's
``accept`` checks that the prepares cover exactly the N partitions (the DataFrame path's only check of N: asking
Spark for the planned count would plan the job a second time, about 50 ms).
"""

from __future__ import annotations

import functools
import logging
import pickle
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from blobstate.errors import ConfigurationError
from blobstate.spark.location import is_connect
from blobstate.spark.partition_task import BatchPlan, Prepare, Update, run_partition

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

OUTPUT_SCHEMA = "prepare binary"  # one row per task: the pickled ``Prepare``


def run_tasks(df: DataFrame, plan: BatchPlan, update: Update, key_cols: list[str], *,
              arrow: bool | None = None, place: Callable[[Any], Any] | None = None) -> list[Prepare]:
    """Run batch ``plan.batch_id``'s one Spark job over ``df`` and return the tasks' prepares, in the order
    ``collect`` gives them (one per successful task; ``accept`` checks them). ``arrow``: the DataFrame path (default:
    under Spark Connect only); ``place(rdd) -> rdd``: the RDD path's shuffled rows with preferred locations.

    Raises what Spark raises once a task failed after its retries (the task's error in Spark's message), and
    ``ConfigurationError`` when the RDD path's Spark planned another number of partitions than N.
    """
    shuffled = df.repartition(plan.num_partitions, *key_cols)
    if not (is_connect(df.sparkSession) if arrow is None else arrow):
        rdd = shuffled.rdd
        if rdd.getNumPartitions() != plan.num_partitions:
            raise ConfigurationError(f"Spark planned {rdd.getNumPartitions()} partitions, not {plan.num_partitions}")
        if place is not None:
            rdd = place(rdd)
        return rdd.mapPartitionsWithIndex(functools.partial(run_partition, plan, update)).collect()
    return collect_pickled(shuffled.mapInArrow(functools.partial(_task, plan, update), OUTPUT_SCHEMA))


def run_bounded_job(sc: Any, what: str, tasks: int, place: Callable[[Any], Any] | None,
                    task: Callable[[int, Iterable[Any]], Iterator[Any]], timeout_s: float) -> list[Any] | None:
    """A small job of ``tasks`` tasks (``place``: where each runs) running ``task(index, rows)``, waited for at most
    ``timeout_s``: its results, or None when it did not finish in time (cancelled) or failed (logged at INFO:
    these jobs are optimisations). Classic PySpark, a running SparkContext."""
    group = f"blobstate-{uuid.uuid4().hex[:12]}"
    done: list[list[Any]] = []

    def job() -> None:
        try:
            sc.setJobGroup(group, f"blobstate: {what}", interruptOnCancel=True)
            rdd = sc.parallelize(list(range(tasks)), tasks)  # a list: no Python stage before the task's
            if place is not None:
                rdd = place(rdd)
            done.append(rdd.mapPartitionsWithIndex(task).collect())
        except Exception as exc:  # noqa: BLE001 - an optimisation: the caller goes on without it
            log.info("could not %s: %s", what, exc)

    thread = threading.Thread(target=job, name=group, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.info("could not %s within %s s", what, timeout_s)
        sc.cancelJobGroup(group)
        thread.join(timeout_s)
        return None
    return done[0] if done else None


def release_task(plan: BatchPlan, partition: int, rows: Iterable[Any]) -> Iterator[bool]:
    """Task ``partition`` of the release job: its host closes the partition's open database (``close``)."""
    from blobstate.spark.partition_task import release_partition

    for _ in rows:  # read to the end: Spark reuses only a Python worker that read its input
        pass
    yield release_partition(plan.local_dir, plan.key, partition)


def locate_task(plan: BatchPlan, index: int, rows: Iterable[Any]) -> Iterator[tuple[str, dict[int, str]]]:
    """A task of the locate job: (its executor, ``{partition: the record its host's copy is at}``), from the
    markers on this host (``blobstate.spark.placement.Placement.adopt``)."""
    from blobstate.spark.partition_task import local_markers
    from blobstate.spark.placement import task_identity

    for _ in rows:
        pass
    yield task_identity().executor, local_markers(plan.local_dir, plan.key, plan.num_partitions)


def collect_pickled(out: DataFrame) -> list[Any]:
    """``collect()`` a ``mapInArrow`` output of schema ``OUTPUT_SCHEMA`` and unpickle its rows."""
    return [pickle.loads(row.prepare) for row in out.collect()]


def pickled_batch(obj: Any) -> pa.RecordBatch:
    """One ``OUTPUT_SCHEMA`` row holding ``obj`` pickled: what a ``mapInArrow`` task hands back to the driver."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({"prepare": [pickle.dumps(obj)]},
                                      schema=pa.schema([pa.field("prepare", pa.binary())]))


def _task(plan: BatchPlan, update: Update, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """One task of the job (``mapInArrow``): partition ``TaskContext.partitionId()``'s rows through ``update``."""
    for prepare in run_partition(plan, update, task_partition(), arrow_rows(batches)):
        yield pickled_batch(prepare)


def task_partition() -> int:
    """The partition index of the running Spark task. Raises ``RuntimeError`` outside a task."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("blobstate's partition task runs outside a Spark task")
    return int(context.partitionId())


def arrow_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[Any]:
    """``pyspark.sql.Row``s of ``batches``, one record batch converted at a time, with ``collect()``'s values
    (Spark's own Arrow-to-Row conversion: timestamps as local naive datetimes, structs as ``Row``, ...)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    convert = _converter()
    schema = None
    for batch in batches:
        if schema is None:
            schema = from_arrow_schema(batch.schema)
        yield from convert(pa.Table.from_batches([batch]), schema)


def _converter() -> Any:
    """Spark's Arrow table to ``Row`` list conversion (``pyspark.sql.conversion`` since 4.0, before in
    ``pyspark.sql.connect.conversion``)."""
    try:
        from pyspark.sql.conversion import ArrowTableToRowsConversion
    except ImportError:  # PySpark 3.5
        from pyspark.sql.connect.conversion import ArrowTableToRowsConversion
    return ArrowTableToRowsConversion.convert


__all__ = ["OUTPUT_SCHEMA", "arrow_rows", "collect_pickled", "locate_task", "pickled_batch", "release_task",
           "run_bounded_job", "run_tasks", "task_partition"]
