"""blobstate's partitioned state against Spark's own RocksDB state store, at a state that matters (issue 30).

``python -m bench.spark_state [--keys 1000000] [--modes native,blobstate-4,blobstate-8] [--env local,cluster]
[--batches 100] [--rows 20000] [--work DIR] [--out FILE]``

The same stateful aggregation, per key ``k``: ``(count, sum(v))``, over the same synthetic input (deterministic:
``numpy`` with a fixed seed; one Parquet file per batch, read one file per trigger):

- **load**: ``--keys`` distinct keys, each once, in files of ``--load-rows`` rows (the state then holds every key);
- **steady**: ``--batches`` files of ``--rows`` rows, keys uniform over the whole key space (updates of existing
  keys, read-modify-write in the state).

Modes: ``native`` (Spark's ``RocksDBStateStoreProvider`` with changelog checkpointing: ``groupBy(k).agg(count,
sum(v))`` in update mode into the ``noop`` sink) and ``blobstate-N`` (``blobstate.spark.partitioned`` with N
partitions, the same fold in Python: ``bench.spark_state_driver.fold``, snapshots every 10 batches); Spark's shuffle
partitions are N for both (``native`` runs with the N of the blobstate mode it is compared with: ``native-N``).
Environments: ``local`` (``local[2]``) and ``cluster`` (the namespace cluster of ``tests/support/spark_cluster.py``:
a master and two one-core workers, each its own host with its own tmpfs).

Per mode and environment, one driver process (``bench.spark_state_driver``) runs load and steady batches; then it is
SIGKILLed between batches, one more input file is added, and a new driver's time from its start to its first
completed batch is the restart (both pay a JVM start; the native store reloads its state from the checkpoint
location, blobstate reuses the copies on the executors' disks or restores them). Reported: per-batch p50/p99 of
``triggerExecution`` and ``addBatch`` over the steady batches (Spark's ``StreamingQueryProgress``), the load time, the
restart, and the state's bytes on the executors' disks (``local``) and in the checkpoint location or repository
(``remote``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(HERE))

from bench.partition_job import quantile  # noqa: E402

SEED = 30
LOCAL_CONF = {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
              "spark.driver.bindAddress": "127.0.0.1", "spark.ui.showConsoleProgress": "false",
              "spark.driver.memory": "2g"}


def generate(folder: str, *, keys: int, load_rows: int, batches: int, rows: int, extra: int = 1) -> list[str]:
    """The input files (reused when ``folder`` holds them for the same parameters): load files covering
    ``keys`` keys once, ``batches`` steady files of ``rows`` rows, then ``extra`` steady files held back (the
    restart's input, in ``folder/extra``). Returns the held-back paths."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    params = {"keys": keys, "load_rows": load_rows, "batches": batches, "rows": rows, "extra": extra, "seed": SEED}
    manifest = os.path.join(folder, "params.json")
    held = os.path.join(folder, "extra")
    if os.path.exists(manifest) and json.load(open(manifest, encoding="utf-8")) == params:
        return sorted(os.path.join(held, n) for n in os.listdir(held))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "input"))
    os.makedirs(held)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(keys)
    chunks = [order[i:i + load_rows] for i in range(0, keys, load_rows)]
    chunks += [rng.integers(0, keys, rows) for _ in range(batches + extra)]
    base, paths = 1_600_000_000, []
    for i, chunk in enumerate(chunks):
        target = held if i >= len(chunks) - extra else os.path.join(folder, "input")
        path = os.path.join(target, f"batch-{i:06d}.parquet")
        table = pa.table({"k": pa.array(chunk, pa.int64()), "v": pa.array((chunk % 1000) + i, pa.int64())})
        pq.write_table(table, path)
        os.utime(path, (base + i, base + i))  # Spark's file source reads the oldest first
        paths.append(path)
    with open(manifest, "w", encoding="utf-8") as fh:
        json.dump(params, fh)
    return paths[-extra:]


def log_files(path: str, *, namespace_pid: int | None = None) -> int:
    """The most RocksDB info LOG files (``LOG``, ``LOG.old.*``) any one database under ``path`` has."""
    cmd = ["find", path, "-name", "LOG*"]
    if namespace_pid is not None:
        cmd = ["nsenter", "-t", str(namespace_pid), "-m", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.split()
    per_db: dict[str, int] = {}
    for name in out:
        per_db[os.path.dirname(name)] = per_db.get(os.path.dirname(name), 0) + 1
    return max(per_db.values(), default=0)


def du(path: str, *, namespace_pid: int | None = None, name: str | None = None) -> int:
    """Bytes under ``path`` (``du -sb``; with ``name``, only under its directories of that name pattern: Spark's
    state store directories ``StateStoreId*`` among its shuffle files), seen from the mount namespace of
    ``namespace_pid`` when given."""
    cmd = ["du", "-sbc", path] if name is None else \
        ["find", path, "-type", "d", "-name", name, "-prune", "-exec", "du", "-sbc", "{}", "+"]
    if namespace_pid is not None:
        cmd = ["nsenter", "-t", str(namespace_pid), "-m", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout.splitlines()
    return sum(int(line.split()[0]) for line in out if line.endswith("\ttotal"))


class Env:
    """Where drivers run: ``local[2]`` or the namespace cluster (started once, stopped by ``close``)."""

    def __init__(self, name: str, work: str) -> None:
        self.name, self.cluster = name, None
        if name == "cluster":
            sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "support"))
            from spark_cluster import SparkCluster, unavailable

            reason = unavailable()
            if reason:
                raise SystemExit(f"cluster: {reason}")
            self.cluster = SparkCluster(os.path.join(work, "cluster"), os.path.join(work, "cluster-local"),
                                        workers=2, cores=1, memory="3g", tmpfs_size="6g")
            self.cluster.__enter__()

    def conf(self, run_dir: str) -> tuple[dict[str, str], int, str]:
        """(Spark conf, executors to wait for, the executors' local dir for blobstate)."""
        if self.cluster is None:
            return {**LOCAL_CONF, "spark.local.dir": os.path.join(run_dir, "spark-local")}, 0, \
                os.path.join(run_dir, "local")
        return self.cluster.driver_conf(executor_memory="2g"), len(self.cluster.workers), \
            os.path.join(self.cluster.local_dir, os.path.basename(run_dir))

    def log_files(self, run_dir: str, local: str) -> int:
        if self.cluster is None:
            return log_files(local)
        return max(log_files(local, namespace_pid=w.pid) for w in self.cluster.workers)

    def local_bytes(self, run_dir: str, local: str, mode: str) -> int:
        """The state's bytes on the executors' disks: Spark's state store directories, or blobstate's local dir."""
        spark_dir = os.path.join(run_dir, "spark-local") if self.cluster is None else self.cluster.spark_dir
        pids = [None] if self.cluster is None else [w.pid for w in self.cluster.workers]
        if mode == "native":
            return sum(du(spark_dir, namespace_pid=pid, name="StateStoreId*") for pid in pids)
        return sum(du(local, namespace_pid=pid) for pid in pids)

    def close(self) -> None:
        if self.cluster is not None:
            self.cluster.__exit__(None, None, None)


def start_driver(cfg: dict[str, Any], run_dir: str, name: str) -> tuple[subprocess.Popen, str]:
    path = os.path.join(run_dir, f"{name}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    log = open(os.path.join(run_dir, f"{name}.log"), "wb")  # noqa: SIM115 - closed with the process
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "bench.spark_state_driver", path], stdout=subprocess.PIPE,
                            stderr=log, text=True, env=env, start_new_session=True, cwd=os.path.dirname(HERE))
    return proc, path


def lines(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(x) for x in fh if x.strip()]
    except OSError:
        return []


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_mode(env: Env, mode: str, partitions: int, data: str, extra: list[str], work: str,
             expected: int, round_: int = 0) -> dict[str, Any]:
    """One mode: the full run (SIGKILLed after its last batch), then the restart on one more file."""
    run_dir = os.path.join(work, f"{env.name}-{mode}-{partitions}-{round_}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    input_dir = os.path.join(run_dir, "input")
    shutil.copytree(os.path.join(data, "input"), input_dir, copy_function=os.link)
    conf, executors, local = env.conf(run_dir)
    base = {"mode": mode, "partitions": partitions, "conf": conf, "executors": executors, "input": input_dir,
            "checkpoint": os.path.join(run_dir, "ck"), "repo": f"file://{run_dir}/repo", "local": local,
            "work": os.path.join(run_dir, "work")}
    progress = os.path.join(run_dir, "progress.jsonl")
    proc, _ = start_driver({**base, "progress": progress, "stopAfter": expected}, run_dir, "run")
    deadline = time.monotonic() + 6 * 3600
    while len(lines(progress)) < expected and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)  # polling the driver's progress file, bounded
    done = lines(progress)
    kill_group(proc)  # a crash between batches: no clean stop
    if len(done) < expected:
        raise RuntimeError(f"{mode}: {len(done)} of {expected} batches; see {run_dir}/run.log")
    sizes = {"local_bytes": env.local_bytes(run_dir, local, mode),
             "remote_bytes": du(os.path.join(run_dir, "ck", "state")) if mode == "native"
             else du(os.path.join(run_dir, "repo"))}
    if mode != "native":
        sizes["log_files_per_partition"] = env.log_files(run_dir, local)
    for path in extra:
        os.link(path, os.path.join(input_dir, os.path.basename(path)))
    after = os.path.join(run_dir, "restart.jsonl")
    t0 = time.time()
    proc, _ = start_driver({**base, "progress": after, "stopAfter": 1}, run_dir, "restart")
    try:
        proc.wait(timeout=3600)
    finally:
        kill_group(proc)
    first = lines(after)
    if not first:
        raise RuntimeError(f"{mode}: no batch after the restart; see {run_dir}/restart.log")
    return {"batches": done, "restart_s": round(first[0]["t"] - t0, 2), "restart_batch": first[0], **sizes}


def summarize(done: list[dict[str, Any]], load_batches: int) -> dict[str, Any]:
    steady = [b for b in done if b["batch"] >= load_batches + 2]  # the first two steady batches warm up
    out: dict[str, Any] = {"load_s": round(sum(b["trigger_ms"] for b in done[:load_batches]) / 1000, 1),
                           "steady_batches": len(steady), "state_rows": done[-1]["state_rows"]}
    for field in ("trigger_ms", "add_ms"):
        values = [float(b[field]) for b in steady]
        out[field] = {"p50": round(quantile(values, 0.5), 1), "p99": round(quantile(values, 0.99), 1)}
    stats = [b["blobstate"] for b in steady if b.get("blobstate")]
    if stats:  # where the time of a blobstate batch goes, and where its tasks ran
        for field in ("job_ms", "commit_ms"):
            out[field] = {"p50": round(quantile([s[field] for s in stats], 0.5), 1)}
        out["task_ms_p50"] = round(quantile([t for s in stats for t in s["task_ms"]], 0.5), 1)
        tasks = sum(len(s["executors"]) for s in stats)
        out["tasks_local"] = round(sum(s["partitions_local"] for s in stats) / tasks, 4)
        out["tasks_placed"] = round(sum(s["partitions_placed"] for s in stats) / tasks, 4)
        out["restored"] = sum(s["partitions_restored"] for s in stats)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--load-rows", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--modes", default="native-4,blobstate-4,native-8,blobstate-8")
    parser.add_argument("--env", default="local")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "blobstate-bench-spark-state"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    data = os.path.join(args.work, f"data-{args.keys}-{args.load_rows}-{args.batches}-{args.rows}")
    extra = generate(data, keys=args.keys, load_rows=args.load_rows, batches=args.batches, rows=args.rows)
    load_batches = -(-args.keys // args.load_rows)
    expected = load_batches + args.batches
    report: dict[str, Any] = {"keys": args.keys, "load_rows": args.load_rows, "batches": args.batches,
                              "rows": args.rows, "load_batches": load_batches, "cpus": os.cpu_count(),
                              "loadavg_start": os.getloadavg(), "results": {}}
    for env_name in args.env.split(","):
        env = Env(env_name, args.work)
        try:
            seen: dict[str, int] = {}
            for spec in args.modes.split(","):  # a spec listed twice runs twice (ABBA against the load)
                mode, n = spec.rsplit("-", 1)
                seen[spec] = seen.get(spec, 0) + 1
                result = run_mode(env, mode, int(n), data, extra, args.work, expected, seen[spec] - 1)
                summary = {**summarize(result["batches"], load_batches),
                           **{k: v for k, v in result.items() if k != "batches"}, "loadavg": os.getloadavg()}
                report["results"].setdefault(f"{env_name}/{spec}", []).append(summary)
                print(f"{env_name}/{spec}: {json.dumps(summary)}", flush=True)
        finally:
            env.close()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
