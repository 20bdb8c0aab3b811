"""A stateful processor on the driver's store (``num_partitions=None``): the driver binding's engine commits each
batch's writes as one delta record, and only then do the batch's output rows go to the sink.

Per micro-batch ``b`` (``DriverRun``, the ``foreachBatch`` function):

1. the batch's times from Spark's offset log (``blobstate.spark.stateful.driver.times``), the heartbeat's rows
   dropped, the initial state's rows added when the store holds no batch yet (``inputs``);
2. ``blobstate.spark.binding.engine.BatchEngine.run_batch``: the engine checks that the store holds exactly ``b - 1``,
   calls ``stage``, which runs the processor (``blobstate.spark.stateful.executor.task.run_job``) over the batch as
   Arrow (``toArrow``) on the engine's ``StagedWrites``, then commits the writes as the delta record of ``b`` and
   applies them;
3. once that record is committed: ``sink(output, b)``, the output a DataFrame made from the Arrow rows the
   processor emitted (computed once, on the driver).

A crash before the commit, or between the commit and the sink, makes Spark re-run ``b``: the store is restored to
the state after ``b - 1`` (Spark never committed ``b``), the times are the same, so the output is the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from blobstate.spark.binding.lifecycle import StateBinding
from blobstate.spark.committed.location import CheckpointLocation
from blobstate.spark.processor import BatchResult, ProcessorSpec
from blobstate.spark.stateful.driver.inputs import without_heartbeat
from blobstate.spark.stateful.driver.times import read_batch_times
from blobstate.spark.stateful.executor.task import TaskJob, run_job

Sink = Callable[[Any, int], None]


@dataclass
class DriverRun:
    """The ``foreachBatch`` function of a stateful processor on ``binding``'s store (see the module docstring)."""

    binding: StateBinding
    processor: Any
    spec: ProcessorSpec
    sink: Sink
    initial: Callable[[Any], Any] | None = None
    initial_columns: tuple[str, ...] = ()
    _pending: list[tuple[Any, BatchResult | None]] = field(default_factory=list)

    def stage(self, df: Any, batch_id: int, staged: Any) -> None:
        """The engine's batch function: the processor's batch on the store's ``staged`` writes."""
        location = CheckpointLocation(df.sparkSession, self.binding.config.checkpoint_location)
        if not self.spec.query_id:
            self.spec = replace(self.spec, query_id=location.query_id() or "")
        times = read_batch_times(location, batch_id, self.spec.time_mode)
        batch = without_heartbeat(df)
        first = self.initial is not None and self.binding.engine.applied is None
        if first:
            batch = self.initial(batch)  # type: ignore[misc]
        job = TaskJob(self.processor, self.spec, times, first, self.initial_columns)
        self._pending.append((df.sparkSession, run_job(job, staged, batch.toArrow().to_batches())))

    def __call__(self, df: Any, batch_id: int) -> None:
        self._pending.clear()
        self.binding.engine.run_batch(df, batch_id)  # stage, then the delta record of batch_id, then apply
        from pyspark.sql.pandas.types import from_arrow_schema

        spark, result = self._pending.pop()
        assert result is not None
        # the schema given: Spark Connect infers none from a batch without output rows (CANNOT_INFER_EMPTY_SCHEMA)
        output = spark.createDataFrame(result.output, schema=from_arrow_schema(result.output.schema))
        self.sink(output, batch_id)  # only once batch_id is committed


__all__ = ["DriverRun"]
