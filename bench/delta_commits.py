"""What a Spark micro-batch pays for its state, in process: one delta commit (a batch's changelog as one blob, one
append at the checkpoint log) after another, as the driver binding commits inside every batch.

``python -m bench.delta_commits --backends file,s3 --commits 100 [--ops 200] [--value-size 100]``

Per backend a fresh repository (``file://`` in ``--work``, or a bucket on the counting moto server), one
``StoreCommitter`` kept open as the driver keeps it, and ``DeltaCommitter.commit_changelog`` of a changelog of
``--ops`` puts of ``--value-size`` bytes per batch, ``--commits`` times after 3 untimed ones: each commit's wall
time (ms, ``time.perf_counter`` around the call, the journal's fsyncs and the repository's included) and, on S3, the
requests the server answered for it. Reported: p50, p99 (nearest rank) and mean ms, and the median requests per
commit by kind. No snapshot is taken in between (the binding takes them in the background); the log's records of
the store grow by one per commit, which a listing returns in the same one request.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from bench.s3server import S3Server, client_env

BUCKET = "deltas"


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def measure(repo_url: str, work: str, *, commits: int, ops: int, value_size: int, s3: S3Server | None = None,
            storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """``commits`` timed delta commits into ``repo_url`` (see the module docstring)."""
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.delta import DeltaCommitter
    from blobstate.model import changelog
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository

    value = os.urandom(value_size)
    times: list[float] = []
    requests: list[dict[str, int]] = []
    with Repository.open(repo_url, storage_options=storage_options, create=True) as repo, \
            StoreCommitter(StoreKey("bench", "0", "deltas"), repo, work_dir=os.path.join(work, "wd")) as committer:
        deltas = DeltaCommitter(committer)
        for batch in range(commits + 3):
            data = changelog.encode([(changelog.PUT, f"key{batch:06d}-{i:05d}", value) for i in range(ops)])
            if s3 is not None:
                s3.counts(reset=True)
            t0 = time.perf_counter()
            deltas.commit_changelog(data, batch_id=batch)
            elapsed = (time.perf_counter() - t0) * 1000
            if batch >= 3:  # the first commits open the log and take the store over: not a batch's steady cost
                times.append(elapsed)
                if s3 is not None:
                    requests.append(s3.counts())
    out: dict[str, Any] = {"commits": len(times), "opsPerBatch": ops, "changelogBytes": len(data),
                           "p50Ms": round(percentile(times, 50), 2), "p99Ms": round(percentile(times, 99), 2),
                           "meanMs": round(statistics.fmean(times), 2)}
    if requests:
        kinds = sorted({k for r in requests for k in r})
        out["requestsPerCommit"] = {k: statistics.median([r.get(k, 0) for r in requests]) for k in kinds}
    return out


def run(backends: list[str], work: str, *, commits: int, ops: int, value_size: int) -> dict[str, Any]:
    """``measure`` on each of ``backends`` (``file``, ``s3``: its own moto server, stopped afterwards)."""
    results: dict[str, Any] = {}
    for backend in backends:
        where = os.path.join(work, f"deltas-{backend}")
        os.makedirs(where, exist_ok=True)
        if backend == "file":
            results[backend] = measure("file://" + os.path.join(where, "repo"), where, commits=commits, ops=ops,
                                       value_size=value_size)
            continue
        server = S3Server(os.path.join(where, "moto.log"))
        saved = {k: os.environ.get(k) for k in client_env()}
        os.environ.update(client_env())
        try:
            server.put_direct(BUCKET, {})
            results[backend] = measure(f"s3://{BUCKET}/repo", where, commits=commits, ops=ops,
                                       value_size=value_size, s3=server,
                                       storage_options={"endpoint_url": server.endpoint})
        finally:
            server.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return results


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="file,s3")
    parser.add_argument("--commits", type=int, default=100)
    parser.add_argument("--ops", type=int, default=200, help="puts per batch")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="blobstate-deltas-") as tmp:
        results = run(args.backends.split(","), args.work or tmp, commits=args.commits, ops=args.ops,
                      value_size=args.value_size)
    for backend, r in results.items():
        reqs = r.get("requestsPerCommit")
        print(f"{backend}: delta commit p50 {r['p50Ms']} ms, p99 {r['p99Ms']} ms, mean {r['meanMs']} ms over "
              f"{r['commits']} commits" + (f", {reqs.get('total')} requests each ({reqs})" if reqs else ""))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
