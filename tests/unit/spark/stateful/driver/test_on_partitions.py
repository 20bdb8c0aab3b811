"""``blobstate.spark.stateful.driver.on_partitions``'s ``PartitionedRun`` and ``release`` without a Spark session:
the partitioned state, the batch's DataFrame, Spark's checkpoint location and the kept rows are stand-ins (the
batch's Spark job itself, ``stateful_job``, runs on local Spark in tests/e2e). What is checked is the module's
contract: each batch's job gets the batch's times and the query id; the output goes to the sink only once the
group record is committed, never when the commit fails; the kept blocks are released either way."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from blobstate.errors import FencedError
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.stateful.driver import on_partitions
from blobstate.spark.stateful.driver.on_partitions import Kept, PartitionedRun, release, stateful_job


class Location:
    """Spark's checkpoint location as the run reads it: the batches' offsets metadata and the query id."""

    def __init__(self, spark: Any, location: str) -> None:
        self.location = location

    def query_id(self) -> str:
        return "q-7"

    def offset_metadata(self, batch_id: int) -> dict[str, Any]:
        return {"batchTimestampMs": 5_000 + batch_id, "batchWatermarkMs": 0, "conf": {}}


class Blocks:
    """A locally checkpointed DataFrame's handle down to its RDD (``_jdf...rdd()``): records ``unpersist``."""

    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.log, self.fail = log, fail
        self._jdf = self

    def queryExecution(self) -> Blocks:  # noqa: N802 - Spark's names
        return self

    def logical(self) -> Blocks:
        return self

    def rdd(self) -> Blocks:
        if self.fail:
            raise AttributeError("not classic PySpark")
        return self

    def unpersist(self, blocking: bool) -> None:
        self.log.append(f"unpersist(blocking={blocking})")


class State:
    """The partitioned state: runs the batch's job (as ``stateful_job`` would, the kept rows and their output set),
    then commits the group record of the batch, or fails to (``fail``)."""

    checkpoint_location = "/ck/q"

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.fail: Exception | None = None
        self.jobs: list[Any] = []

    def run_batch(self, df: Any, batch_id: int, *, job: Any) -> None:
        assert job.func is stateful_job
        self.jobs.append(job.keywords["job"])
        kept = job.keywords["kept"]
        kept.rows, kept.output = Blocks(self.log), f"output of {batch_id}"
        if self.fail is not None:
            raise self.fail
        self.log.append(f"committed {batch_id}")


@pytest.fixture
def partitioned(monkeypatch):
    """``(run, state, log)``: a ``PartitionedRun`` on a stand-in state, and the order things happened in."""
    monkeypatch.setattr(on_partitions, "CheckpointLocation", Location)
    log: list[str] = []
    state = State(log)
    spec = ProcessorSpec(("k",), "k string, n long")
    run = PartitionedRun(state, processor="the processor", spec=spec,  # type: ignore[arg-type]
                         sink=lambda output, batch_id: log.append(f"sink {output} as {batch_id}"),
                         initial_columns=("n",))
    return run, state, log


def batch() -> Any:
    return SimpleNamespace(sparkSession=None, columns=["k", "v"])


def test_the_output_goes_to_the_sink_after_the_commit_and_the_kept_rows_are_released(partitioned):
    run, state, log = partitioned
    run(batch(), 3)
    assert log == ["committed 3", "sink output of 3 as 3", "unpersist(blocking=False)"]


def test_a_batch_whose_commit_fails_sends_nothing_and_still_releases_its_rows(partitioned):
    run, state, log = partitioned
    state.fail = FencedError("another driver")
    with pytest.raises(FencedError):
        run(batch(), 4)
    assert log == ["unpersist(blocking=False)"]


def test_each_batchs_job_has_its_times_and_the_query_id(partitioned):
    run, state, _ = partitioned
    run(batch(), 0)
    run(batch(), 1)
    first, second = state.jobs
    assert (first.times.batch_id, first.times.processing_time_ms) == (0, 5_000)
    assert (second.times.batch_id, second.times.processing_time_ms) == (1, 5_001)
    assert first.spec.query_id == second.spec.query_id == run.spec.query_id == "q-7"
    assert first.processor == "the processor" and first.initial is False and first.initial_columns == ("n",)


def test_release_drops_the_kept_blocks_once_and_tolerates_what_it_cannot_reach():
    log: list[str] = []
    kept = Kept(rows=Blocks(log), output="out")
    release(kept)
    assert log == ["unpersist(blocking=False)"] and (kept.rows, kept.output) == (None, None)
    release(kept)  # nothing kept: nothing to do
    assert log == ["unpersist(blocking=False)"]
    unreachable = Kept(rows=Blocks(log, fail=True), output="out")
    release(unreachable)  # Spark Connect, another plan shape: left to Spark's context cleaner
    assert (unreachable.rows, unreachable.output) == (None, None) and len(log) == 1
