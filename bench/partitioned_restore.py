"""Restore of a partitioned state, all partitions in parallel, against the single-driver restore of the same data.

``python -m bench.partitioned_restore [--size 1GiB] [--keys N] [--partitions 8] [--runs 3] [--work DIR] [--out FILE]``

The same records (``--keys`` keys, incompressible values, ``--size`` bytes in total) are written twice: into one
RocksDB (the driver binding's store) and into ``--partitions`` RocksDBs, key ``i`` in partition ``i % N`` (the
partitioned state's). Untimed: the one store is backed up as a snapshot (``StoreCommitter``) and the partitions as
one group checkpoint (each partition's snapshot staged by ``blobstate.worker.stage_snapshot``, then one
group record), into one ``file://`` repository. Timed, medians of ``--runs``, the page cache dropped before each
restore when this user may (else warm, and the report says so):

- **single driver**: one fresh process restores the one store (``blobstate.restoring.chain.restore_chain``);
- **partitions in parallel**: N fresh processes at once, each restoring its partition the way a Spark task does on
  a new executor (``replay.plan(partition=p)`` then ``restore_chain``);
- **partitions in one process**: one fresh process restoring every partition, N at a time on one pool
  (``blobstate.restore_partitions``, what ``blobstate restore --all-partitions`` and an executor restoring the
  partitions it owns run): one interpreter start and one repository open instead of N. Each partition's own
  restore time and throughput (MB/s of state) and the group's are reported.

Spark is left out on purpose: its start-up and scheduling would dominate, and what a task does to restore is
exactly this call. On one host the parallel restore shares its disk and cores: on a cluster each partition has its
own.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

if __package__ in (None, ""):  # ``python bench/partitioned_restore.py``
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import state  # noqa: E402
from bench.measure import can_drop_caches, drop_caches  # noqa: E402
from bench.report import emit  # noqa: E402
from bench.run import parse_size  # noqa: E402

SINGLE = ("bench", "0", "single")
GROUP = ("bench", "group", "partitioned")


def write_states(work: str, *, size_bytes: int, keys: int, partitions: int) -> tuple[str, list[str]]:
    """The one store and the N partitions, the same records in both; returns their directories."""
    from rocksdict import Rdict, WriteBatch

    single_dir = os.path.join(work, "single")
    part_dirs = [os.path.join(work, f"p{p}") for p in range(partitions)]
    vsize = state.value_size(size_bytes, keys)
    single = Rdict(single_dir, options=state.db_options())
    parts = [Rdict(d, options=state.db_options()) for d in part_dirs]
    try:
        for start in range(0, keys, 10_000):
            wb_single, wbs = WriteBatch(raw_mode=True), [WriteBatch(raw_mode=True) for _ in parts]
            for i in range(start, min(keys, start + 10_000)):
                value = os.urandom(vsize)
                wb_single.put(state.key_of(i), value)
                wbs[i % partitions].put(state.key_of(i), value)
            single.write(wb_single)
            for db, wb in zip(parts, wbs, strict=True):
                db.write(wb)
        for db in [single, *parts]:
            db.flush(True)
    finally:
        for db in [single, *parts]:
            db.close()
    return single_dir, part_dirs


def back_up(repo_url: str, work: str, single_dir: str, part_dirs: list[str]) -> None:
    """The snapshot of the one store and one group checkpoint of the partitions (untimed)."""
    from blobstate.commit.backup import StoreCommitter
    from blobstate.commit.group import GroupCommitter
    from blobstate.model.layout import DEFAULT_TTL_MS
    from blobstate.model.records import StoreKey
    from blobstate.repository.repo import Repository
    from blobstate.worker import stage_snapshot

    repo = Repository.open(repo_url, create=True)
    try:
        with StoreCommitter(StoreKey(*SINGLE), repo, work_dir=os.path.join(work, "w-single")) as committer:
            committer.backup(single_dir, batch_id=0)
        key = StoreKey(*GROUP)
        staged = []
        for p, directory in enumerate(part_dirs):
            target = os.path.join(work, f"checkpoint-p{p}")
            state.snapshot(directory, target)
            staged.append(stage_snapshot(repo, key, partition=p, batch_id=0, checkpoint_dir=target, previous=None,
                                         ttl_ms=DEFAULT_TTL_MS))
        with StoreCommitter(key, repo, work_dir=os.path.join(work, "w-group")) as committer:
            GroupCommitter(committer, num_partitions=len(part_dirs)).commit(
                [s.entry for s in staged], batch_id=0, new_blob_ids=[b for s in staged for b in s.new_blob_ids])
    finally:
        repo.close()


def restore_one(repo_url: str, key: tuple[str, str, str], partition: int | None, dest: str) -> int:
    """One restore in this (fresh) process, as a driver or a task does it; returns the bytes restored."""
    from blobstate.model.records import StoreKey
    from blobstate.repository.backends import open_local_store
    from blobstate.repository.repo import Repository
    from blobstate.restoring import chain as replay

    repo = Repository.open(repo_url)
    try:
        chain = replay.plan(repo, StoreKey(*key), partition=partition)
        result = replay.restore_chain(repo, chain, dest, local_store=open_local_store("rocksdb"),
                                      store_type="rocksdb", force=True)
        return result.bytes_downloaded
    finally:
        repo.close()


def restore_group(repo_url: str, key: tuple[str, str, str], dest: str, concurrency: int) -> tuple[int, list[Any]]:
    """Every partition in this (fresh) process (``blobstate.restore_partitions``); returns the bytes restored and
    each partition's ``(bytes, ms)``."""
    import blobstate

    result = blobstate.restore_partitions(dest, repo=repo_url, job=key[0], task=key[1], store=key[2],
                                          max_concurrency=concurrency, work_base=dest + "-work", cleanup=False)
    return result.bytes_downloaded, [(r.bytes_total, r.duration_ms) for _, r in sorted(result.partitions.items())]


def timed(jobs: list[tuple[Any, ...]]) -> tuple[float, int]:
    """Seconds for ``jobs`` (``restore_one`` arguments) run at once, one fresh process each; bytes restored."""
    context = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    with context.Pool(len(jobs)) as pool:
        restored = pool.starmap(restore_one, jobs)
    return time.perf_counter() - t0, sum(restored)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.partitioned_restore", description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--keys", type=int, default=None, help="default: one key per KiB")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    size = parse_size(args.size)
    keys = args.keys or max(1000, size // 1024)
    work = args.work or tempfile.mkdtemp(prefix="blobstate-bench-partitioned-")
    os.makedirs(work, exist_ok=True)
    repo_url = "file://" + os.path.join(work, "repo")
    cold, why = can_drop_caches()
    single_dir, part_dirs = write_states(work, size_bytes=size, keys=keys, partitions=args.partitions)
    back_up(repo_url, work, single_dir, part_dirs)
    results: dict[str, list[float]] = {"single driver": [], "partitions in parallel": [],
                                       "partitions in one process": []}
    restored: dict[str, int] = {}
    per_partition: list[list[Any]] = []
    for run in range(args.runs):
        for name, jobs in (
                ("single driver", [(repo_url, SINGLE, None, os.path.join(work, f"r{run}-single"))]),
                ("partitions in parallel", [(repo_url, GROUP, p, os.path.join(work, f"r{run}-p{p}"))
                                            for p in range(args.partitions)])):
            if cold:
                drop_caches()
            seconds, nbytes = timed(jobs)
            results[name].append(seconds)
            restored[name] = nbytes
        if cold:
            drop_caches()
        t0 = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            nbytes, parts = pool.apply(restore_group, (repo_url, GROUP, os.path.join(work, f"r{run}-group"),
                                                       args.partitions))
        results["partitions in one process"].append(time.perf_counter() - t0)
        restored["partitions in one process"] = nbytes
        per_partition.append(parts)
        for path in os.listdir(work):
            if path.startswith(f"r{run}-"):
                shutil.rmtree(os.path.join(work, path), ignore_errors=True)
    report = {
        "size_bytes": size, "keys": keys, "partitions": args.partitions, "runs": args.runs, "cpus": os.cpu_count(),
        "cache": "cold" if cold else f"warm ({why})",
        "restore_s": {name: round(statistics.median(v), 3) for name, v in results.items()},
        "restored_bytes": restored,
    }
    single, parallel = report["restore_s"]["single driver"], report["restore_s"]["partitions in parallel"]
    group = report["restore_s"]["partitions in one process"]
    report["speedup"] = round(single / parallel, 2) if parallel else None
    report["speedup_one_process"] = round(single / group, 2) if group else None
    # each partition's own restore (median over the runs) and the group's, in MB of state per second
    report["partition_mb_per_s"] = [round(statistics.median(run[p][0] / 1e6 / (run[p][1] / 1000)
                                                            for run in per_partition), 1)
                                    for p in range(args.partitions)]
    report["group_mb_per_s"] = round(restored["partitions in one process"] / 1e6 / group, 1) if group else None
    emit(report, f"restore of {size / 2**20:.0f} MiB: single driver {single:.2f} s, {args.partitions} partitions in "
          f"parallel {parallel:.2f} s (x{report['speedup']}), in one process {group:.2f} s "
          f"(x{report['speedup_one_process']}; per partition {report['partition_mb_per_s']} MB/s, group "
          f"{report['group_mb_per_s']} MB/s), {os.cpu_count()} CPUs, cache {report['cache']}", args.out)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
