"""The old ``update(db, rows, ctx)`` API with Arrow input (issue 41): an update marked by
``blobstate.spark.arrow_input`` gets its partition's rows as ``pyarrow.RecordBatch``es on real local Spark (classic
PySpark, where an unmarked update gets Rows through the RDD path), reads and writes the store in bulk
(``get_many``/``put_many``), and leaves every partition's state, restored from the repository alone, equal to the
same fold over Rows."""

from __future__ import annotations

import struct

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import restored_partitions  # noqa: E402

from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.spark import arrow_input, partitioned  # noqa: E402

N = 4


def _folds():
    """The two folds, made here so that Spark pickles them by value (this module is not importable on a worker)."""

    def _fold_rows(db, rows, ctx):
        for row in rows:
            if type(row).__name__ != "Row":
                raise TypeError(f"an unmarked update gets Rows, not {type(row).__name__}")
            old = db.get(row.k)
            n, s = (0, 0) if old is None else struct.unpack("<qq", old)
            db.put(row.k, struct.pack("<qq", n + 1, s + row.v))


    @arrow_input
    def _fold_arrow(db, batches, ctx):
        import pyarrow as pa

        for batch in batches:
            if not isinstance(batch, pa.RecordBatch):
                raise TypeError(f"an arrow_input update gets record batches, not {type(batch).__name__}")
            keys, values = batch.column("k").to_pylist(), batch.column("v").to_pylist()
            totals: dict[str, list[int]] = {}
            for k, v in zip(keys, values, strict=True):
                t = totals.setdefault(k, [0, 0])
                t[0] += 1
                t[1] += v
            olds = db.get_many(list(totals))
            out = []
            for (k, (n, s)), old in zip(totals.items(), olds, strict=True):
                n0, s0 = (0, 0) if old is None else struct.unpack("<qq", old)
                out.append((k, struct.pack("<qq", n0 + n, s0 + s)))
            db.put_many(out)

    return _fold_rows, _fold_arrow


def _run(spark, tmp_path, name, update, frames):
    repo = f"file://{tmp_path}/{name}/repo"
    ps = partitioned(spark, repo=repo, checkpoint_location=str(tmp_path / name / "ck"), job=name, store="sums",
                     num_partitions=N, key_cols=["k"], local_dir=str(tmp_path / name / "local"),
                     work_dir=str(tmp_path / name / "work"), snapshot_every=0)
    try:
        for batch_id, df in enumerate(frames):
            ps.run_batch(df, batch_id, update)
    finally:
        ps.close()
    parts, _ = restored_partitions(tmp_path / name, repo, key=StoreKey(name, "group", "sums"), partitions=N,
                                   read=_raw)
    return parts


def _raw(path):
    from rocksdict import AccessType, Rdict

    db = Rdict(path, access_type=AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def test_an_arrow_update_gets_record_batches_and_leaves_the_state_the_row_fold_leaves(spark_session, tmp_path):
    rows = [(f"k{(i * 7) % 53}", i) for i in range(900)]
    frames = [spark_session.createDataFrame(rows[i:i + 300], "k string, v long") for i in (0, 300, 600)]
    _fold_rows, _fold_arrow = _folds()
    by_rows = _run(spark_session, tmp_path, "rows", _fold_rows, frames)
    by_arrow = _run(spark_session, tmp_path, "arrow", _fold_arrow, frames)
    assert by_arrow == by_rows
    merged = {k: struct.unpack("<qq", v) for part in by_arrow for k, v in part.items()}
    want: dict[str, tuple[int, int]] = {}
    for k, v in rows:
        n, s = want.get(k, (0, 0))
        want[k] = (n + 1, s + v)
    assert merged == want and len(merged) == 53
