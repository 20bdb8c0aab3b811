"""``blobstate.spark.partitioned.driver.job.run_tasks`` without a Spark session: the batch's DataFrame, its shuffle
and its RDD are stand-ins recording what the job asks of Spark (the tasks themselves run in
tests/unit/spark/partitioned/executor, the whole job on local Spark in tests/e2e). What is checked is the module's
contract: the batch repartitioned by the key columns into N; the RDD path on classic PySpark, with the planned
number of partitions checked against N and the rows placed; the DataFrame path under Spark Connect (or when asked),
its tasks' pickled prepares unpickled in ``collect`` order."""

from __future__ import annotations

import pickle
from types import SimpleNamespace
from typing import Any

import pytest

from blobstate.errors import ConfigurationError
from blobstate.model.records import StoreKey
from blobstate.spark.executor.rows import OUTPUT_SCHEMA
from blobstate.spark.partitioned.driver.job import run_tasks
from blobstate.spark.partitioned.executor.batch_task import BatchPlan, arrow_task, run_partition

PLAN = BatchPlan("file:///repo", StoreKey("j", "t", "s"), "/local", 3, 7, 0, 6, {0: (), 1: (), 2: ()})


def update(db: Any, rows: Any, ctx: Any) -> None:
    """The user's update function (never called here: the tasks do not run)."""


class Rdd:
    """The shuffled rows as an RDD: its planned partitions; ``mapPartitionsWithIndex(task).collect()`` returns the
    prepares ``answers`` (what Spark's tasks would hand back) and records the task."""

    def __init__(self, log: list[Any], planned: int, answers: list[Any], placed: bool = False) -> None:
        self.log, self.planned, self.answers, self.placed = log, planned, answers, placed
        self.task: Any = None

    def getNumPartitions(self) -> int:  # noqa: N802 - Spark's names
        return self.planned

    def mapPartitionsWithIndex(self, task: Any) -> Rdd:  # noqa: N802
        self.log.append(("rdd tasks", task.func, task.args, self.placed))
        return self

    def collect(self) -> list[Any]:
        return list(self.answers)


class Frame:
    """The batch's DataFrame and its shuffle: ``repartition`` recorded; ``rdd`` (classic) or ``mapInArrow``
    (Connect) whose ``collect`` gives one row per task, its prepare pickled."""

    def __init__(self, log: list[Any], *, planned: int = 3, answers: list[Any] = (), connect: bool = False) -> None:
        self.log, self.answers = log, list(answers)
        self.rdd = Rdd(log, planned, self.answers)
        module = "pyspark.sql.connect.session" if connect else "pyspark.sql.session"
        self.sparkSession = type("SparkSession", (), {"__module__": module})()  # noqa: N815 - Spark's name

    def repartition(self, n: int, *cols: str) -> Frame:
        self.log.append(("repartition", n, cols))
        return self

    def mapInArrow(self, task: Any, schema: Any) -> Any:  # noqa: N802 - Spark's name
        self.log.append(("arrow tasks", task.func, task.args, schema))
        return SimpleNamespace(collect=lambda: [SimpleNamespace(prepare=pickle.dumps(a)) for a in self.answers])


def test_classic_pyspark_runs_the_rdd_path_on_the_rows_shuffled_by_key_into_n():
    log: list[Any] = []
    prepares = run_tasks(Frame(log, answers=["p2", "p0", "p1"]), PLAN, update, ["origin", "dest"])
    assert prepares == ["p2", "p0", "p1"]  # as collect gives them: accept checks they cover the N partitions
    assert log == [("repartition", 3, ("origin", "dest")), ("rdd tasks", run_partition, (PLAN, update), False)]


def test_the_rdd_path_places_the_shuffled_rows_before_running_the_tasks():
    log: list[Any] = []
    frame = Frame(log, answers=["p0"])

    def place(rdd: Rdd) -> Rdd:
        return Rdd(log, rdd.planned, rdd.answers, placed=True)

    assert run_tasks(frame, PLAN, update, ["k"], place=place) == ["p0"]
    assert log[-1] == ("rdd tasks", run_partition, (PLAN, update), True)


def test_the_rdd_path_refuses_a_plan_with_another_number_of_partitions():
    log: list[Any] = []
    with pytest.raises(ConfigurationError, match="Spark planned 2 partitions, not 3"):
        run_tasks(Frame(log, planned=2), PLAN, update, ["k"])
    assert not [entry for entry in log if entry[0] == "rdd tasks"]  # no task ran


@pytest.mark.parametrize("connect, arrow", [(True, None), (False, True)])
def test_spark_connect_or_arrow_runs_the_dataframe_path_and_unpickles_the_prepares(connect, arrow):
    log: list[Any] = []
    frame = Frame(log, planned=99, answers=[{"p": 1}, {"p": 0}], connect=connect)  # N is not asked of Spark here
    placed: list[Any] = []
    assert run_tasks(frame, PLAN, update, ["k"], arrow=arrow, place=placed.append) == [{"p": 1}, {"p": 0}]
    assert log == [("repartition", 3, ("k",)), ("arrow tasks", arrow_task, (PLAN, update), OUTPUT_SCHEMA)]
    assert placed == []  # placement is the RDD path's


def test_arrow_false_takes_the_rdd_path_even_under_spark_connect():
    log: list[Any] = []
    assert run_tasks(Frame(log, answers=["p"], connect=True), PLAN, update, ["k"], arrow=False) == ["p"]
    assert log[-1][0] == "rdd tasks"
