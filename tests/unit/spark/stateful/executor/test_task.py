"""``blobstate.spark.stateful.executor.task`` without Spark: the task's output schema and rows, an initial state's
rows taken apart from the input, and a batch run on staged writes (on a real RocksDB, a virtual clock: every
batch is given its times)."""

from __future__ import annotations

import pickle

import pandas as pd
import pyarrow as pa
import pytest
from rocksdict import Rdict

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.processor import BatchTimes, ProcessorSpec
from blobstate.spark.stateful.executor.task import (
    INITIAL,
    INITIAL_PREFIX,
    PREPARE,
    TaskJob,
    output_batches,
    prepare_batch,
    run_job,
    split_initial,
    task_schema,
)
from tests.processors import running_count


@pytest.fixture
def db(tmp_path):
    handle = Rdict(str(tmp_path / "db"))
    yield handle
    handle.close()


def test_the_task_schema_is_the_output_nullable_then_the_prepare_column():
    schema = task_schema(ProcessorSpec(("k",), "k string NOT NULL, n long"))
    assert schema.names == ["k", "n", PREPARE]
    assert all(f.nullable for f in schema) and schema.field(PREPARE).type == pa.binary()


def test_output_rows_then_one_prepare_row():
    schema = task_schema(ProcessorSpec(("k",), "k string, n long"))
    out = pa.table({"k": ["a", "b"], "n": [1, 2]})
    rows = pa.Table.from_batches([*output_batches(out, schema), prepare_batch({"p": 3}, schema)])
    assert rows.column("k").to_pylist() == ["a", "b", None] and rows.column("n").to_pylist() == [1, 2, None]
    assert [None if v is None else pickle.loads(v) for v in rows.column(PREPARE).to_pylist()] == [None, None,
                                                                                                  {"p": 3}]
    assert list(output_batches(out.slice(0, 0), schema)) == []


def test_initial_state_rows_are_taken_apart_from_the_input():
    spec = ProcessorSpec(("k",), "k string, count long")
    table = pa.table({"k": ["a", "b", "c"], "v": [1, None, 3], INITIAL: [False, True, False],
                      INITIAL_PREFIX + "count": [None, 40, None]})
    data, init = split_initial(table, TaskJob(None, spec, BatchTimes(0, 0), True, ("count",)))
    assert data.to_pydict() == {"k": ["a", "c"], "v": [1, 3]}
    assert init.to_pydict() == {"k": ["b"], "count": [40]}
    plain = pa.table({"k": ["a"], "v": [1]})
    assert split_initial(plain, TaskJob(None, spec, BatchTimes(0, 0))) == (plain, None)
    assert split_initial(None, TaskJob(None, spec, BatchTimes(0, 0))) == (None, None)


def test_a_run_job_counts_the_batches_rows_on_the_staged_writes(db):
    spec = ProcessorSpec(("k",), running_count.OUTPUT)
    for batch_id, keys in enumerate([["a", "a", "b"], ["a"]]):
        staged = StagedWrites(db)
        frame = pa.Table.from_pandas(pd.DataFrame({"k": keys, "v": range(len(keys))}), preserve_index=False)
        result = run_job(TaskJob(running_count.RunningCount(), spec, BatchTimes(batch_id, 0)), staged,
                         frame.to_batches())
        apply_ops(db, staged.ops())
    assert result.output.to_pylist() == [{"k": "a", "count": 3}]
