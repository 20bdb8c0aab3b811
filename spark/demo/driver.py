"""The demo's Spark driver: one process that streams the day files through a query bound to blobstate.

``python -m blobstate.spark.demo.driver CONFIG.json`` (written by ``blobstate.spark.demo.run``). It registers the
binding (recovery, alignment, restore), writes what it restored to ``<run>.json``, runs the query one day file per
micro-batch, appends one line per committed batch to ``<run>.batches.jsonl`` (delta commit ms, snapshot lag), and
at the end drains the last snapshot and completes ``<run>.json``. With ``killAt`` it stops inside the user function
of that batch (the batch's writes staged, nothing committed), writes ``<run>.kill-me`` and waits for the SIGKILL
the parent sends to its process group (this Python process and its Spark JVM). With ``partitions`` the query runs
on a partitioned state (``blobstate.spark.partitioned``) instead: the kill lands in a task of that batch, after its
upload and before the group commit.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from blobstate.local.files import replace_file


def _spark_session(app: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the partitioned state's tasks import blobstate
    import warnings

    warnings.filterwarnings("ignore", message=".*PySpark does not yet fully support pandas.*")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_listing(location: str) -> dict[str, list[list[Any]]]:
    """``offsets/`` and ``commits/`` of a local checkpoint location: ``[name, size, mtime_ns]`` per file, sorted."""
    out: dict[str, list[list[Any]]] = {}
    for sub in ("offsets", "commits"):
        folder = os.path.join(location, sub)
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        out[sub] = [[n, os.stat(os.path.join(folder, n)).st_size, os.stat(os.path.join(folder, n)).st_mtime_ns]
                    for n in names]
    return out


def _write_json(path: str, doc: dict[str, Any]) -> None:
    replace_file(path, json.dumps(doc))


def main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as fh:
        cfg = json.load(fh)
    from blobstate.model.records import StoreKey
    from blobstate.spark import register
    from blobstate.spark.demo.flights import flights_schema, update_state

    run, out = cfg["run"], cfg["outDir"]
    summary_path = os.path.join(out, f"{run}.json")
    batches_path = os.path.join(out, f"{run}.batches.jsonl")
    spark = _spark_session(f"blobstate-demo-{run}")
    if cfg.get("partitions"):
        return run_partitioned(spark, cfg)
    key = StoreKey(*cfg["key"])
    before = spark_listing(cfg["checkpoint"])
    binding = register(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], state_dir=cfg["state"],
                       work_dir=cfg["workDir"], key=key, storage_options=cfg.get("storageOptions") or None,
                       snapshot_every=cfg.get("snapshotEvery", 1))
    plan = binding.plan
    assert plan is not None
    summary: dict[str, Any] = {
        "run": run, "lastCommittedBySpark": plan.last_committed, "restoredBatch": plan.restored_batch,
        "snapshotBatch": plan.snapshot_batch, "deltasReplayed": plan.deltas, "restoreMs": round(binding.restore_ms, 1),
        "sparkCheckpointUntouched": spark_listing(cfg["checkpoint"]) == before, "finished": False,
    }
    _write_json(summary_path, summary)
    kill_at = cfg.get("killAt")
    batches = open(batches_path, "a", encoding="utf-8")  # noqa: SIM115 - closed below, or by the SIGKILL
    written = [0]

    def flush_stats() -> None:  # the batches committed so far (a batch commits after fn returns)
        for s in binding.batch_stats[written[0]:]:
            batches.write(json.dumps({"run": run, "batch": s.batch_id, "deltaMs": round(s.delta_ms, 3),
                                      "applyMs": round(s.apply_ms, 3), "bytes": s.changelog_bytes,
                                      "snapshotLag": s.snapshot_lag}) + "\n")
            written[0] += 1
        batches.flush()

    def update(df: Any, batch_id: int, state: Any) -> None:
        flush_stats()
        update_state(df, batch_id, state)
        if batch_id == kill_at:
            _write_json(os.path.join(out, f"{run}.kill-me"), {"batch": batch_id})
            time.sleep(600)  # the parent kills this process group now: the batch never completes

    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(cfg["input"]))
    query = binding.start(stream.writeStream, update, query_name=f"flights-{run}")
    query.processAllAvailable()
    query.stop()
    flush_stats()
    batches.close()
    stats = binding.batch_stats
    binding.close()
    summary.update(finished=True, snapshots=binding.snapshot_batches(),
                   snapshotMs=[round(r.upload_ms + r.checkpoint_ms, 1) for r in binding.snapshots],
                   lastBatch=stats[-1].batch_id if stats else plan.restored_batch)
    _write_json(summary_path, summary)
    spark.stop()
    return 0


def run_partitioned(spark: Any, cfg: dict[str, Any]) -> int:
    """The same run on a partitioned state (``partitions`` N, keyed by route, executors' dir ``local``): the kill
    lands in a task of batch ``killAt`` after its upload, before the driver's group commit."""
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, update_routes

    run, out = cfg["run"], cfg["outDir"]
    summary_path = os.path.join(out, f"{run}.json")
    kill_at = cfg.get("killAt")
    kill_me = os.path.join(out, f"{run}.kill-me")

    batches_path = os.path.join(out, f"{run}.batches.jsonl")

    def hold(stage: str, ctx: Any) -> None:  # in a Python worker of this process group: the parent kills it
        if ctx.batch_id == kill_at and ctx.partition == 0:
            # The figures of every batch committed before the kill are on disk first (the driver's writer below).
            deadline = time.monotonic() + 60
            while not _has_batch(batches_path, ctx.batch_id - 1) and time.monotonic() < deadline:
                time.sleep(0.05)
            with open(kill_me, "w", encoding="utf-8") as fh:
                json.dump({"batch": ctx.batch_id}, fh)
            time.sleep(600)

    before = spark_listing(cfg["checkpoint"])
    job, _, store = cfg["key"]
    ps = partitioned(spark, repo=cfg["repo"], checkpoint_location=cfg["checkpoint"], job=job, store=store,
                     num_partitions=cfg["partitions"], key_cols=ROUTE_COLS, local_dir=cfg["state"],
                     work_dir=cfg["workDir"], storage_options=cfg.get("storageOptions") or None,
                     snapshot_every=cfg.get("snapshotEvery", 1), fault_hook=hold if kill_at is not None else None)
    summary: dict[str, Any] = {
        "run": run, "lastCommittedBySpark": ps.last_committed, "restoredBatch": ps.last_committed,
        "snapshotBatch": None, "deltasReplayed": 0, "restoreMs": 0.0,
        "sparkCheckpointUntouched": spark_listing(cfg["checkpoint"]) == before, "finished": False,
    }
    _write_json(summary_path, summary)
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(cfg["input"]))
    writer = _GroupStatsWriter(ps, run, batches_path)
    writer.start()
    query = ps.start(stream.writeStream, update_routes, query_name=f"flights-{run}")
    query.processAllAvailable()
    query.stop()
    ps.close()
    writer.stop()
    first = ps.batch_stats[0] if ps.batch_stats else None
    summary.update(finished=True, snapshots=[s.batch_id for s in ps.batch_stats if s.snapshots], snapshotMs=[],
                   partitionsRestored=first.partitions_restored if first else 0,
                   filesDownloaded=first.files_downloaded if first else 0,
                   lastBatch=ps.batch_stats[-1].batch_id if ps.batch_stats else ps.last_committed)
    _write_json(summary_path, summary)
    spark.stop()
    return 0


def _has_batch(path: str, batch_id: int) -> bool:
    """True when ``path`` (a ``.batches.jsonl``) has the line of ``batch_id``, or no earlier batch can have one."""
    if batch_id < 0:
        return True
    try:
        with open(path, encoding="utf-8") as fh:
            return any(json.loads(line)["batch"] == batch_id for line in fh if line.strip())
    except (OSError, ValueError):
        return False


class _GroupStatsWriter:
    """Appends one line per committed group batch to ``<run>.batches.jsonl`` as the batches commit (a thread on the
    driver polling ``batch_stats``), so the figures of a run that is SIGKILLed are on disk up to the kill. The
    snapshot lag is the number of batches since the last group record that committed partition snapshots."""

    def __init__(self, ps: Any, run: str, path: str) -> None:
        import threading

        self.ps, self.run, self.path = ps, run, path
        self.written = 0
        self.last_snapshot: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="demo-stats", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.flush()

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            self.flush()

    def flush(self) -> None:
        stats = list(self.ps.stats)
        lines = []
        for s in stats[self.written:]:
            if s.snapshots:
                self.last_snapshot = s.batch_id
            lag = s.batch_id - self.last_snapshot if self.last_snapshot is not None else s.batch_id + 1
            lines.append(json.dumps({"run": self.run, "batch": s.batch_id, "deltaMs": round(s.commit_ms, 3),
                                     "applyMs": 0, "bytes": s.bytes_uploaded, "snapshotLag": lag,
                                     "jobMs": round(s.job_ms, 3), "partitionsRestored": s.partitions_restored,
                                     "filesDownloaded": s.files_downloaded, "snapshots": s.snapshots,
                                     "partitionsLocal": s.partitions_local}))
        if lines:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("\n".join(lines) + "\n")
            self.written += len(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
