"""Restore every partition of a partitioned store (a group) in one process, partitions in parallel.

``blobstate restore DEST --all-partitions`` (``blobstate.restore_partitions``): partition ``p`` of the state after
the newest group (or after batch ``max_batch_id``) goes to ``DEST/<p>/``, each one exactly what ``restore
--partition p`` gives (its chain: ``blobstate.restoring.chain``, all or nothing per partition), ``max_concurrency``
partitions at a time on one bounded pool, the checkpoint log read once for all of them. On a cluster the same call
runs on each executor for the partitions it will own (``partitions=``): one process per executor, not one per
partition, each partition's blobs fetched by that host. Each partition has a work directory of its own under the
store's (``<store work dir>/partition-<p>``: its restore lock, the destinations it made, its checksum cache), so
partitions never wait for each other's lock; the init cleanup runs once for the store afterwards.

The result gives each partition's restore time and throughput (bytes of the state restored per second) and the
group's (all bytes over the wall time of the whole call).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from blobstate.errors import NothingToRestore
from blobstate.local.checksum import ChecksumCache
from blobstate.local.workdir import CRC_CACHE
from blobstate.model.align import EngineLog, align, engine_batch
from blobstate.model.chain import partition_history, partitions_of, plan_chain
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import LocalStore
from blobstate.repository.repo import Repository
from blobstate.repository.view import read_view
from blobstate.restoring.chain import restore_chain
from blobstate.restoring.plan import DEFAULT_VERIFY_KEPT
from blobstate.restoring.snapshot import RestoreResult


def _mb_per_s(nbytes: int, ms: float) -> float | None:
    return round(nbytes / 1e6 / (ms / 1000), 1) if ms > 0 else None


@dataclass(frozen=True)
class GroupRestoreResult:
    """What a restore of several partitions did: each partition's ``RestoreResult`` (by partition) and its
    destination, and the wall time of the whole (ms)."""

    key: StoreKey
    partitions: dict[int, RestoreResult]
    destinations: dict[int, str]
    duration_ms: float

    @property
    def bytes_total(self) -> int:
        return sum(r.bytes_total for r in self.partitions.values())

    @property
    def bytes_downloaded(self) -> int:
        return sum(r.bytes_downloaded for r in self.partitions.values())

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "partitions": [
                    {**r.to_json(), "destination": self.destinations[p],
                     "throughputMBps": _mb_per_s(r.bytes_total, r.duration_ms)}
                    for p, r in sorted(self.partitions.items())],
                "bytesTotal": self.bytes_total, "bytesDownloaded": self.bytes_downloaded,
                "durationMs": round(self.duration_ms, 3),
                "throughputMBps": _mb_per_s(self.bytes_total, self.duration_ms)}


def partition_work_dir(work_dir: str, partition: int) -> str:
    """The work directory of one partition's restore under its store's."""
    return os.path.join(work_dir, f"partition-{partition}")


def restore_partitions(repo: Repository, key: StoreKey, dest: str, *, local_store: LocalStore,
                       partitions: Iterable[int] | None = None, max_batch_id: int | None = None,
                       work_dir: str | None = None, max_concurrency: int = 8, validate: bool = True,
                       force: bool = False, dry_run: bool = False, verify_kept: str = DEFAULT_VERIFY_KEPT,
                       engine: EngineLog | None = None) -> GroupRestoreResult:
    """Restore ``partitions`` (default: every partition the group records name) of ``key`` into ``dest/<p>/``,
    ``max_concurrency`` at a time (see the module docstring); ``engine``: the query's own commit log (every
    partition exactly at the batch it committed, or at ``max_batch_id`` at most that). Raises ``NothingToRestore``
    when ``key`` is not a partitioned store or a partition has no record, ``BatchNotCommitted``, ``StateNotHeld``,
    and what ``restore_chain`` raises for the first partition that fails (the others finish first; each partition
    is all or nothing on its own)."""
    t0 = time.perf_counter()
    history = list(read_view(repo, key).history)
    known = partitions_of(history)
    if not known:
        raise NothingToRestore(f"{key} has no group checkpoint: it is not a partitioned store (restore it without "
                               "--all-partitions)")
    wanted = sorted(set(partitions)) if partitions is not None else known
    missing = [p for p in wanted if p not in known]
    if missing:
        raise NothingToRestore(f"no group checkpoint of {key} commits partition(s) {missing} (it has {known})")
    if engine is not None:  # exactly the batch the query's engine committed (the Align door), every partition
        batch = engine_batch(engine, max_batch_id, str(key))
        chains = {p: align(partition_history(history, p), engine=engine, batch=batch, what=f"{key} partition {p}")
                  .chain for p in wanted}
    else:
        chains = {p: plan_chain(partition_history(history, p), max_batch_id) for p in wanted}
    destinations = {p: os.path.join(dest, str(p)) for p in wanted}

    def one(p: int) -> RestoreResult:
        wd = partition_work_dir(work_dir, p) if work_dir else None
        return restore_chain(repo, chains[p], destinations[p], local_store=local_store, store_type="rocksdb",
                             work_dir=wd, cache=ChecksumCache(os.path.join(wd, CRC_CACHE) if wd else None),
                             validate=validate, force=force, dry_run=dry_run, verify_kept=verify_kept)

    if not dry_run:
        os.makedirs(dest, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, min(max_concurrency, len(wanted)))) as pool:
        futures = {p: pool.submit(one, p) for p in wanted}
    done = {p: f.result() for p, f in futures.items()}  # every partition has finished (or failed) by now
    return GroupRestoreResult(key, done, destinations, (time.perf_counter() - t0) * 1000)
