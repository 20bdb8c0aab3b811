"""Warm standby copies of a partitioned store's partitions (``standby=1``), kept by the driver off the batch's path.

After each committed group record of batch ``b`` (``PartitionedState.run_batch``), the driver asks for a warm job
(``WarmStandbys.request``; ``run_batch`` never waits for it). One runs at a time, as the snapshot job
(``blobstate.spark.partitioned.driver.snapshots``); a request while one runs waits in its place, replacing an older
waiting one, and runs when it ends, so the standbys always reach the last committed batch. In a background
thread:

1. the standbys are chosen for the partitions' current holders (``Placement.assign_standbys``: one live executor per
   partition on another host than its primary, the current one kept while it qualifies;
   ``blobstate.spark.placement.coordinator.choose_standbys``);
2. one small Spark job runs a task per partition on its standby's executor (``run_warm_job``, placed like the
   batch's tasks), which brings that host's copy to the committed state after ``b``
   (``blobstate.spark.partitioned.executor.warm_task``: the committed changelogs applied, or a verified restore for a
   new or off-chain copy; nothing staged, nothing committed);
3. the tasks' reports are recorded (``record_reports``): partition -> the standby's executor and the batch its copy
   is at.

The next group record carries, per partition, the primary's executor and the standby's with its batch
(``replicas``, as ``blobstate.model.records.Replica``: metadata for ``blobstate list``, read by nothing that
commits, restores or plans), and so does ``PartitionedState.batch_stats``. A standby is promoted only by
placement: when its primary's host is lost, ``Placement.choose`` hands the partition's task to the standby's executor,
and the batch task brings that copy up exactly as any local copy (``LocalPartition.ensure_at``): a catch-up from
the changelogs while it is on the chain, a restore or a wipe otherwise. No new safety step.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from blobstate.config.options import redact
from blobstate.errors import ConfigurationError
from blobstate.model.records import Replica
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.warm_task import WarmResult, warm_task
from blobstate.spark.placement.coordinator import Placement, SparkPlacement, host_of, run_bounded_job

log = logging.getLogger(__name__)
WARM_JOB_S = 300.0  # a warm job still running after this is cancelled (its copies stay where they got to)

Targets = tuple[tuple[int, str], ...]  # (partition, standby executor), in partition order


@dataclass(frozen=True)
class StandbyAt:
    """Partition's standby copy on ``executor`` was reported at batch ``batch_id``, record ``checkpoint_id``."""

    executor: str
    batch_id: int | None
    checkpoint_id: str


def record_reports(at: Mapping[int, StandbyAt], results: Iterable[WarmResult],
                   primaries: Mapping[int, str]) -> dict[int, StandbyAt]:
    """``at`` (partition -> where its standby is and the batch it is at) updated from a warm job's ``results``: a
    result counts when its task did its work (not ``skipped``) on a known executor of another host than the
    partition's primary (``primaries[p]``; a copy on the primary's host is no spare), and never moves a standby
    back to an older batch on the same executor."""
    out = dict(at)
    for r in results:
        if r.skipped or not r.executor:
            continue
        primary = primaries.get(r.partition, "")
        if primary and host_of(primary) == host_of(r.executor):
            continue
        old = out.get(r.partition)
        if old is not None and old.executor == r.executor and old.batch_id is not None and \
                (r.batch_id is None or r.batch_id < old.batch_id):
            continue
        out[r.partition] = StandbyAt(r.executor, r.batch_id, r.checkpoint_id)
    return out


def replicas(primaries: Sequence[str], standbys: Mapping[int, str],
             at: Mapping[int, StandbyAt]) -> tuple[Replica, ...]:
    """One ``Replica`` per partition: its primary's executor (``primaries[p]``), its chosen standby's
    (``standbys``; none when on the primary's host: a standby just promoted) and the batch that standby's copy was
    reported at (None until the standby chosen now reported)."""
    out = []
    for p, primary in enumerate(primaries):
        standby = standbys.get(p, "")
        if standby and primary and host_of(standby) == host_of(primary):
            standby = ""
        known = at.get(p)
        batch = known.batch_id if known is not None and standby and known.executor == standby else None
        out.append(Replica(p, primary, standby, batch))
    return tuple(out)


class WarmStandbys:
    """The driver's side: one background warm job at a time, and where each partition's standby is. Thread-safe
    (the ``foreachBatch`` thread requests and reads, the job's thread records).

    ``run_job(plan, targets) -> list[WarmResult] | None`` runs the Spark job (``run_warm_job``; None: it did not
    finish)."""

    def __init__(self, run_job: Callable[[BatchPlan, Targets], list[WarmResult] | None]) -> None:
        self._run_job = run_job
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._waiting: tuple[Any, ...] | None = None  # the newest request made while a job ran
        self.at: dict[int, StandbyAt] = {}
        self.requested: list[int] = []  # the batches warm jobs were started for
        self.results: deque[WarmResult] = deque(maxlen=1000)  # every task's answer, newest last
        self.failures: list[BaseException] = []

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def request(self, placement: Placement, live: Callable[[], list[str]], plan: Callable[[], BatchPlan],
                batch_id: int) -> bool:
        """Start the warm job of ``batch_id`` in the background (steps 1-3 of the module docstring: ``live()``, the
        live executors, and ``plan()``, the batch's records, are read in that thread); False when one still runs:
        this request then runs after it (in place of an older waiting one)."""
        with self._lock:
            if self._thread is not None:
                self._waiting = (placement, live, plan, batch_id)
                return False
            self.requested.append(batch_id)
            self._thread = threading.Thread(target=self._loop, args=(placement, live, plan), daemon=True,
                                            name=f"blobstate-warm-{batch_id}")
            self._thread.start()
            return True

    def _loop(self, placement: Placement, live: Callable[[], list[str]], plan: Callable[[], BatchPlan]) -> None:
        while True:
            self._run(placement, live, plan)
            with self._lock:  # the thread ends under the lock: a request sees it running or starts another
                if self._waiting is None:
                    self._thread = None
                    return
                placement, live, plan, batch_id = self._waiting
                self._waiting = None
                self.requested.append(batch_id)

    def _run(self, placement: Placement, live: Callable[[], list[str]], plan: Callable[[], BatchPlan]) -> None:
        try:
            targets = tuple(sorted(placement.assign_standbys(live()).items()))
            if not targets:
                return
            warm = plan()
            results = self._run_job(warm, targets) or []
        except BaseException as exc:  # noqa: BLE001 - a standby is an optimisation: the next commit asks again
            log.warning("the warm job of the standbys failed: %s", redact(str(exc)))
            with self._lock:
                self.failures.append(exc)
            return
        with self._lock:
            self.results.extend(results)
            self.at = record_reports(self.at, results, placement.holders)
        for r in results:
            if r.skipped:
                log.info("the standby of partition %s was not warmed: %s", r.partition, r.skipped)

    def replicas(self, primaries: Sequence[str], placement: Placement) -> tuple[Replica, ...]:
        """``replicas`` of ``primaries`` with the standbys ``placement`` keeps and the positions reported."""
        with self._lock:
            at = dict(self.at)
        return replicas(primaries, placement.standbys, at)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait for the running job (if any) to finish; False when it still runs after ``timeout_s``."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
        return not self.running


def run_warm_job(placer: SparkPlacement, plan: BatchPlan, targets: Targets,
                 timeout_s: float = WARM_JOB_S) -> list[WarmResult] | None:
    """The Spark job of step 2: task ``i`` on ``targets[i]``'s executor (placed through ``placer``) runs
    ``warm_task`` for it. Returns the tasks' results, or None when the job failed or did not finish within
    ``timeout_s`` (cancelled)."""
    locations = [executor for _, executor in targets]
    return run_bounded_job(placer.sc, f"warm the standbys of {plan.key} at batch {plan.upto}", len(targets),
                           functools.partial(placer.place, locations=locations),
                           functools.partial(warm_task, plan, targets), timeout_s)


def standby_flag(standby: Any) -> int:
    """``standby`` as 0 or 1 (``standby=`` of ``blobstate.spark.partitioned``); raises ``ConfigurationError``."""
    if standby not in (0, 1):
        raise ConfigurationError(f"standby={standby!r}: expected 0 (none) or 1 (one warm standby per partition)")
    return int(standby)


__all__ = ["StandbyAt", "WarmStandbys", "record_reports", "replicas", "run_warm_job", "standby_flag"]
