"""The five processors of ``tests/processors/`` on blobstate (``blobstate.spark.transform_with_state``) against
Spark's own ``transformWithStateInPandas`` and ``transformWithState`` (RocksDB provider, changelog checkpointing),
paired batch by batch in one driver (issue 41).

``python -m bench.processors [--keys 1000000] [--batches 100] [--rows 5000] [--load-rows 100000]
[--processors running_count,dedup,sessions,top_n,page_visits] [--pairs spark-pandas:blobstate,spark-rows:blobstate-rows]
[--partitions 4] [--ten-million] [--trigger-ms 1000] [--work DIR] [--out FILE]``

Per processor, the input (seeded ``numpy``): **load** files of ``--load-rows`` rows that hold every one of
``--keys`` keys once (the state then has every key), then ``--batches`` **steady** files of ``--rows`` rows, keys
uniform over the key space (sessions: event times 5 s apart per batch, so sessions close by their event-time timer;
dedup and page visits: TTLs of processing time). ``--ten-million`` runs the running count at 10M keys too.

Runs: ``spark-pandas``, ``spark-rows``, ``blobstate`` (pandas flavour), ``blobstate-rows``, in pairs (``--pairs``,
each pair with its own fresh input and state; a pair may name more runs, ``a:b:c``). The runs of a pair are queries
of their own in one ``local[2]`` session, running side by side, each reading its own input folder one file per
trigger (pyspark 4.3 runs one ``transformWithState*`` query per driver at a time: a second one's driver-side Python
worker never connects back, so the two Spark flavours are in different pairs). Each round hands the round's file to
every run in turn (a hard link: atomic) and waits for that run's
progress report of the batch that read it (a ``StreamingQueryListener``, no polling sleep) before the next run gets
it; the order alternates per round (ABBA: A B, B A, ...), so both see the same machine load. ``--partitions`` N:
blobstate's partitioned state on N partitions (Spark's shuffle partitions are N too); 0: the driver's store.
Queries whose time mode is ProcessingTime run with a ``--trigger-ms`` trigger: Spark runs a no-data batch after
every batch in that mode (for its timers and TTL), which without an interval spins while the other runs work.

Reported per run: the load (s: the load batches' ``triggerExecution`` summed, and wall), per-batch p50/p99 of
``triggerExecution`` and ``addBatch`` over the steady batches (Spark's ``StreamingQueryProgress``, ms), the state's
bytes on disk (Spark: its checkpoint's state folder; blobstate: repository and local copies), and the ratio
Spark p50 / blobstate p50 within the pair, and every run's p50 of each of Spark's ``durationMs`` phases
(``addBatch``: the sink; ``walCommit``, ``commitOffsets``: the checkpoint's logs; ``queryPlanning``, ...). For
blobstate on the driver's store, where its batch time goes: the Spark job that brings the batch to the driver as
Arrow (``spark_to_arrow``), ``run_batch``'s phases (``group``: Arrow sort and key boundaries; ``input``: the
per-key pandas frames, the user's code and the state calls; ``timers``, ``sweep``,
``output``), the changelog's encoding and commit of the delta record (``delta_ms``) and its RocksDB apply
(``apply_ms``); partitioned: the Spark job and the group commit (``GroupBatchStats``). The machine's load average is
recorded at the start and the end (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if os.path.dirname(HERE) not in sys.path:
    sys.path.insert(0, os.path.dirname(HERE))

from bench.stateful_query import ROCKSDB, percentile, session  # noqa: E402

BASE_MS = 1_700_000_000_000
RUNS = ("spark-pandas", "spark-rows", "blobstate", "blobstate-rows")
PROCESSORS = ("running_count", "dedup", "sessions", "top_n", "page_visits")


@dataclass(frozen=True)
class Workload:
    """One processor: its classes per flavour, output schema, key column, input DDL, time mode, and (EventTime)
    the event time column and watermark delay (ms)."""

    name: str
    classes: dict[str, Any]
    output: str
    key: str
    ddl: str
    time_mode: str = "None"
    event_time: str | None = None
    delay_ms: int = 0


def workloads() -> dict[str, Workload]:
    from bench.processor_cpu import rows_processors
    from tests.processors import dedup, page_visits, running_count, sessions, top_n

    rows = rows_processors()
    return {
        "running_count": Workload("running_count", {"pandas": running_count.RunningCount,
                                                    "rows": running_count.RunningCountRows},
                                  running_count.OUTPUT, "k", "k string, v bigint"),
        "dedup": Workload("dedup", {"pandas": dedup.Dedup, "rows": rows["dedup"]}, dedup.OUTPUT, "id",
                          "id string, value bigint", "ProcessingTime"),
        "sessions": Workload("sessions", {"pandas": sessions.Sessions, "rows": rows["sessions"]}, sessions.OUTPUT,
                             "user", "user string, ts timestamp", "EventTime", "ts", sessions.WATERMARK_DELAY_MS),
        "top_n": Workload("top_n", {"pandas": top_n.TopN, "rows": rows["top_n"]}, top_n.OUTPUT, "k",
                          "k string, score bigint"),
        "page_visits": Workload("page_visits", {"pandas": page_visits.PageVisits, "rows": rows["page_visits"]},
                                page_visits.OUTPUT, "user", "user string, page string", "ProcessingTime"),
    }


def frame(name: str, ids: Any, batch: int, rng: Any) -> Any:
    """The input rows of processor ``name`` for key numbers ``ids`` (a numpy array) in input file ``batch``."""
    import numpy as np
    import pandas as pd

    n = len(ids)
    if name == "running_count":
        return pd.DataFrame({"k": np.char.add("k", ids.astype(str)), "v": rng.integers(0, 1000, n)})
    if name == "dedup":
        return pd.DataFrame({"id": np.char.add("id", ids.astype(str)), "value": rng.integers(0, 1000, n)})
    if name == "sessions":
        ms = BASE_MS + batch * 5_000 + rng.integers(0, 5_000, n)
        return pd.DataFrame({"user": np.char.add("u", ids.astype(str)), "ts": pd.to_datetime(ms, unit="ms", utc=True)})
    if name == "top_n":
        return pd.DataFrame({"k": np.char.add("k", ids.astype(str)), "score": rng.integers(0, 10_000, n)})
    if name == "page_visits":
        pages = np.array([f"/p{i}" for i in range(5)])
        return pd.DataFrame({"user": np.char.add("u", ids.astype(str)), "page": pages[rng.integers(0, 5, n)]})
    raise ValueError(f"unknown processor {name!r}")


def write_files(folder: Path, name: str, keys: int, load_rows: int, batches: int, rows: int) -> tuple[int, list[Path]]:
    """The input files of ``name`` in ``folder`` (one Parquet file per batch, in order); ``(load files, paths)``."""
    import numpy as np

    from tests.processors.test_against_spark import write_inputs

    rng = np.random.default_rng(41)
    order = rng.permutation(keys)
    load = [order[i:i + load_rows] for i in range(0, keys, load_rows)]
    steady = [rng.integers(0, keys, rows) for _ in range(batches)]
    frames = [frame(name, ids, i, rng) for i, ids in enumerate(load + steady)]
    write_inputs(folder, frames)
    return len(load), sorted(folder.glob("part-*.parquet"))


class Progress:
    """Spark's progress reports of data batches, per query and input file (the file source's ``logOffset``)."""

    def __init__(self, spark: Any) -> None:
        from pyspark.sql.streaming import StreamingQueryListener

        self.cond = threading.Condition()
        self.seen: dict[tuple[str, int], dict[str, Any]] = {}
        outer = self

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                outer.add(event.progress)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                with outer.cond:
                    outer.cond.notify_all()

        self.listener = Listener()
        spark.streams.addListener(self.listener)

    def add(self, progress: Any) -> None:
        if not progress.numInputRows:
            return
        end = json.loads(progress.sources[0].endOffset)
        with self.cond:
            self.seen[(str(progress.id), int(end["logOffset"]))] = {
                "batch": progress.batchId, "trigger_ms": progress.durationMs.get("triggerExecution", 0),
                "add_ms": progress.durationMs.get("addBatch", 0), "durations": dict(progress.durationMs)}
            self.cond.notify_all()

    def wait(self, query: Any, offset: int, timeout_s: float = 3600) -> dict[str, Any]:
        """The report of ``query``'s batch that read file ``offset``; raises when the query died first."""
        key = (str(query.id), offset)
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while key not in self.seen:
                if not query.isActive:
                    raise SystemExit(f"a query died: {query.exception()}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no progress for file {offset} in {timeout_s:.0f} s")
                self.cond.wait(1.0)  # woken by the report; the timeout only re-checks that the query lives
            return self.seen[key]


class Spans:
    """Where blobstate's driver-store batches go: ``run_batch``'s phases and the Spark job before it, wrapped
    around ``blobstate.spark.stateful.driver.on_driver``'s calls (the bench's process only)."""

    def __init__(self) -> None:
        self.batches: dict[str, list[dict[str, float]]] = {}  # by flavour

    def install(self) -> Any:
        from blobstate.spark.stateful.driver import on_driver

        original_stage, original_run = on_driver.DriverRun.stage, on_driver.run_job
        spans = self

        def run_job(job: Any, staged: Any, batches: Any) -> Any:
            t0 = time.perf_counter()
            result = original_run(job, staged, batches)
            spans.current["run_batch"] = (time.perf_counter() - t0) * 1000
            spans.current.update({k: v for k, v in result.stats.ms.items() if k != "total"})
            spans.current["writes"] = result.stats.writes
            return result

        def stage(self: Any, df: Any, batch_id: int, staged: Any) -> None:
            spans.current = {"batch": batch_id}
            t0 = time.perf_counter()
            original_stage(self, df, batch_id, staged)
            spans.current["stage"] = (time.perf_counter() - t0) * 1000
            spans.current["spark_to_arrow"] = spans.current["stage"] - spans.current.get("run_batch", 0)
            spans.batches.setdefault(self.spec.flavour, []).append(spans.current)

        on_driver.run_job, on_driver.DriverRun.stage = run_job, stage

        def undo() -> None:
            on_driver.run_job, on_driver.DriverRun.stage = original_run, original_stage
        return undo


def start(spark: Any, run: str, w: Workload, source: Path, work: Path, partitions: int, trigger_ms: int) -> Any:
    """Start run ``run`` of workload ``w`` over the files that appear in ``source``; the query (Spark's, or a
    ``StatefulQuery``)."""
    from blobstate.spark import transform_with_state

    stream = spark.readStream.schema(w.ddl).option("maxFilesPerTrigger", 1).parquet(str(source))
    trigger = {"processingTime": f"{trigger_ms} milliseconds"} if w.time_mode == "ProcessingTime" else None
    checkpoint = str(work / run / "checkpoint")
    flavour = "rows" if run.endswith("rows") else "pandas"

    def sink(df: Any, batch_id: int) -> None:
        df.write.format("noop").mode("overwrite").save()

    if run.startswith("spark"):
        if w.event_time:
            stream = stream.withWatermark(w.event_time, f"{w.delay_ms} milliseconds")
        grouped = stream.groupBy(w.key)
        op = grouped.transformWithStateInPandas if flavour == "pandas" else grouped.transformWithState
        writer = op(w.classes[flavour](), outputStructType=w.output, outputMode="Update",
                    timeMode=w.time_mode).writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
        return (writer.trigger(**trigger) if trigger else writer).start()
    return transform_with_state(
        stream, w.classes[flavour](), key_cols=[w.key], output_schema=w.output, sink=sink,
        repo=f"file://{work / run / 'repo'}", checkpoint_location=checkpoint, job="bench", store=w.name,
        time_mode=w.time_mode, num_partitions=partitions or None, flavour=flavour, event_time_column=w.event_time,
        watermark_delay_ms=w.delay_ms, trigger=trigger, state_dir=str(work / run / "state"),
        local_dir=str(work / run / "local"), snapshot_every=0 if partitions else 10)


def du(*paths: Path) -> int:
    """Bytes of the files under ``paths``."""
    total = 0
    for path in paths:
        for root, _, files in os.walk(path):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                         if os.path.exists(os.path.join(root, f)))
    return total


def state_bytes(run: str, work: Path) -> dict[str, int]:
    if run.startswith("spark"):
        return {"checkpoint_state": du(work / run / "checkpoint" / "state")}
    return {"repository": du(work / run / "repo"), "local": du(work / run / "state", work / run / "local")}


def summarise(values: list[float]) -> dict[str, float]:
    return {"p50": percentile(values, 50), "p99": percentile(values, 99), "n": len(values)}


def one_workload(spark: Any, w: Workload, runs: list[str], keys: int, args: Any, progress: Progress) -> dict[str, Any]:
    """Every run of ``w`` paired batch by batch (see the module docstring)."""
    work = Path(tempfile.mkdtemp(prefix=f"bench-processors-{w.name}-", dir=args.work))
    loads, files = write_files(work / "files", w.name, keys, args.load_rows, args.batches, args.rows)
    spans = Spans()
    undo = spans.install()
    queries: dict[str, Any] = {}
    out: dict[str, Any] = {run: {"load_ms": [], "trigger_ms": [], "add_ms": []} for run in runs}
    load_wall = dict.fromkeys(runs, 0.0)
    try:
        for i, path in enumerate(files):
            for run in (runs if i % 2 == 0 else runs[::-1]):  # ABBA
                t0 = time.perf_counter()
                if run not in queries:  # one at a time: Spark's operators start a Python worker as they start
                    (work / run / "in").mkdir(parents=True)
                    queries[run] = start(spark, run, w, work / run / "in", work, args.partitions, args.trigger_ms)
                os.link(path, work / run / "in" / path.name)
                report = progress.wait(queries[run], i)
                if i < loads:
                    out[run]["load_ms"].append(report["trigger_ms"])
                    load_wall[run] += time.perf_counter() - t0
                else:
                    out[run]["trigger_ms"].append(report["trigger_ms"])
                    out[run]["add_ms"].append(report["add_ms"])
                    out[run].setdefault("durations", []).append(report["durations"])
                    out[run].setdefault("engine", []).extend(engine_stats(queries[run], report["batch"]))
            if i == loads - 1 or (i >= loads and (i - loads + 1) % 10 == 0):
                print(f"{w.name}: file {i + 1}/{len(files)}", flush=True)
    finally:
        for run, query in queries.items():
            (query.close if run.startswith("blobstate") else query.stop)()
        undo()
    result: dict[str, Any] = {"keys": keys, "load_files": loads, "steady_batches": args.batches}
    for run in runs:
        steady = out[run]["trigger_ms"]
        result[run] = {"load_s": round(sum(out[run]["load_ms"]) / 1000, 2), "load_wall_s": round(load_wall[run], 2),
                       "trigger_ms": summarise(steady), "add_ms": summarise(out[run]["add_ms"]),
                       "batch_ms": steady, "state_bytes": state_bytes(run, work),
                       "spark_phases_ms_p50": where(out[run].get("durations", []))}
        if out[run].get("engine"):
            result[run]["engine_ms_p50"] = where(out[run]["engine"])
        if run.startswith("blobstate") and not args.partitions:
            flavour = "rows" if run.endswith("rows") else "pandas"
            result[run]["where_ms_p50"] = where(spans.batches.get(flavour, [])[loads:])
    spark_runs = [r for r in runs if r.startswith("spark")]
    ours = [r for r in runs if r.startswith("blobstate")]
    if spark_runs and ours and result[ours[0]]["trigger_ms"]["p50"]:
        result["ratio"] = {f"{spark_runs[0]}/{ours[0]}": round(result[spark_runs[0]]["trigger_ms"]["p50"]
                                                                / result[ours[0]]["trigger_ms"]["p50"], 2)}
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return result


def engine_stats(query: Any, batch_id: int) -> list[dict[str, float]]:
    """blobstate's own stats of batch ``batch_id`` of ``query`` (a ``StatefulQuery``): the driver store's delta commit
    and apply, or the partitioned state's Spark job and group commit (ms); [] for Spark's queries."""
    state = getattr(query, "state", None)
    if state is None:
        return []
    if hasattr(state, "engine"):
        return [{"delta_ms": s.delta_ms, "apply_ms": s.apply_ms} for s in state.engine.stats if s.batch_id == batch_id]
    return [{"job_ms": s.job_ms, "commit_ms": s.commit_ms} for s in state.batch_stats if s.batch_id == batch_id]


def where(batches: list[dict[str, float]]) -> dict[str, float]:
    """The p50 of each span over ``batches``."""
    names = sorted({k for b in batches for k in b if k not in ("batch", "writes")})
    return {name: round(percentile([b.get(name, 0.0) for b in batches], 50), 1) for name in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=5_000, help="rows per steady batch")
    parser.add_argument("--load-rows", type=int, default=100_000, help="rows per load file")
    parser.add_argument("--processors", default=",".join(PROCESSORS))
    parser.add_argument("--pairs", default="spark-pandas:blobstate,spark-rows:blobstate-rows")
    parser.add_argument("--partitions", type=int, default=4, help="blobstate's partitions (0: the driver's store)")
    parser.add_argument("--ten-million", action="store_true", help="the running count at 10M keys too")
    parser.add_argument("--trigger-ms", type=int, default=1000, help="trigger interval of ProcessingTime queries")
    parser.add_argument("--work", default=None)
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    pairs = [pair.split(":") for pair in args.pairs.split(",")]
    unknown = [r for pair in pairs for r in pair if r not in RUNS]
    unknown += [p for p in args.processors.split(",") if p not in PROCESSORS]
    if unknown:
        parser.error(f"unknown runs or processors: {unknown}")
    from pyspark.sql import SparkSession

    own = SparkSession.getActiveSession() is None and getattr(SparkSession, "_instantiatedSession", None) is None
    # a Python worker that connects back late on a loaded machine fails the query: give it time
    before = {}
    if not own:  # the caller's session: the state store settings go back as they were
        running = SparkSession.getActiveSession() or SparkSession._instantiatedSession
        before = {k: running.conf.get(k, None) for k in ROCKSDB}
    spark = session({"spark.python.authenticate.socketTimeout": "300s", "spark.ui.showConsoleProgress": "false"})
    for k, v in ROCKSDB.items():
        spark.conf.set(k, v)
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(args.partitions or 4))
    progress = Progress(spark)
    report: dict[str, Any] = {"keys": args.keys, "batches": args.batches, "rows": args.rows,
                              "load_rows": args.load_rows, "partitions": args.partitions, "pairs": pairs,
                              "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "processors": {}}
    every = workloads()
    try:
        todo = [(name, args.keys) for name in args.processors.split(",")]
        if args.ten_million:
            todo.append(("running_count", 10_000_000))
        for name, keys in todo:
            label = name if keys == args.keys else f"{name}@{keys}"
            for pair in pairs:
                done = one_workload(spark, every[name], pair, keys, args, progress)
                print(label, json.dumps({k: v for k, v in done.items() if k not in RUNS}), flush=True)
                entry = report["processors"].setdefault(label, {"ratio": {}})
                entry["ratio"].update(done.pop("ratio", {}))
                entry.update(done)
    finally:
        spark.streams.removeListener(progress.listener)
        spark.conf.set("spark.sql.shuffle.partitions", shuffle)
        for k, v in before.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
        if own:
            spark.stop()
    report["loadavg_end"] = os.getloadavg()
    from bench.report import emit

    lines = []
    for label, res in report["processors"].items():
        for run in [r for pair in pairs for r in pair]:
            r = res[run]
            lines.append(f"{label:18s} {run:14s} p50 {r['trigger_ms']['p50']:8.0f} ms  "
                         f"p99 {r['trigger_ms']['p99']:8.0f} ms  load {r['load_s']:7.1f} s")
        lines.append(f"{label:18s} ratio Spark p50 / ours p50: {res['ratio']}")
    emit(report, "\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
