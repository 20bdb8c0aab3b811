"""The two ways ``blobstate.spark.partitioned.driver.job`` launches a partitioned batch's job, on the real local[2,2]
session: the DataFrame path (``mapInArrow``, the one Spark Connect has) hands ``update`` the same rows, in the same
partitions, with the same values and types as the RDD path classic PySpark uses, including an empty partition, and both
return one prepare per partition that ``accept`` takes."""

from __future__ import annotations

import datetime as dt
import os
import pickle
from decimal import Decimal

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.repository.repo import Repository  # noqa: E402
from blobstate.spark.partitioned.driver.job import run_tasks  # noqa: E402
from blobstate.spark.partitioned.driver.state import accept  # noqa: E402
from blobstate.spark.partitioned.executor.batch_task import BatchPlan  # noqa: E402

N = 4
KEY = StoreKey("job", "group", "rows")
SCHEMA = ("id int, k string, big bigint, x double, amount decimal(12,2), day date, at timestamp, ok boolean, "
          "raw binary, xs array<int>, s struct<a:int,b:string>, m map<string,int>")


def _rows() -> list[tuple]:
    at = dt.datetime(2013, 1, 1, 5, 15, 30, 123456)
    return [(i, f"k{i % 3}", 2**40 + i, i / 7, Decimal(f"{i}.25"), dt.date(2013, 1, 1 + i % 28),
             at + dt.timedelta(hours=i), i % 2 == 0, bytes([i % 256, 1]), [i, None], (i, f"s{i}"), {"a": i})
            for i in range(200)] + [(1000, "k0", None, None, None, None, None, None, None, None, None, None)]


def test_the_dataframe_path_gives_update_the_rows_the_rdd_path_gives(spark_session, tmp_path):
    df = spark_session.createDataFrame(_rows(), SCHEMA)  # keys k0-k2: at most 3 of the 4 partitions hold rows
    seen = str(tmp_path / "seen")
    os.makedirs(seen)

    def update(db, rows, ctx):  # in the Python worker: keep what the task got, for the comparison
        rows = list(rows)
        with open(os.path.join(seen, f"{ctx.partition}-{ctx.batch_id}.pkl"), "wb") as fh:
            pickle.dump([(type(r).__name__, list(r.asDict()), tuple(r), [type(v).__name__ for v in r]) for r in rows],
                        fh)
        for r in rows:
            db[f"row/{r['id']}"] = str(ctx.partition)

    got = {}
    for batch_id, arrow in enumerate((False, True)):
        repo = f"file://{tmp_path}/repo-{batch_id}"
        Repository.open(repo, create=True).close()
        plan = BatchPlan(repo, KEY, str(tmp_path / f"local-{batch_id}"), N, batch_id, 0, None, {})
        prepares = accept(run_tasks(df, plan, update, ["k"], arrow=arrow), plan)
        assert [p.partition for p in prepares] == list(range(N)) and {p.batch_id for p in prepares} == {batch_id}
        got[arrow] = {}
        for p in range(N):
            with open(os.path.join(seen, f"{p}-{batch_id}.pkl"), "rb") as fh:
                got[arrow][p] = sorted(pickle.load(fh), key=lambda r: r[2][0])
    assert got[True] == got[False]
    sizes = [len(rows) for rows in got[True].values()]
    assert sum(sizes) == 201 and 0 in sizes  # 3 keys in 4 partitions: an empty one ran its task too
    by_id = {values[0]: (name, names, values, types) for rows in got[True].values()
             for name, names, values, types in rows}
    assert {(name, tuple(names)) for name, names, _, _ in by_id.values()} == {
        ("Row", tuple(f.split()[0] for f in SCHEMA.split(", ")))}
    assert [by_id[i][2] for i in sorted(by_id)] == _rows()  # the values given, back as given
    assert by_id[5][3] == ["int", "str", "int", "float", "Decimal", "date", "datetime", "bool", "bytes", "list",
                           "Row", "dict"]
