"""Where a partition's task runs: on the executor that holds its current copy (Spark's preferred locations).

Spark places a job's tasks by its RDD's preferred locations. A batch's partition tasks read the shuffled rows, whose
preferred location is the host of the shuffle's map output, so without more every partition task of a batch ran on
one host and the group hopped between hosts: a catch-up or a restore on the batch's path, a copy of every partition
on every host. Spark's own stateful operators avoid it: an executor that loads a state store reports itself to the
driver's ``StateStoreCoordinator`` and ``StateStoreRDD.getPreferredLocations`` returns that executor, as Spark's
``ExecutorCacheTaskLocation`` string ``executor_<host>_<executorId>`` (that executor first, another of its host
next, then any after ``spark.locality.wait``: Spark's delay scheduling).

Here the same, with what PySpark allows:

- **Who holds what.** Every task reports the executor it ran on (``TaskIdentity.executor``, set by the JVM helper
  ``blobstate.spark.PlacedRDD`` in the task's local properties); the driver records, per partition, the executor of
  the prepare it committed (``Placement.record``): that copy is the one at the newest state.
- **The choice** (``Placement.choose``, each batch and each snapshot job): a partition whose holder is alive goes
  there; the others (the first batch, a holder lost with its executor) go to the live executor holding the fewest
  partitions, so the group spreads over the cluster instead of following the map output.
- **The mechanism** (``SparkPlacement.place``): the batch's shuffled rows (or a snapshot job's ``parallelize``) are
  wrapped one to one in ``PlacedRDD`` (``blobstate.spark.helper_jar``), whose ``getPreferredLocations`` returns the
  choice. PySpark has no way to set a Python RDD's preferred locations (``SparkContext.makeRDD`` with locations
  cannot carry the shuffled rows: ``zip`` needs equal partition sizes, and a zipped RDD prefers the union of its
  parents' hosts; ``spark.shuffle.reduceLocality.enabled=false`` only removes the map host, it places nothing).
- **Spark Connect**: no placement. The client has no RDD API and the server runs ``foreachBatch`` in a Python
  worker that reaches Spark only through Connect's DataFrame API, which has no preferred-location hint; a
  server-side plugin would have to be installed into the server's JVM. Tasks there run where Spark puts them, as
  before (a moved partition catches up or restores, ``blobstate.spark.partition_task``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

EXECUTOR_PROPERTY = "blobstate.executor"  # the local properties the JVM helper sets in a task (PlacedRDD.java)
STAGE_ATTEMPT_PROPERTY = "blobstate.stageAttempt"


@dataclass(frozen=True)
class TaskIdentity:
    """Who ran a task: ``executor`` (``executor_<host>_<id>``; ``""`` when unknown: no helper, Spark Connect),
    Spark's ``task_attempt_id`` (unique within a SparkContext: a re-run stage's attempts get new ones), the task's
    ``attempt`` number (0 first; a re-run stage starts again at 0), ``stage_id`` and ``stage_attempt`` (-1 when
    unknown)."""

    executor: str = ""
    task_attempt_id: int = 0
    attempt: int = 0
    stage_id: int = 0
    stage_attempt: int = -1


def task_identity() -> TaskIdentity:
    """The running task's identity (``TaskIdentity()`` outside a Spark task)."""
    try:
        from pyspark import TaskContext
    except ImportError:
        return TaskIdentity()
    context = TaskContext.get()
    if context is None:
        return TaskIdentity()
    stage_attempt = context.getLocalProperty(STAGE_ATTEMPT_PROPERTY)
    return TaskIdentity(context.getLocalProperty(EXECUTOR_PROPERTY) or "", int(context.taskAttemptId()),
                        int(context.attemptNumber()), int(context.stageId()),
                        int(stage_attempt) if stage_attempt is not None else -1)


class Placement:
    """The driver's record of the executor holding each partition's newest copy, and its choice of locations.
    Pure logic (no Spark): ``record`` after a commit, ``choose`` before a job. Thread-safe enough for one writer
    (the batch thread) and readers (the snapshot thread): it replaces whole dicts."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.holders: dict[int, str] = {}

    def record(self, partition: int, executor: str) -> None:
        """Partition ``partition``'s newest copy is on ``executor`` (ignored when unknown, ``""``)."""
        if executor:
            self.holders = {**self.holders, partition: executor}

    def choose(self, live: list[str]) -> list[str]:
        """One location per partition: its holder when in ``live`` (the executors' locations), else the live
        executor holding the fewest partitions (ties: the first in ``live``); ``""`` for all when ``live`` is
        empty. A choice is not recorded: the task that runs reports where it ran."""
        if not live:
            return [""] * self.num_partitions
        holders = self.holders
        load = {e: 0 for e in live}
        for executor in holders.values():
            if executor in load:
                load[executor] += 1
        out = []
        for p in range(self.num_partitions):
            executor = holders.get(p, "")
            if executor not in load:
                executor = min(live, key=lambda e: load[e])
                load[executor] += 1
            out.append(executor)
        return out


class SparkPlacement:
    """``Placement`` applied to a classic SparkContext through the JVM helper. ``available`` is False (and
    ``place`` returns its input) when the helper cannot be loaded: the reason is logged once."""

    def __init__(self, sc: Any, num_partitions: int) -> None:
        from blobstate.spark.helper_jar import HelperUnavailable, load

        self.sc = sc
        self.placement = Placement(num_partitions)
        try:
            self._helper: Any = load(sc)
        except HelperUnavailable as exc:
            log.warning("partition tasks run without placement (where Spark puts them): %s", exc)
            self._helper = None

    @property
    def available(self) -> bool:
        return self._helper is not None

    def live_executors(self) -> list[str]:
        """The live executors' locations (the driver alone in local mode)."""
        if self._helper is None:
            return []
        return [e for e in str(self._helper.executorLocations(self.sc._jsc.sc())).split("\n") if e]

    def choose(self) -> list[str]:
        return self.placement.choose(self.live_executors())

    def place(self, rdd: Any, locations: list[str]) -> Any:
        """``rdd`` (a PySpark RDD of N partitions) with partition ``p`` preferring ``locations[p]``; the same
        rows, no shuffle. Without the helper, ``rdd`` itself."""
        if self._helper is None:
            return rdd
        from pyspark.rdd import RDD

        placed = self._helper.place(rdd._jrdd, "\n".join(locations))
        return RDD(placed, rdd.ctx, rdd._jrdd_deserializer)
