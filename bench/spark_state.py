"""blobstate's partitioned state against Spark's own RocksDB state store, at a state that matters (issue 30).

``python -m bench.spark_state [--keys 1000000] [--partitions 4,8] [--env local,cluster] [--batches 100]
[--rows 20000] [--load-rows 200000] [--modes native,blobstate] [--work DIR] [--out FILE]``

The same stateful aggregation, per key ``k``: ``(count, sum(v))``, over the same synthetic input (deterministic:
``numpy`` with a fixed seed; one Parquet file per batch, read one file per trigger):

- **load**: ``--keys`` distinct keys, each once, in files of ``--load-rows`` rows (the state then holds every key);
- **steady**: ``--batches`` files of ``--rows`` rows, keys uniform over the whole key space (updates of existing
  keys, read-modify-write in the state).

Modes: ``native`` (Spark's ``RocksDBStateStoreProvider`` with changelog checkpointing: ``groupBy(k).agg(count,
sum(v))`` in update mode into the ``noop`` sink) and ``blobstate`` (``blobstate.spark.partitioned`` with N
partitions, the same fold in Python: ``bench.spark_state_driver.fold``, snapshots every 10 batches); Spark's shuffle
partitions are N for both. Environments: ``local`` (``local[2]``) and ``cluster`` (the namespace cluster of
``tests/support/spark_cluster.py``: a master and two one-core workers, each its own host with its own tmpfs).

Paired, because this machine's load moves by a factor of several within minutes: for each N one driver process
(``bench.spark_state_driver``) runs both queries in one SparkSession and feeds them the same files one batch at a
time in turn (native, blobstate, blobstate, native, ...), so batch ``b`` of each runs under the same load. It is
SIGKILLed after the last batch (a crash between batches); then each mode restarts twice, in turn, each time in a new
driver on one more file, SIGKILLed again after it: the restart is the time from the driver's start to its first
completed batch (both pay a JVM start; the native store reloads its state from the checkpoint location, blobstate
reuses the copies on the executors' disks or restores them). Reported per mode: per-batch p50/p99 of
``triggerExecution`` and ``addBatch`` over the steady batches (Spark's ``StreamingQueryProgress``), the load time,
the restarts, the state's bytes on the executors' disks (``local``: Spark's state store directories, blobstate's
local dir) and in the checkpoint location or repository (``remote``), and for blobstate where its time goes and
where its tasks ran (``GroupBatchStats``) and the most RocksDB info LOG files of any partition.
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
MODES = ("native", "blobstate")
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


def start_driver(cfg: dict[str, Any], run_dir: str, name: str) -> subprocess.Popen:
    path = os.path.join(run_dir, f"{name}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(cfg, fh)
    log = open(os.path.join(run_dir, f"{name}.log"), "wb")  # noqa: SIM115 - closed with the process
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "bench.spark_state_driver", path], stdout=subprocess.PIPE,
                            stderr=log, text=True, env=env, start_new_session=True, cwd=os.path.dirname(HERE))


def lines(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as fh:
            return [json.loads(x) for x in fh if x.strip()]
    except OSError:
        return []


def run_until_fed(proc: subprocess.Popen, what: str, log: str) -> None:
    """Wait for the driver's ``FED``, then SIGKILL its process group (a crash between batches)."""
    try:
        for line in proc.stdout:
            if line.startswith("FED"):
                return
        raise RuntimeError(f"{what}: the driver ended before its batches; see {log}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_pair(env: Env, partitions: int, data: str, extra: list[str], work: str,
             modes: tuple[str, ...] = MODES) -> dict[str, Any]:
    """The native store and blobstate with N partitions, one driver, batch by batch in turn (ABBA) over every input
    file, SIGKILLed after the last; then each restarts twice after a SIGKILL, in turn, on one more file each."""
    run_dir = os.path.join(work, f"{env.name}-{partitions}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    conf, executors, local = env.conf(run_dir)
    dirs = {mode: {"input": os.path.join(run_dir, f"input-{mode}"), "checkpoint": os.path.join(run_dir, f"ck-{mode}"),
                   "repo": f"file://{run_dir}/repo", "local": local, "work": os.path.join(run_dir, "work")}
            for mode in modes}
    for d in dirs.values():
        os.makedirs(d["input"])
    files = sorted(os.path.join(data, "input", n) for n in os.listdir(os.path.join(data, "input")))
    base = {"partitions": partitions, "conf": conf, "executors": executors, "dirs": dirs, "hold": True}
    progress = os.path.join(run_dir, "progress.jsonl")
    proc = start_driver({**base, "modes": list(modes), "feed": files, "progress": progress}, run_dir, "run")
    run_until_fed(proc, "the paired run", os.path.join(run_dir, "run.log"))
    done = lines(progress)
    out: dict[str, Any] = {mode: {"batches": [b for b in done if b["mode"] == mode], "restarts": []}
                           for mode in modes}
    if "native" in out:
        out["native"]["local_bytes"] = env.local_bytes(run_dir, local, "native")
        out["native"]["remote_bytes"] = du(os.path.join(dirs["native"]["checkpoint"], "state"))
    if "blobstate" in out:
        out["blobstate"]["local_bytes"] = env.local_bytes(run_dir, local, "blobstate")
        out["blobstate"]["remote_bytes"] = du(os.path.join(run_dir, "repo"))
        out["blobstate"]["log_files_per_partition"] = env.log_files(run_dir, local)
    for i, path in enumerate(extra):
        for mode in modes if i % 2 == 0 else tuple(reversed(modes)):
            target = os.path.join(dirs[mode]["input"], os.path.basename(path))
            os.link(path, target)
            os.utime(target, (1_700_000_000 + i, 1_700_000_000 + i))
            after = os.path.join(run_dir, f"restart-{mode}-{i}.jsonl")
            t0 = time.time()
            proc = start_driver({**base, "modes": [mode], "stopAfter": 1, "progress": after}, run_dir,
                                f"restart-{mode}-{i}")
            run_until_fed(proc, f"the restart of {mode}", os.path.join(run_dir, f"restart-{mode}-{i}.log"))
            first = lines(after)[0]
            out[mode]["restarts"].append({"s": round(first["t"] - t0, 2), "trigger_ms": first["trigger_ms"],
                                          **({"restored": first["blobstate"]["partitions_restored"],
                                              "local": first["blobstate"]["partitions_local"]}
                                             if first.get("blobstate") else {})})
    return out


def summarize(done: list[dict[str, Any]], load_batches: int) -> dict[str, Any]:
    steady = [b for b in done if b["batch"] >= load_batches + 2]  # the first two steady batches warm up
    out: dict[str, Any] = {"load_s": round(sum(b["trigger_ms"] for b in done[:load_batches]) / 1000, 1),
                           "steady_batches": len(steady)}
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
    parser.add_argument("--partitions", default="4,8", help="N: a paired run (native and blobstate) for each")
    parser.add_argument("--env", default="local")
    parser.add_argument("--modes", default=",".join(MODES), help="native, blobstate or both (paired)")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "blobstate-bench-spark-state"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    data = os.path.join(args.work, f"data-{args.keys}-{args.load_rows}-{args.batches}-{args.rows}")
    extra = generate(data, keys=args.keys, load_rows=args.load_rows, batches=args.batches, rows=args.rows, extra=2)
    load_batches = -(-args.keys // args.load_rows)
    report: dict[str, Any] = {"keys": args.keys, "load_rows": args.load_rows, "batches": args.batches,
                              "rows": args.rows, "load_batches": load_batches, "cpus": os.cpu_count(),
                              "loadavg_start": os.getloadavg(), "results": {}}
    for env_name in args.env.split(","):
        env = Env(env_name, args.work)
        try:
            for n in args.partitions.split(","):
                modes = tuple(m for m in MODES if m in args.modes.split(","))
                result = run_pair(env, int(n), data, extra, args.work, modes)
                for mode in modes:
                    r = result[mode]
                    summary = {**summarize(r["batches"], load_batches), "restart_s": [x["s"] for x in r["restarts"]],
                               "restarts": r["restarts"], **{k: v for k, v in r.items()
                                                             if k not in ("batches", "restarts")},
                               "loadavg": os.getloadavg()}
                    report["results"][f"{env_name}/{mode}-{n}"] = summary
                    print(f"{env_name}/{mode}-{n}: {json.dumps(summary)}", flush=True)
        finally:
            env.close()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
