"""CPU time per key of the five processors of ``tests/processors/`` on the stateful-processor runtime, both flavours,
and of the user's code alone (issue 41), in-process, no Spark.

``python -m bench.processor_cpu [--keys 100000] [--processors running_count,dedup,sessions,top_n,page_visits]
[--flavours pandas,rows] [--out FILE]``

CPU time is the process's (``time.process_time``: every thread of the process, not the wall clock, which the other
work on a shared machine inflates). Per processor and flavour, on a real RocksDB (rocksdict, the partitions'
options) in a temporary directory:

- **load**: one batch with every key once (``--keys`` keys, new state), committed;
- **steady**: the same keys again, one row each (every key's state read and written; dedup: half the ids new,
  half repeats its TTL still hides; page visits: the same page again), committed;
- **timers** (sessions only): a batch without input whose watermark passes every key's session timer, so every
  key's ``handleExpiredTimer`` fires and emits its session.

Each batch reports ``run_batch``'s CPU µs per key, split as ``run_batch`` reports it (``BatchStats.cpu_ms``:
``group``: Arrow sort and key boundaries; ``input``: the per-key inputs, the user's calls, the state calls and the
collection of what they emit; ``timers``; ``sweep``; ``output``: the emitted rows to one Arrow table), plus the
changelog's encoding and the RocksDB apply; and **user alone**: the same ``handleInputRows`` /
``handleExpiredTimer`` over the same keys with their inputs built beforehand (not timed) and a dict in place of
the state store (``FakeHandle``), its output consumed: what the user's code costs by itself, the bound of the
runtime's per-key cost. ``ours`` = ``run_batch`` - ``user alone``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BASE_MS = 1_700_000_000_000
CHUNK = 20_000  # keys whose inputs are built at a time for the user-alone run (1M one-row frames do not fit)


# -- the rows flavour of the four processors tests/processors/ has only in pandas -------------------------------------
def rows_processors() -> dict[str, Any]:
    """The rows flavour (``transformWithState``) of dedup, sessions, top N and page visits: the same logic as their
    pandas classes, over ``Row``s in and out."""
    from pyspark.sql import Row
    from pyspark.sql.streaming import StatefulProcessor

    from tests.processors import dedup, page_visits, sessions, top_n

    class DedupRows(StatefulProcessor):
        def init(self, handle):
            self.seen = handle.getValueState("seen", "seen boolean", ttlDurationMs=dedup.TTL_MS)

        def handleInputRows(self, key, rows, timerValues):
            if self.seen.exists():
                return
            first = min(row.value for row in rows)
            self.seen.update((True,))
            yield Row(id=key[0], value=first)

    class SessionsRows(StatefulProcessor):
        def init(self, handle):
            self.handle = handle
            self.session = handle.getValueState("session", "start_ms long, last_ms long, events long")

        def handleInputRows(self, key, rows, timerValues):
            times = [int(row.ts.timestamp() * 1000) for row in rows]
            current = self.session.get()
            if current is None:
                start, last, events = min(times), max(times), len(times)
            else:
                self.handle.deleteTimer(current[1] + sessions.GAP_MS)
                start, last, events = min(current[0], *times), max(current[1], *times), current[2] + len(times)
            self.session.update((start, last, events))
            self.handle.registerTimer(last + sessions.GAP_MS)
            return iter([])

        def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
            start, last, events = self.session.get()
            self.session.clear()
            yield Row(user=key[0], start_ms=start, end_ms=last + sessions.GAP_MS, events=events)

    class TopNRows(StatefulProcessor):
        def init(self, handle):
            self.top = handle.getListState("top", "score long")

        def handleInputRows(self, key, rows, timerValues):
            scores = [row[0] for row in self.top.get()] + [row.score for row in rows]
            best = sorted(scores, reverse=True)[:top_n.N]
            self.top.put([(s,) for s in best])
            for rank, score in enumerate(best, 1):
                yield Row(k=key[0], rank=rank, score=score)

    class PageVisitsRows(StatefulProcessor):
        def init(self, handle):
            self.visits = handle.getMapState("visits", "page string", "visits long",
                                             ttlDurationMs=page_visits.TTL_MS)

        def handleInputRows(self, key, rows, timerValues):
            counts: dict[str, int] = {}
            for row in rows:
                counts[row.page] = counts.get(row.page, 0) + 1
            for page, n in sorted(counts.items()):
                before = self.visits.getValue((page,))
                total = (before[0] if before is not None else 0) + n
                self.visits.updateValue((page,), (total,))
                yield Row(user=key[0], page=page, visits=total)

    return {"dedup": DedupRows, "sessions": SessionsRows, "top_n": TopNRows, "page_visits": PageVisitsRows}


@dataclass
class Case:
    """One processor: its classes per flavour, output schema, key column, time mode, and its batches
    ``(label, data, processing time, watermark, late watermark)``."""

    classes: dict[str, Any]
    output: str
    key: str
    time_mode: str
    batches: list[tuple[str, Any, int, int | None, int | None]]
    event_time: str | None = None


def _keys(n: int, start: int, prefix: str, seed: int) -> Any:
    import numpy as np
    import pyarrow as pa

    ids = np.arange(start, start + n)
    np.random.default_rng(seed).shuffle(ids)
    return pa.array(np.char.add(prefix, ids.astype(str))), ids


def cases(n: int) -> dict[str, Case]:
    """The five processors' cases at ``n`` keys."""
    import numpy as np
    import pyarrow as pa

    from tests.processors import dedup, page_visits, running_count, sessions, top_n

    rows = rows_processors()
    rng = np.random.default_rng(7)
    out: dict[str, Case] = {}
    k0, _ = _keys(n, 0, "key-", 1)
    k1, _ = _keys(n, 0, "key-", 2)
    out["running_count"] = Case({"pandas": running_count.RunningCount, "rows": running_count.RunningCountRows},
                                running_count.OUTPUT, "k", "None",
                                [("load", pa.table({"k": k0, "v": pa.array(rng.integers(0, 1000, n))}), 1_000, None,
                                  None),
                                 ("steady", pa.table({"k": k1, "v": pa.array(rng.integers(0, 1000, n))}), 2_000, None,
                                  None)])
    i0, _ = _keys(n, 0, "id", 3)
    i1, _ = _keys(n, n // 2, "id", 4)  # half of them seen in the load batch, half new
    out["dedup"] = Case({"pandas": dedup.Dedup, "rows": rows["dedup"]}, dedup.OUTPUT, "id", "ProcessingTime",
                        [("load", pa.table({"id": i0, "value": pa.array(rng.integers(0, 1000, n))}), BASE_MS, None,
                          None),
                         ("steady", pa.table({"id": i1, "value": pa.array(rng.integers(0, 1000, n))}),
                          BASE_MS + dedup.TTL_MS // 4, None, None)])
    u0, _ = _keys(n, 0, "u", 5)
    u1, _ = _keys(n, 0, "u", 6)
    ts = pa.timestamp("us", tz="UTC")
    first = BASE_MS + rng.integers(0, 5_000, n)
    second = BASE_MS + 10_000 + rng.integers(0, 5_000, n)
    wm1 = int(first.max()) - sessions.WATERMARK_DELAY_MS  # no session's timer is due yet
    wm2 = int(second.max()) + sessions.GAP_MS  # every session's timer is due
    out["sessions"] = Case({"pandas": sessions.Sessions, "rows": rows["sessions"]}, sessions.OUTPUT, "user",
                           "EventTime",
                           [("load", pa.table({"user": u0, "ts": pa.array(first * 1000, ts)}), 1_000, None, None),
                            ("steady", pa.table({"user": u1, "ts": pa.array(second * 1000, ts)}), 2_000, wm1, wm1),
                            ("timers", None, 3_000, wm2, wm1)], event_time="ts")
    t0, _ = _keys(n, 0, "key-", 8)
    t1, _ = _keys(n, 0, "key-", 9)
    out["top_n"] = Case({"pandas": top_n.TopN, "rows": rows["top_n"]}, top_n.OUTPUT, "k", "None",
                        [("load", pa.table({"k": t0, "score": pa.array(rng.integers(0, 10_000, n))}), 1_000, None,
                          None),
                         ("steady", pa.table({"k": t1, "score": pa.array(rng.integers(0, 10_000, n))}), 2_000, None,
                          None)])
    p0, ids0 = _keys(n, 0, "u", 10)
    p1, ids1 = _keys(n, 0, "u", 11)
    pages = np.array([f"/p{i}" for i in range(5)])
    out["page_visits"] = Case({"pandas": page_visits.PageVisits, "rows": rows["page_visits"]}, page_visits.OUTPUT,
                              "user", "ProcessingTime",
                              [("load", pa.table({"user": p0, "page": pa.array(pages[ids0 % 5])}), BASE_MS, None,
                                None),
                               ("steady", pa.table({"user": p1, "page": pa.array(pages[ids1 % 5])}),
                                BASE_MS + page_visits.TTL_MS // 2, None, None)])
    return out


# -- the user's code alone -------------------------------------------------------------------------------------------
class _FakeValue:
    def __init__(self, store: dict, name: str, handle: FakeHandle) -> None:
        self.store, self.name, self.handle = store, name, handle

    def exists(self) -> bool:
        return (self.name, self.handle.key) in self.store

    def get(self) -> Any:
        return self.store.get((self.name, self.handle.key))

    def update(self, value: Any) -> None:
        self.store[(self.name, self.handle.key)] = tuple(value)

    def clear(self) -> None:
        self.store.pop((self.name, self.handle.key), None)


class _FakeList(_FakeValue):
    def get(self) -> Iterator[tuple]:
        return iter(self.store.get((self.name, self.handle.key), ()))

    def put(self, values: Any) -> None:
        self.store[(self.name, self.handle.key)] = [tuple(v) for v in values]


class _FakeMap(_FakeValue):
    def getValue(self, user_key: Any) -> Any:  # noqa: N802
        return self.store.get((self.name, self.handle.key, tuple(user_key)))

    def updateValue(self, user_key: Any, value: Any) -> None:  # noqa: N802
        self.store[(self.name, self.handle.key, tuple(user_key))] = tuple(value)


class FakeHandle:
    """A dict for the state store: the state calls at about the cost of a dict operation (the user alone)."""

    def __init__(self, store: dict) -> None:
        self.store = store
        self.key: Any = None
        self.timers: set = set()

    def getValueState(self, name: str, schema: Any, ttlDurationMs: Any = None) -> Any:  # noqa: N802, N803
        return _FakeValue(self.store, name, self)

    def getListState(self, name: str, schema: Any, ttlDurationMs: Any = None) -> Any:  # noqa: N802, N803
        return _FakeList(self.store, name, self)

    def getMapState(self, name: str, key_schema: Any, schema: Any, ttlDurationMs: Any = None) -> Any:  # noqa: N802, N803
        return _FakeMap(self.store, name, self)

    def registerTimer(self, ms: int) -> None:  # noqa: N802
        self.timers.add((self.key, ms))

    def deleteTimer(self, ms: int) -> None:  # noqa: N802
        self.timers.discard((self.key, ms))


def user_alone(make: Callable[[], Any], flavour: str, data: Any, key: str, timer_values: Any, handle: FakeHandle,
               expired: list[tuple[tuple, int]] | None = None) -> float:
    """CPU seconds of the user's calls alone over ``data`` (``handleInputRows`` per key), or over ``expired``
    (``handleExpiredTimer`` per ``(key, ts)``), their inputs built beforehand and ``handle``'s dict for state (the
    same across the batches of a case, as the store is)."""
    from blobstate.spark.processor.grouping import PandasInputs, RowInputs, group_by_key
    from blobstate.spark.processor.handle import ExpiredTimerInfo

    processor = make()
    processor.init(handle)
    spent = 0.0
    if expired is not None:
        for lo in range(0, len(expired), CHUNK):
            chunk = expired[lo:lo + CHUNK]
            c = time.process_time()
            for k, ts in chunk:
                handle.key = k
                for _ in processor.handleExpiredTimer(k, timer_values, ExpiredTimerInfo(ts)):
                    pass
            spent += time.process_time() - c
        return spent
    groups = group_by_key(data, (key,))
    inputs = PandasInputs(groups, 10_000) if flavour == "pandas" else RowInputs(groups)
    for lo in range(0, len(groups), CHUNK):
        keys = groups.keys[lo:lo + CHUNK]
        built = [list(inputs.frames(i) if flavour == "pandas" else inputs.rows(i))
                 for i in range(lo, lo + len(keys))]
        c = time.process_time()
        for k, items in zip(keys, built, strict=True):
            handle.key = k
            out = processor.handleInputRows(k, iter(items), timer_values)
            if out is not None:
                for _ in out:
                    pass
        spent += time.process_time() - c
    return spent


# -- the runtime -------------------------------------------------------------------------------------------------------
def run_case(name: str, case: Case, flavour: str, work: str | None) -> dict[str, Any]:
    from rocksdict import Rdict

    from blobstate.model import changelog
    from blobstate.spark.executor.open_partitions import db_options
    from blobstate.spark.processor import BatchTimes, ProcessorSpec, run_batch
    from blobstate.spark.processor.handle import TimerValues

    make = case.classes[flavour]
    spec = ProcessorSpec((case.key,), case.output, time_mode=case.time_mode, flavour=flavour,
                         event_time_column=case.event_time)
    folder = tempfile.mkdtemp(prefix="bench-processor-cpu-", dir=work)
    report: dict[str, Any] = {}
    fake = FakeHandle({})
    try:
        db = Rdict(os.path.join(folder, "db"), db_options())
        for batch_id, (label, data, at, watermark, late) in enumerate(case.batches):
            due = None
            if label == "timers":  # what the timers batch fires, for the user-alone run
                from blobstate.spark.processor import StateReader

                due = [((r["key"]["user"],), r["expiration_timestamp_ms"])
                       for r in StateReader(db).read_timers().to_pylist()]
            view = changelog.StagedWrites(db)
            c0 = time.process_time()
            result = run_batch(make(), view, data, spec, BatchTimes(batch_id, at, watermark, late))
            c1 = time.process_time()
            ops = view.ops()
            changelog.encode(ops)
            c2 = time.process_time()
            changelog.apply_ops(db, ops)
            c3 = time.process_time()
            stats = result.stats
            keys = max(stats.keys, stats.timers_fired, 1)
            tv = TimerValues(-1, -1) if case.time_mode == "None" else TimerValues(at, -1 if watermark is None
                                                                                  else watermark)
            alone = user_alone(make, flavour, data, case.key, tv, fake, due)
            per_key = {"run_batch": (c1 - c0) / keys * 1e6,
                       **{k: v * 1000 / keys for k, v in stats.cpu_ms.items() if k != "total"},
                       "changelog_encode": (c2 - c1) / keys * 1e6, "rocksdb_apply": (c3 - c2) / keys * 1e6,
                       "user_alone": alone / keys * 1e6}
            per_key["ours"] = per_key["run_batch"] - per_key["user_alone"]
            report[label] = {"keys": stats.keys, "rows_in": stats.rows_in, "timers_fired": stats.timers_fired,
                             "values_expired": stats.values_expired, "rows_out": stats.rows_out,
                             "writes": len(ops), "run_batch_cpu_s": round(c1 - c0, 2),
                             "cpu_us_per_key": {k: round(v, 2) for k, v in per_key.items()}}
            print(name, flavour, label, json.dumps(report[label]["cpu_us_per_key"]), flush=True)
        db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--processors", default="running_count,dedup,sessions,top_n,page_visits")
    parser.add_argument("--flavours", default="pandas,rows")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    import pandas
    import pyarrow

    all_cases = cases(args.keys)
    report: dict[str, Any] = {"keys": args.keys, "pandas": pandas.__version__, "pyarrow": pyarrow.__version__,
                              "python": sys.version.split()[0], "load_average": os.getloadavg()[0]}
    for name in args.processors.split(","):
        for flavour in args.flavours.split(","):
            report[f"{name}/{flavour}"] = run_case(name, all_cases[name], flavour, args.work)
    report["load_average_end"] = os.getloadavg()[0]
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
