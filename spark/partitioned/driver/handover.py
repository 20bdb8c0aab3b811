"""A graceful decommission of an executor holding partitions: they move before it goes (issue 42).

Spark (with ``spark.decommission.enabled``) tells the driver an executor is leaving (its decommission signal, a
worker or node drained, dynamic allocation shrinking) and schedules no new task on it; it exits once its running
tasks end (docs/architecture.md, "Decommission: what Spark exposes and how blobstate hears it"). blobstate's files
are not Spark blocks, so Spark migrates none of them. Here, on the driver of a placed partitioned state:

1. the leaving executors are not live for placement: ``SparkPlacement`` is built with ``leaving`` (``blobstate.spark
   .placement.decommission.leaving``), so every choice (the batch's, the snapshot job's, the standbys') avoids them
   and a partition held there goes to its host's other executor, else its standby, else the least loaded
   (``blobstate.spark.placement.coordinator:Placement.choose``);
2. ``HandOvers.on_leaving`` (called by ``blobstate.spark.placement.decommission:DecommissionWatcher`` in its thread
   the moment Spark names a leaving executor, not at the next batch) picks where each of its partitions goes
   (``blobstate.spark.placement.decommission:hand_over``: its warm standby when alive and staying, else the least
   loaded staying executor on another host) and runs the warm task there at once
   (``blobstate.spark.partitioned.driver.standbys:run_warm_job``: a standby caught up from the committed changelogs,
   a new copy restored from the repository), off the batch's path; each copy that reached the committed batch is
   recorded as the partition's holder (``Placement.record``), so the next batch runs there and finds its state in
   place.

No safety step of its own: a hand-over only brings copies to the committed record through ``LocalPartition.ensure_at``
(``blobstate.model.local_copy:first_batch_to_apply`` decides catch-up or restore) and moves a placement preference; a
batch committed meanwhile only makes the copy one batch behind, which the next batch's task catches up."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from blobstate.config.options import redact
from blobstate.spark.partitioned.executor.batch_task import BatchPlan
from blobstate.spark.partitioned.executor.warm_task import WarmResult
from blobstate.spark.placement.coordinator import SparkPlacement
from blobstate.spark.placement.decommission import DecommissionWatcher, hand_over, watch

log = logging.getLogger(__name__)
POLL_S = 0.25  # an idle leaving executor exits about 1 s after its signal: hear it well before


class HandOvers:
    """The driver's side of a decommission (module docstring). ``plan()``: the plan of the newest committed batch
    (None before the first); ``run_job(plan, targets)``: the warm job (``run_warm_job``). ``results``: every hand-over
    task's answer, ``heard``: the leaving executors in the order heard. Thread-safe for the watcher's thread and
    readers."""

    def __init__(self, placer: SparkPlacement, plan: Callable[[], BatchPlan | None],
                 run_job: Callable[[BatchPlan, tuple[tuple[int, str], ...]], list[WarmResult] | None]) -> None:
        self.placer, self._plan, self._run_job = placer, plan, run_job
        self._lock = threading.Lock()
        self.heard: list[str] = []
        self.results: list[WarmResult] = []
        self.done: list[tuple[str, dict[int, str]]] = []  # per leaving executor heard: what was handed over
        self._watcher: DecommissionWatcher | None = None

    def start(self, interval_s: float = POLL_S) -> HandOvers:
        self._watcher = watch(self.placer.sc, self.on_leaving, interval_s=interval_s)
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.stop(timeout_s)

    def on_leaving(self, executor: str) -> dict[int, str]:
        """Move the partitions ``executor`` (a location ``executor_<host>_<id>`` Spark is decommissioning) holds
        (step 2 of the module docstring); returns ``{partition: executor}`` of the copies brought to the committed
        batch and recorded. A failed warm job moves nothing (logged): the next batch's choice still avoids
        ``executor``."""
        with self._lock:
            self.heard.append(executor)
        placement = self.placer.placement
        moves = hand_over(self.placer.leaving() | {executor}, placement.holders, placement.standbys,
                          self.placer.live_executors())
        plan = self._plan() if moves else None
        results: list[WarmResult] = []
        if plan is not None:
            try:
                results = self._run_job(plan, tuple(sorted(moves.items()))) or []
            except Exception as exc:  # noqa: BLE001 - an optimisation: placement avoids the executor anyway
                log.warning("the hand-over of %s's partitions failed: %s", executor, redact(str(exc)))
        done = {}
        for r in results:
            if plan is not None and not r.skipped and r.executor == moves.get(r.partition) and \
                    r.batch_id == plan.upto:
                placement.record(r.partition, r.executor)
                done[r.partition] = r.executor
        with self._lock:
            self.results.extend(results)
            self.done.append((executor, done))
        log.info("executor %s is decommissioning: partitions %s handed over to %s", executor, sorted(done),
                 sorted(set(done.values())))
        return done

    def snapshot(self) -> dict[str, Any]:
        """What was heard and done, for a report: ``{"heard": [executor, ...], "results": [WarmResult, ...],
        "done": [(executor, {partition: new holder}), ...]}`` (``done``: one entry per executor whose hand-over
        ended)."""
        with self._lock:
            return {"heard": list(self.heard), "results": list(self.results), "done": list(self.done)}


__all__ = ["POLL_S", "HandOvers"]
