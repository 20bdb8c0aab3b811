"""One partition's batch of a stateful processor, on an executor: the processor runtime run inside the partitioned
state's task, its output rows and its prepare handed back through one ``mapInArrow``.

``stateful_task(plan, job, batches)`` is the ``mapInArrow`` function of the batch's Spark job
(``blobstate.spark.stateful.driver.on_partitions``). For shuffle partition ``p`` it runs
``blobstate.spark.partitioned.executor.batch_task.run_partition`` (the partition's RocksDB brought to the state
after the previous batch, the batch's writes staged, its changelog uploaded with a TTL, nothing applied), with an
``update`` that runs ``blobstate.spark.processor.run_batch`` over the partition's rows with the batch's times fixed
by the driver (``TaskJob``). It yields the batch's output rows, then one row holding the pickled ``Prepare``, all of
``task_schema``: the output schema's columns (nullable) and ``PREPARE`` (null on output rows).

The batch's input may carry an initial state's rows (the query's first batch, ``TaskJob.initial``): marked by the
``INITIAL`` column, their own columns under ``INITIAL_PREFIX`` (``initial_columns``), so that both land in the
partition their key hashes to; ``split_initial`` takes them apart again.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from blobstate.spark.executor.identity import task_partition
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, run_partition
from blobstate.spark.processor import BatchResult, BatchTimes, ProcessorSpec, run_batch
from blobstate.spark.processor.schema import parse

PREPARE = "__blobstate_prepare"
INITIAL = "__blobstate_initial"
INITIAL_PREFIX = "__blobstate_init__"


@dataclass(frozen=True)
class TaskJob:
    """What every task of a batch runs (picklable): the user's ``processor`` (each task unpickles its own copy),
    the runtime's ``spec``, the batch's ``times`` (read once by the driver from Spark's offset log), and whether the
    input carries an initial state's rows (``initial``, with their columns ``initial_columns``)."""

    processor: Any
    spec: ProcessorSpec
    times: BatchTimes
    initial: bool = False
    initial_columns: tuple[str, ...] = ()


def task_schema(spec: ProcessorSpec) -> Any:
    """The ``pyarrow.Schema`` a task outputs: the output schema's fields, nullable, then ``PREPARE`` (binary)."""
    import pyarrow as pa

    schema = parse(spec.output_schema, what="output schema").arrow()
    return pa.schema([pa.field(f.name, f.type, True) for f in schema] + [pa.field(PREPARE, pa.binary())])


def split_initial(table: Any, job: TaskJob) -> tuple[Any, Any]:
    """``(input rows, initial state rows)`` of a batch's ``table`` (``pyarrow.Table``; either may be None)."""
    import pyarrow.compute as pc

    if table is None:
        return None, None
    if not job.initial or INITIAL not in table.column_names:
        return table, None
    mark = pc.fill_null(table.column(INITIAL), False)
    keys = list(job.spec.key_columns)
    data = table.filter(pc.invert(mark))
    data = data.drop_columns([c for c in data.column_names if c == INITIAL or c.startswith(INITIAL_PREFIX)])
    init = table.filter(mark)
    init = init.select(keys + [INITIAL_PREFIX + c for c in job.initial_columns])
    init = init.rename_columns(keys + list(job.initial_columns))
    return (data if data.num_rows else None), (init if init.num_rows else None)


def as_input(batches: Iterable[Any]) -> Any:
    """The partition's Arrow record batches as one ``pyarrow.Table`` (None when the partition got none)."""
    import pyarrow as pa

    batches = list(batches)
    return pa.Table.from_batches(batches) if batches else None


def run_job(job: TaskJob, staged: Any, batches: Iterable[Any]) -> BatchResult:
    """The processor's batch on ``staged`` (a partition's or the driver's ``StagedWrites``) over ``batches``."""
    data, init = split_initial(as_input(batches), job)
    key_cols = tuple(job.spec.key_columns)
    return run_batch(job.processor, staged, data, job.spec, job.times, initial_state=init,
                     initial_key_columns=key_cols if init is not None else None)


def output_batches(output: Any, schema: Any) -> Iterator[Any]:
    """``output`` (a ``pyarrow.Table`` of the output schema) as record batches of the task's ``schema``."""
    import pyarrow as pa

    if output.num_rows == 0:
        return
    table = output.cast(pa.schema(list(schema)[:-1]))
    table = table.append_column(schema.field(PREPARE), pa.nulls(table.num_rows, pa.binary()))
    yield from table.to_batches()


def prepare_batch(prepare: Any, schema: Any) -> Any:
    """The task's one prepare row: ``PREPARE`` holds ``prepare`` pickled, every other column null."""
    import pyarrow as pa

    arrays = [pa.nulls(1, f.type) for f in list(schema)[:-1]] + [pa.array([pickle.dumps(prepare)], pa.binary())]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def stateful_task(plan: BatchPlan, job: TaskJob, batches: Iterator[Any]) -> Iterator[Any]:
    """The ``mapInArrow`` function (see the module docstring). Raises what ``run_partition`` and the processor
    raise (nothing uploaded when the processor fails)."""
    schema = task_schema(job.spec)
    results: list[BatchResult] = []

    def update(staged: Any, rows: Iterable[Any], ctx: Any) -> None:
        results.append(run_job(job, staged, rows))

    for prepare in run_partition(plan, update, task_partition(), batches):
        yield from output_batches(results[-1].output, schema)
        yield prepare_batch(prepare, schema)


__all__ = ["INITIAL", "INITIAL_PREFIX", "PREPARE", "TaskJob", "as_input", "output_batches", "prepare_batch",
           "run_job", "split_initial", "stateful_task", "task_schema"]
