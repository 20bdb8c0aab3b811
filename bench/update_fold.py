"""The old ``update(db, rows, ctx)`` API's fold, per key ``(count, sum(v))`` as 16 bytes (``bench.spark_state``'s),
taking ``Row``s against taking Arrow (``blobstate.spark.arrow_input``: the task's record batches as they are, the
store read and written in bulk), in-process on a real RocksDB, no Spark (issue 41).

``python -m bench.update_fold [--keys 1000000] [--rows 20000] [--batches 5] [--work DIR] [--out FILE]``

What a partition task does between Spark's Arrow batches and the changelog, timed in the process's CPU time
(``time.process_time``, ms: on a shared machine the wall clock counts the other processes' work too; the wall time is
reported beside it):

- **rows** (today): Spark's Arrow-to-Row conversion (``blobstate.spark.executor.rows.arrow_rows``, what a
  ``mapInArrow`` task hands an update) and ``bench.spark_state_driver.fold`` (``get``/``put`` per row);
- **arrow**: the record batches handed over as they are and ``bench.spark_state_driver.fold_arrow`` (the batch
  aggregated by key with Arrow, ``StagedWrites.get_many`` / ``put_many``).

Each path, on a fresh RocksDB (the partitions' options): the **load** fold (``--keys`` keys, each once, one batch of
``--keys`` rows in record batches of 10,000 rows, as Spark's ``maxRecordsPerBatch``), then ``--batches`` **steady**
folds of ``--rows`` rows, keys uniform over the key space, each on the state after the previous one (staged, the
changelog encoded, applied). Both paths' changelogs are checked to write the same keys and values, batch by batch.
The RDD path of classic PySpark (Rows unpickled from the JVM) is not timed here: its conversion is Spark's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from bench.spark_state_driver import fold, fold_arrow  # noqa: E402
from bench.stateful_query import percentile  # noqa: E402

RECORDS = 10_000  # Spark's spark.sql.execution.arrow.maxRecordsPerBatch default


def batches_of(keys: Any, values: Any) -> list[Any]:
    import pyarrow as pa

    table = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64())})
    return table.to_batches(max_chunksize=RECORDS)


def inputs(keys: int, rows: int, batches: int) -> list[list[Any]]:
    """The load's and the steady batches' record batches (seeded)."""
    import numpy as np

    rng = np.random.default_rng(41)
    load = batches_of(rng.permutation(keys), rng.integers(0, 1000, keys))
    return [load] + [batches_of(rng.integers(0, keys, rows), rng.integers(0, 1000, rows)) for _ in range(batches)]


def one_path(path: str, data: list[list[Any]], work: str) -> tuple[list[float], list[float], list[dict[Any, Any]]]:
    """Every batch of ``data`` through ``path`` on a fresh RocksDB: CPU and wall ms per batch (conversion, fold and
    the changelog's encoding), and each changelog's writes (key: value; the order of the ops may differ)."""
    from rocksdict import Rdict

    from blobstate.model import changelog
    from blobstate.spark.executor.open_partitions import db_options
    from blobstate.spark.executor.rows import arrow_rows

    folder = tempfile.mkdtemp(prefix=f"bench-fold-{path}-", dir=work)
    db = Rdict(os.path.join(folder, "db"), db_options())
    times, walls, logs = [], [], []
    try:
        for batches in data:
            view = changelog.StagedWrites(db)
            t0, w0 = time.process_time(), time.perf_counter()
            if path == "rows":
                fold(view, arrow_rows(iter(batches)), None)
            else:
                fold_arrow(view, iter(batches), None)
            ops = view.ops()
            blob = changelog.encode(ops)
            times.append((time.process_time() - t0) * 1000)
            walls.append((time.perf_counter() - w0) * 1000)
            changelog.apply_ops(db, ops)
            logs.append(dict((k, v) for _, k, v in changelog.decode(blob)))
    finally:
        db.close()
        shutil.rmtree(folder, ignore_errors=True)
    return times, walls, logs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    data = inputs(args.keys, args.rows, args.batches)
    report: dict[str, Any] = {"keys": args.keys, "rows": args.rows, "batches": args.batches,
                              "loadavg_start": os.getloadavg()}
    logs = {}
    for path in ("rows", "arrow"):
        times, walls, logs[path] = one_path(path, data, args.work)
        steady = times[1:]
        report[path] = {"wall_load_ms": round(walls[0], 1),
                        "wall_steady_p50_ms": round(percentile(walls[1:], 50), 1),
                        "load_ms": round(times[0], 1), "load_us_per_row": round(times[0] * 1000 / args.keys, 2),
                        "steady_ms": [round(t, 1) for t in steady], "steady_p50_ms": round(percentile(steady, 50), 1),
                        "steady_us_per_row": round(percentile(steady, 50) * 1000 / args.rows, 2)}
    if logs["rows"] != logs["arrow"]:
        raise SystemExit("the two paths wrote different changelogs")
    report["speedup"] = {"load": round(report["rows"]["load_ms"] / report["arrow"]["load_ms"], 2),
                         "steady_p50": round(report["rows"]["steady_p50_ms"] / report["arrow"]["steady_p50_ms"], 2)}
    report["loadavg_end"] = os.getloadavg()
    from bench.report import emit

    emit(report, "\n".join(f"{p:6s} CPU: load {report[p]['load_ms']:9.1f} ms ({report[p]['load_us_per_row']} µs/row)  "
                           f"steady p50 {report[p]['steady_p50_ms']:8.1f} ms ({report[p]['steady_us_per_row']} µs/row)"
                           for p in ("rows", "arrow")) + f"\nspeedup {report['speedup']}", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
