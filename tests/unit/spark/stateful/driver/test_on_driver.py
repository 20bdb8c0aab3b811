"""``blobstate.spark.stateful.driver.on_driver``'s ``DriverRun`` without a Spark session: the real processor
(``tests.processors.running_count``) runs on real staged writes over a real RocksDB; the batch's DataFrame, the
driver binding's engine and Spark's checkpoint location are small stand-ins holding a ``pyarrow.Table``, the applied
batch and the offsets metadata. What is checked is the module's contract: the output goes to the sink only once the
batch's delta record is committed, never when the commit fails; the query id is read once; the initial state's rows
are added only while the store holds no batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from rocksdict import Rdict

from blobstate.errors import FencedError
from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor import ProcessorSpec
from blobstate.spark.stateful.driver import on_driver
from blobstate.spark.stateful.driver.on_driver import DriverRun
from tests.processors import running_count


class Session:
    """What the run asks of a Spark session: a DataFrame made of the output rows (kept as they are)."""

    def createDataFrame(self, table: Any, schema: Any = None) -> Any:  # noqa: N802 - Spark's name
        assert schema is not None and len(schema.fields) == table.num_columns  # Connect infers none from 0 rows
        return ("frame", table)


@dataclass
class Batch:
    """A micro-batch's DataFrame: its rows as Arrow."""

    table: pa.Table
    sparkSession: Session = field(default_factory=Session)  # noqa: N815 - Spark's name

    @property
    def columns(self) -> list[str]:
        return self.table.column_names

    def toArrow(self) -> pa.Table:  # noqa: N802 - Spark's name
        return self.table


class Location:
    """Spark's checkpoint location as the run reads it: the batches' offsets metadata and the query id."""

    reads: list[str] = []

    def __init__(self, spark: Any, location: str) -> None:
        self.location = location

    def query_id(self) -> str:
        Location.reads.append("query_id")
        return "q-1"

    def offset_metadata(self, batch_id: int) -> dict[str, Any]:
        return {"batchTimestampMs": 1_000 + batch_id, "batchWatermarkMs": 0, "conf": {}}


class Engine:
    """The driver binding's engine: stage the batch on the store's writes, then commit its delta record (or fail
    to: ``fail``), then apply it."""

    def __init__(self, db: Rdict, run: list[DriverRun]) -> None:
        self.db, self.run = db, run
        self.applied: int | None = None
        self.committed: list[int] = []
        self.fail: Exception | None = None

    def run_batch(self, df: Any, batch_id: int) -> None:
        staged = StagedWrites(self.db)
        self.run[0].stage(df, batch_id, staged)
        if self.fail is not None:
            raise self.fail
        self.committed.append(batch_id)
        apply_ops(self.db, staged.ops())
        self.applied = batch_id


@pytest.fixture
def db(tmp_path):
    handle = Rdict(str(tmp_path / "db"))
    yield handle
    handle.close()


@pytest.fixture
def driver(db, monkeypatch):
    """``(run, engine, sunk)``: a ``DriverRun`` of the running count on ``db``, its engine, what its sink got."""
    monkeypatch.setattr(on_driver, "CheckpointLocation", Location)
    Location.reads = []
    holder: list[DriverRun] = []
    engine = Engine(db, holder)
    sunk: list[tuple[int, list[dict[str, Any]], list[int]]] = []

    def sink(frame: Any, batch_id: int) -> None:  # what was committed when the output arrived
        sunk.append((batch_id, frame[1].to_pylist(), list(engine.committed)))

    binding = SimpleNamespace(config=SimpleNamespace(checkpoint_location="/ck/q"), engine=engine)
    run = DriverRun(binding, running_count.RunningCount(), ProcessorSpec(("k",), running_count.OUTPUT), sink)
    holder.append(run)
    return run, engine, sunk


def rows(*keys: str) -> Batch:
    return Batch(pa.table({"k": list(keys), "v": list(range(len(keys)))}))


def test_the_output_goes_to_the_sink_only_once_its_batch_is_committed(driver):
    run, engine, sunk = driver
    run(rows("a", "a", "b"), 0)
    run(rows("a"), 1)
    assert sunk == [(0, [{"k": "a", "count": 2}, {"k": "b", "count": 1}], [0]),
                    (1, [{"k": "a", "count": 3}], [0, 1])]  # each after its own commit; state carried over


def test_a_batch_whose_commit_fails_sends_nothing_and_its_rerun_gives_the_same_output(driver):
    run, engine, sunk = driver
    run(rows("a"), 0)
    engine.fail = FencedError("another writer")
    with pytest.raises(FencedError):
        run(rows("a", "b"), 1)
    assert [b for b, _, _ in sunk] == [0] and engine.applied == 0  # nothing of batch 1 reached the sink
    engine.fail = None
    run(rows("a", "b"), 1)  # Spark re-runs the batch: from the state after batch 0
    assert sunk[-1] == (1, [{"k": "a", "count": 2}, {"k": "b", "count": 1}], [0, 1])


def test_the_query_id_is_read_from_the_checkpoint_location_once(driver):
    run, _, _ = driver
    assert run.spec.query_id == ""
    run(rows("a"), 0)
    run(rows("b"), 1)
    assert run.spec.query_id == "q-1" and Location.reads == ["query_id"]


def test_the_initial_states_rows_are_added_only_while_the_store_holds_no_batch(driver):
    run, engine, sunk = driver
    added: list[int] = []

    def initial(batch: Batch) -> Batch:
        added.append(engine.committed[-1] if engine.committed else -1)
        return batch

    run.initial = initial
    run(rows("a"), 0)
    run(rows("a"), 1)
    assert added == [-1]  # once, before the first batch was committed
