"""Partition snapshots of a partitioned store, requested by the driver's listener and taken off the batch's path.

After Spark completed batch ``b`` (its ``commits/b`` is written; ``blobstate.spark.committed.listener`` reports the
progress event), and every ``snapshot_every`` batches, the driver asks (``SnapshotRequests.request``) for a snapshot
of the state after ``b``. A background thread on the driver runs one Spark job of N tasks (``run_snapshot_job``):
task ``p``, on an executor, stages partition ``p``'s local checkpoint with a TTL when its host's copy can reach ``b``
alone (``blobstate.spark.partitioned.executor.snapshot_task``), and answers a ``SnapshotResult``.

The driver keeps the staged snapshots and commits them in the **next** group record (``take``), beside that batch's
deltas: one commit point, one generation, fencing as for any group (Flink's incremental checkpoints of RocksDB
likewise upload SSTs asynchronously and let the coordinator's completed checkpoint make them count). A snapshot
that waited longer than a quarter of the TTL is dropped (its blobs expire; the group's TTL budget counts from its
oldest part). Until committed, a snapshot is referenced by nothing, so a crash anywhere leaves blobs with a TTL for
``blobstate gc``. One job runs at a time; a request while one runs is skipped (the next batch asks again).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from typing import Any

from blobstate.config.options import redact
from blobstate.model.layout import now_ms
from blobstate.spark.committed.location import is_connect
from blobstate.spark.executor.rows import OUTPUT_SCHEMA, collect_pickled
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.snapshot_task import SnapshotResult, arrow_snapshot_task, snapshot_partition

log = logging.getLogger(__name__)


def query_active(query: object) -> bool:
    """False once ``query`` (a ``StreamingQuery``; None: not started yet, True) stopped or its session went away: a
    late progress event of a stopped query asks for nothing."""
    if query is None:
        return True
    try:
        return bool(query.isActive)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the session is going away
        return False


class SnapshotRequests:
    """The driver's side: one background snapshot job at a time, its staged snapshots kept until a group record
    commits them. Thread-safe (the listener thread requests, the ``foreachBatch`` thread takes).

    ``run_job(plan) -> list[SnapshotResult]`` runs the Spark job (``PartitionedState`` passes one).
    """

    def __init__(self, run_job: Any, *, ttl_ms: int) -> None:
        self._run_job = run_job
        self.ttl_ms = ttl_ms
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready: dict[int, SnapshotResult] = {}
        self.requested: list[int] = []
        self.skipped: dict[int, int] = {}  # partitions skipped per requested batch
        self.skips: deque[SnapshotResult] = deque(maxlen=1000)  # the newest skipped tasks' answers
        self.results: deque[SnapshotResult] = deque(maxlen=1000)  # every task's answer, newest last
        self.failures: list[BaseException] = []

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request(self, plan: BatchPlan) -> bool:
        """Start the snapshot job of ``plan`` in the background; False (nothing started) when one still runs."""
        with self._lock:
            if self.running:
                return False
            self.requested.append(plan.batch_id)
            self._thread = threading.Thread(target=self._run, args=(plan,), daemon=True,
                                            name=f"blobstate-snapshot-{plan.key}-{plan.batch_id}")
            self._thread.start()
            return True

    def _run(self, plan: BatchPlan) -> None:
        try:
            results = self._run_job(plan)
        except BaseException as exc:  # noqa: BLE001 - a snapshot is an optimisation: the deltas stay restorable
            log.warning("the snapshot job of %s batch %s failed: %s", plan.key, plan.batch_id, redact(str(exc)))
            with self._lock:
                self.failures.append(exc)
            return
        with self._lock:
            self.results.extend(results)
            for result in results:
                if result.staged is None:
                    log.info("partition %s of %s skipped the snapshot of batch %s: %s", result.partition, plan.key,
                             plan.batch_id, result.skipped)
                    self.skipped[plan.batch_id] = self.skipped.get(plan.batch_id, 0) + 1
                    self.skips.append(result)
                elif result.batch_id == plan.batch_id:
                    self._ready[result.partition] = result  # a newer one replaces an older: its blobs expire

    def take(self, before_batch: int) -> list[SnapshotResult]:
        """The staged snapshots of batches before ``before_batch`` that are still fresh (staged less than a quarter
        of the TTL ago), by partition; they leave this queue whether or not they are fresh."""
        limit = now_ms() - self.ttl_ms // 4
        with self._lock:
            ready = [r for p, r in sorted(self._ready.items()) if r.batch_id < before_batch]
            for r in ready:
                del self._ready[r.partition]
        stale = [r for r in ready if r.created_ms < limit]
        if stale:
            log.info("dropping %d staged snapshots older than a quarter of the TTL (their blobs expire)", len(stale))
        return [r for r in ready if r.created_ms >= limit]

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the running job (if any) to finish; False when it still runs after ``timeout_s``."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return not self.running


def run_snapshot_job(spark: Any, plan: BatchPlan, *, arrow: bool | None = None,
                     place: Any = None) -> list[SnapshotResult]:
    """The Spark job of ``plan``: N tasks, task ``p`` runs ``snapshot_partition`` for partition ``p``. ``arrow``:
    through the DataFrame API (``range(N)`` in N partitions, ``mapInArrow``; default: under Spark Connect only,
    where there is no ``sparkContext``), else the RDD API, its RDD wrapped by ``place(rdd) -> rdd`` (task ``p`` on
    the executor holding partition ``p``'s copy: ``blobstate.spark.placement.coordinator``)."""
    if is_connect(spark) if arrow is None else arrow:
        out = spark.range(0, plan.num_partitions, 1, plan.num_partitions)
        return collect_pickled(out.mapInArrow(functools.partial(arrow_snapshot_task, plan), OUTPUT_SCHEMA))
    sc = spark.sparkContext
    sc.setJobDescription(f"blobstate snapshot of {plan.key} batch {plan.batch_id}")
    rdd = sc.parallelize(list(range(plan.num_partitions)), plan.num_partitions)  # a list: no Python stage
    if place is not None:
        rdd = place(rdd)
    return rdd.mapPartitionsWithIndex(functools.partial(snapshot_partition, plan)).collect()


