"""Maintenance events of a partitioned state, measured: what a restart costs when the cluster changes (issue 42).

``python -m bench.maintenance [--figures rescale,failover,decommission] [--keys 1000000] [--partitions 4]
[--to 8,3] [--key-groups 4096] [--no-offline] [--days 24] [--kill-after 16] [--work DIR] [--out FILE]``

One section (function) per figure, one JSON report (``--figures``: which; default all three).

**Failover** and **decommission** (``lost_worker``, on the namespace cluster of three one-core workers,
``bench.standby``): the flights stream through ``partitioned(N, standby=s)`` for ``s`` = 1 and 0; after batch
``--kill-after`` the worker holding partition 1's primary is SIGKILLed (failover) or drained with Spark's
decommission signal (decommission). Per run: the steady p50/p99 of a batch (job + group commit), the first batch
after the event (ms, partitions restored, bytes downloaded), the warm tasks (standby upkeep) and, for a
decommission, what the driver heard and handed over before the next batch.

**Rescale at restart** (``rescale_at_restart``): on a ``local[2]`` session, a key-grouped partitioned store
(``key_groups=K``) of ``--keys`` keys is built by a streaming query (file source, one Parquet file per batch) with
N = ``--partitions``: batch 0 puts every key, batches 1 and 2 update and delete 1% of them (a snapshot per
partition is taken after each batch, so each old partition's chain is a snapshot and a delta or two). That state
(repository, Spark checkpoint, driver journal) is copied once per scenario; a fourth input file (1% of the keys
updated or deleted, 0.1% new keys) waits for the restart. Each scenario starts on empty executor directories:

- **N -> N** (reference: the same N, every partition restored from the repository);
- **N -> M at restart** (each M of ``--to``): the query restarts with ``num_partitions=M``; each new partition
  starts from the old partitions' snapshots cut to its key-group range (``delete_range``, SST ingestion) and
  commits them as its snapshot with the first batch;
- **offline, then restart** (``--no-offline`` leaves it out): ``blobstate.spark.rescale`` (what ``blobstate spark
  rescale`` runs: every key read, re-hashed and written into a new store of M partitions) with the query stopped,
  then the query restarted on the new store with M partitions.

Timed from the restart (``partitioned(...)``: the Open door, the plan, the routes) to the first completed batch
(``processAllAvailable`` returned: the batch's Spark job and its group commit), and where it went: the open, the
batch's Spark job (``GroupBatchStats.job_ms``), the group commit; in the job, per new partition, the restore of
the old chains (download and apply), the cut, the ingestion and the snapshot's upload (``phases_ms``; the
slowest partition's are reported, the tasks run two at a time). Exactness: the final state, every partition
restored from the repository alone, against a fold of the four input files: a count and a SHA-256 of every
key/value, no key lost, none held twice, each key in its partition's key-group range.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):  # ``python bench/maintenance.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

JOB, STORE = "bench", "counts"
KEY_COLS = ["k"]
CHURN = 0.01  # the share of keys each later batch updates or deletes
NEW = 0.001  # the share of new keys the batch after the restart adds


def session() -> Any:
    """A ``local[2]`` session as the other Spark benchmarks run."""
    from bench.partition_job import session as local_session

    return local_session("blobstate-bench-maintenance")


# -- input and its fold ----------------------------------------------------------------------------------------------
def input_batches(keys: int, seed: int = 42) -> list[tuple[list[int], list[int], list[bool]]]:
    """The four batches' ``(k, v, delete)`` columns: every key put, two batches of churn, the batch after the
    restart (churn and new keys)."""
    import random

    rng = random.Random(seed)
    batches = [(list(range(keys)), [(k * 7919) % 1000 + 1 for k in range(keys)], [False] * keys)]
    for extra in (0, 0, max(1, int(keys * NEW))):
        ks = rng.sample(range(keys), max(1, int(keys * CHURN))) + list(range(keys, keys + extra))
        batches.append((ks, [rng.randrange(1, 100) for _ in ks], [rng.random() < 0.2 for _ in ks]))
    return batches


def write_input(path: str, batch: tuple[list[int], list[int], list[bool]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    ks, vs, ds = batch
    table = pa.table({"k": pa.array(ks, pa.int64()), "v": pa.array(vs, pa.int64()), "d": pa.array(ds, pa.bool_())})
    pq.write_table(table, path + ".tmp")
    os.replace(path + ".tmp", path)  # the file source never sees half a file


def fold(batches: list[tuple[list[int], list[int], list[bool]]]) -> dict[int, int]:
    """What the update makes of ``batches``: a key's value is the sum of its puts since its last delete."""
    state: dict[int, int] = {}
    for ks, vs, ds in batches:
        for k, v, d in zip(ks, vs, ds, strict=True):
            if d:
                state.pop(k, None)
            else:
                state[k] = state.get(k, 0) + v
    return state


def make_update() -> Any:
    """The partitioned update (Arrow input): the fold above, in bulk (``get_many``/``put_many``). Made here so that
    cloudpickle ships it by value (the executors need not import ``bench``)."""
    from blobstate.spark.executor.rows import arrow_input

    def update(db: Any, batches: Any, ctx: Any) -> None:
        rows: list[tuple[int, int, bool]] = []
        for b in batches:
            rows.extend(zip(b.column("k").to_pylist(), b.column("v").to_pylist(), b.column("d").to_pylist(),
                            strict=True))
        keys = list(dict.fromkeys(k for k, _, _ in rows))
        current = dict(zip(keys, db.get_many(keys), strict=True))
        for k, v, d in rows:
            current[k] = None if d else (current[k] or 0) + v
        for k, value in current.items():
            if value is None:
                db.delete(k)
        db.put_many([(k, value) for k, value in current.items() if value is not None])

    return arrow_input(update)


def key_of(key: Any) -> tuple[Any, ...]:
    """A stored key's key columns: the key itself."""
    return (key,)


# -- reading the final state back ------------------------------------------------------------------------------------
def read_back(repo_url: str, store: str, work: str) -> dict[str, Any]:
    """Every partition restored from the repository alone and read: ``{keys, sha256, duplicates, out_of_range,
    partitions, state}`` (``state``: user key -> value)."""
    from blobstate.model.keygroups import key_group_range
    from blobstate.model.records import StoreKey
    from blobstate.restoring import state as reader
    from blobstate.restoring.entries import open_entries, user_key
    from blobstate.worker import open_repository

    key = StoreKey(JOB, "group", store)
    state: dict[Any, Any] = {}
    duplicates = out_of_range = 0
    with open_repository(repo_url) as repo:
        plan = reader.plan_state(repo, key)
        for p, chain in plan.chains.items():
            base = tempfile.mkdtemp(prefix="read-", dir=work)
            try:
                path = reader.restore_into(repo, chain, base)
                if path is None:
                    continue
                with open_entries(path) as items:  # raw: each stored key checked against the partition's range
                    for stored, value in items:
                        if plan.key_groups:
                            assert p is not None
                            group = int.from_bytes(stored[:2], "big")
                            out_of_range += group not in key_group_range(plan.key_groups, plan.num_partitions, p)
                        k = user_key(stored, plan.key_groups)
                        duplicates += k in state
                        state[k] = value
            finally:
                shutil.rmtree(base, ignore_errors=True)
    count, digest = checksum(state)
    return {"keys": count, "sha256": digest, "duplicates": duplicates, "out_of_range": out_of_range,
            "partitions": plan.num_partitions, "key_groups": plan.key_groups, "state": state}


def checksum(state: dict[Any, Any]) -> tuple[int, str]:
    h = hashlib.sha256()
    for k in sorted(state):
        h.update(f"{k}={state[k]};".encode())
    return len(state), h.hexdigest()


def exactness(found: dict[str, Any], expected: dict[int, int]) -> dict[str, Any]:
    state = found["state"]
    count, digest = checksum(expected)
    lost = sum(k not in state for k in expected)
    extra = sum(k not in expected for k in state)
    wrong = sum(k in state and state[k] != v for k, v in expected.items())
    return {"keys": found["keys"], "expected_keys": count, "sha256_match": found["sha256"] == digest,
            "lost": lost, "extra": extra, "wrong_values": wrong, "duplicates": found["duplicates"],
            "out_of_range": found["out_of_range"],
            "exact": found["sha256"] == digest and not (lost or extra or wrong or found["duplicates"]
                                                        or found["out_of_range"])}


# -- the figure: rescale at restart ----------------------------------------------------------------------------------
class Scenario:
    """The state under ``root``: ``repo``, ``ck`` (Spark's checkpoint), ``work`` (the driver's journal), ``local``
    (the executors'); a copy of ``built`` (whose ``local`` was emptied), or new without one."""

    def __init__(self, root: str, built: str | None = None) -> None:
        self.root = root
        if built is None:
            os.makedirs(root)
        else:
            shutil.copytree(built, root)
        self.repo, self.ck = f"file://{root}/repo", f"{root}/ck"
        self.local, self.work = f"{root}/local", f"{root}/work"

    def open(self, spark: Any, n: int, store: str = STORE, key_groups: int | None = None,
             snapshot_every: int = 1) -> Any:
        from blobstate.spark import partitioned

        return partitioned(spark, repo=self.repo, checkpoint_location=self.ck, job=JOB, store=store,
                           num_partitions=n, key_cols=KEY_COLS, local_dir=self.local, work_dir=self.work,
                           snapshot_every=snapshot_every, key_groups=key_groups, key_of=key_of)


def run_query(spark: Any, ps: Any, source: str) -> None:
    stream = spark.readStream.schema("k long, v long, d boolean").option("maxFilesPerTrigger", 1).parquet(source)
    ps.start(stream.writeStream, make_update()).processAllAvailable()


def first_batch(spark: Any, scenario: Scenario, source: str, n: int, store: str = STORE) -> dict[str, Any]:
    """Restart the query with ``n`` partitions on ``store``; the first batch's figures."""
    t0 = time.perf_counter()
    ps = scenario.open(spark, n, store)
    t_open = time.perf_counter()
    try:
        run_query(spark, ps, source)
        t_done = time.perf_counter()
        stats = ps.batch_stats
    finally:
        ps.close()
    first = stats[0]
    slowest = max(range(len(first.task_ms)), key=lambda p: first.task_ms[p]) if first.task_ms else None
    return {"partitions": n, "batch_id": first.batch_id, "batches": len(stats),
            "restart_to_first_batch_ms": round((t_done - t0) * 1000, 1),
            "open_ms": round((t_open - t0) * 1000, 1), "job_ms": round(first.job_ms, 1),
            "commit_ms": round(first.commit_ms, 1), "partitions_restored": first.partitions_restored,
            "bytes_downloaded": first.bytes_downloaded, "key_groups": first.key_groups,
            "regrouped": list(first.regrouped) if first.regrouped else None,
            "slowest_task_ms": first.task_ms[slowest] if slowest is not None else None,
            "slowest_task_phases_ms": dict(first.phases_ms[slowest]) if first.phases_ms and slowest is not None
            else None,
            "phases_ms_per_partition": [dict(p) for p in first.phases_ms]}


def offline_then_restart(spark: Any, scenario: Scenario, source: str, m: int) -> dict[str, Any]:
    """``blobstate.spark.rescale`` into a new store of ``m`` partitions, then the query restarted on it."""
    from blobstate.spark import rescale

    to_store = f"{STORE}-m{m}"
    t0 = time.perf_counter()
    result = rescale(spark, repo=scenario.repo, job=JOB, store=STORE, to_store=to_store, num_partitions=m,
                     key_schema="k bigint", key_of=key_of, checkpoint_location=scenario.ck,
                     work_dir=f"{scenario.work}-rescale", local_dir=f"{scenario.local}-rescale")
    rescale_ms = (time.perf_counter() - t0) * 1000
    restart = first_batch(spark, scenario, source, m, to_store)
    return {"rescale_ms": round(rescale_ms, 1), "rescale_keys": result.keys,
            "rescale_bytes_uploaded": result.bytes_uploaded, **restart,
            "total_ms": round(rescale_ms + restart["restart_to_first_batch_ms"], 1), "store": to_store}


def rescale_at_restart(spark: Any, work: str, *, keys: int, partitions: int = 4, targets: tuple[int, ...] = (8, 3),
                       key_groups: int | None = None, offline: bool = True, reference: bool = True,
                       snapshot_every: int = 1) -> dict[str, Any]:
    """The figure (the module docstring): ``{build, scenarios: {name: figures and exactness}}``; ``reference``:
    with the N -> N restart; ``snapshot_every``: the build's (0: the old partitions' chains are deltas only). The
    built state stays under ``work/built`` (its executors' directories emptied)."""
    from blobstate.model.keygroups import DEFAULT_KEY_GROUPS

    key_groups = key_groups or DEFAULT_KEY_GROUPS
    batches = input_batches(keys)
    source, built = os.path.join(work, "input"), os.path.join(work, "built")
    os.makedirs(source)
    for i, batch in enumerate(batches[:3]):
        write_input(os.path.join(source, f"batch-{i}.parquet"), batch)
    t0 = time.perf_counter()
    root = Scenario(built)
    ps = root.open(spark, partitions, key_groups=key_groups, snapshot_every=snapshot_every)
    try:
        run_query(spark, ps, source)
        build_stats = ps.batch_stats
    finally:
        ps.close()
    build = {"keys": keys, "partitions": partitions, "key_groups": key_groups, "batches": len(build_stats),
             "ms": round((time.perf_counter() - t0) * 1000, 1),
             "snapshots_committed": sum(s.snapshots for s in build_stats)}
    shutil.rmtree(root.local, ignore_errors=True)  # each scenario starts on empty executor directories
    write_input(os.path.join(source, "batch-3.parquet"), batches[3])
    expected = fold(batches)
    scenarios: dict[str, Any] = {}
    plan = [(f"{partitions}->{partitions}", partitions, False)] if reference else []
    plan += [(f"{partitions}->{m}", m, False) for m in targets]
    if offline:
        plan += [(f"{partitions}->{m} offline", m, True) for m in targets]
    for name, m, is_offline in plan:
        scenario = Scenario(os.path.join(work, name.replace(">", "").replace(" ", "-")), built)
        try:
            figures = (offline_then_restart(spark, scenario, source, m) if is_offline
                       else first_batch(spark, scenario, source, m))
            found = read_back(scenario.repo, figures.get("store", STORE), scenario.root)
            figures["exactness"] = exactness(found, expected)
            figures["load_average_1m"] = round(os.getloadavg()[0], 1)  # a shared machine: how busy it was
            scenarios[name] = figures
        finally:
            shutil.rmtree(scenario.root, ignore_errors=True)
    return {"build": build, "scenarios": scenarios}


# -- the report ------------------------------------------------------------------------------------------------------
def lost_worker(work: str, loses: tuple[str, ...], *, days: int, kill_after: int, partitions: int) -> dict[str, Any]:
    """The failover and decommission figures (module docstring): ``{lose: [run with standby 1, run with 0]}``,
    each run ``bench.standby.summarize``'s figures. Raises ``SystemExit`` without the namespace cluster."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "support"))
    from spark_cluster import unavailable

    from bench.standby import run_once
    from blobstate.spark.demo.flights import load_flights

    reason = unavailable()
    if reason:
        raise SystemExit(f"cluster: {reason}")
    frame = load_flights()
    out: dict[str, Any] = {}
    for lose in loses:
        out[lose] = [run_once(frame, os.path.join(work, f"{lose}-standby{s}"), standby=s, days=days,
                              kill_after=kill_after, partitions=partitions, lose=lose) | {"standby": s}
                     for s in (1, 0)]
    return out


def markdown_lost_worker(figure: dict[str, Any]) -> str:
    lines = ["### A worker lost or decommissioned (namespace cluster, 3 workers)", "",
             "| event | standby | steady p50 / p99 ms | first batch after ms | partitions restored after | "
             "bytes downloaded (first after) | hand-over tasks (restores) |", "|---|---|---|---|---|---|---|"]
    for lose, runs in figure.items():
        for r in runs:
            handed = f"{r.get('handover_tasks', '-')} ({r.get('handover_restores', '-')})"
            lines.append(f"| {lose} | {r['standby']} | {r['steady_p50_ms']:.0f} / {r['steady_p99_ms']:.0f} | "
                         f"{r['first_after_loss_ms']:.0f} | {r['restored_after_loss']} | "
                         f"{r['first_after_loss_bytes']:,} | {handed} |")
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    if "rescale_at_restart" not in report:
        return ""
    fig = report["rescale_at_restart"]
    b = fig["build"]
    lines = [f"### Rescale at restart: {b['keys']:,} keys, N={b['partitions']}, K={b['key_groups']} key groups "
             f"({report['spark_master']})", "",
             "| scenario | rescale ms | restart -> first batch ms | open ms | job ms | commit ms | slowest task: "
             "restore / cut / ingest / snapshot ms | exact |", "|---|---|---|---|---|---|---|---|"]
    for name, s in fig["scenarios"].items():
        ph = s.get("slowest_task_phases_ms") or {}
        phases = " / ".join(f"{ph.get(k, 0):.0f}" for k in ("restore", "cut", "ingest", "snapshot")) if ph else "-"
        lines.append(f"| {name} | {s.get('rescale_ms', '-')} | {s['restart_to_first_batch_ms']:.0f} | "
                     f"{s['open_ms']:.0f} | {s['job_ms']:.0f} | {s['commit_ms']:.0f} | {phases} | "
                     f"{s['exactness']['exact']} ({s['exactness']['keys']:,} keys) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--figures", default="rescale,failover,decommission")
    parser.add_argument("--days", type=int, default=24, help="failover/decommission: the stream's day files")
    parser.add_argument("--kill-after", type=int, default=16, help="failover/decommission: the batch before it")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--to", default="8,3", help="the new numbers of partitions, comma-separated")
    parser.add_argument("--key-groups", type=int, default=None, help="default: blobstate's (4096)")
    parser.add_argument("--no-offline", action="store_true", help="leave out the offline rescale")
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None, help="write the JSON report here too")
    args = parser.parse_args(argv)
    from bench.report import emit

    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-maintenance-")
    figures = args.figures.split(",")
    t0, load_before = time.perf_counter(), os.getloadavg()
    report: dict[str, Any] = {"cpus": os.cpu_count()}
    try:
        if "rescale" in figures:
            spark = session()
            try:
                report["spark_master"] = spark.sparkContext.master
                report["rescale_at_restart"] = rescale_at_restart(
                    spark, work, keys=args.keys, partitions=args.partitions,
                    targets=tuple(int(m) for m in args.to.split(",")), key_groups=args.key_groups,
                    offline=not args.no_offline)
            finally:
                spark.stop()
        loses = tuple(f for f in ("failover", "decommission") if f in figures)
        if loses:
            report["lost_worker"] = lost_worker(
                os.path.join(work, "cluster"), tuple("kill" if f == "failover" else f for f in loses),
                days=args.days, kill_after=args.kill_after, partitions=args.partitions)
        report["wall_s"] = round(time.perf_counter() - t0, 1)
        report["load_average_1_5_15"] = {"before": [round(x, 1) for x in load_before],
                                         "after": [round(x, 1) for x in os.getloadavg()]}
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    text = markdown(report) + ("\n\n" + markdown_lost_worker(report["lost_worker"]) if "lost_worker" in report else "")
    emit(report, text + "\n\n" + json.dumps(report, indent=2), args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
