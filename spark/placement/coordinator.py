"""Where a partition's task runs: on the executor that holds its current copy (Spark's preferred locations).

Spark places a job's tasks by its RDD's preferred locations. A batch's partition tasks read the shuffled rows, whose
preferred location is the host of the shuffle's map output, so without more every partition task of a batch ran on
one host and the group hopped between hosts: a catch-up or a restore on the batch's path, a copy of every partition
on every host. Spark's own stateful operators avoid it: an executor that loads a state store reports itself to the
driver's ``StateStoreCoordinator`` and ``StateStoreRDD.getPreferredLocations`` returns that executor, as Spark's
``ExecutorCacheTaskLocation`` string ``executor_<host>_<executorId>`` (that executor first, another of its host
next, then any after ``spark.locality.wait``: Spark's delay scheduling).

Here the same, with what PySpark allows:

- **Who holds what.** Every task reports the executor it ran on (``TaskIdentity.executor``,
  ``blobstate.spark.executor.identity``, set by the JVM helper ``blobstate.spark.PlacedRDD`` in the task's local
  properties); the driver records, per partition, the executor of the prepare it committed (``Placement.record``):
  that copy is the one at the newest state.
- **The choice** (``Placement.choose``, each batch and each snapshot job): a partition whose holder is alive goes
  there; one whose holder is gone but whose host has a live executor goes to that executor (the copy is on the
  host's disk); the others (the first batch, a host lost) go to the live executor holding the fewest partitions, so
  the group spreads over the cluster instead of following the map output. With standbys (``standby=1``), a
  partition whose holder's host is gone goes to its standby's executor before anything else
  (``choose_standbys``: one per partition on another host than its primary, kept warm by the driver's warm job,
  ``blobstate.spark.partitioned.driver.standbys``); executors Spark is decommissioning (``leaving``) are avoided.
- **After a driver restart** the record is empty and the executors are new: before its first batch the driver runs
  one small task on each live executor reporting the copies its host has (their markers), and adopts, per
  partition, the executor whose copy is at the newest committed record (``Placement.adopt``), as Spark's executors
  report the stores they load to a new ``StateStoreCoordinator``.
- **The mechanism** (``SparkPlacement.place``): the batch's shuffled rows (or a snapshot job's ``parallelize``) are
  wrapped one to one in ``PlacedRDD`` (``blobstate.spark.placement.helper_jar``), whose ``getPreferredLocations``
  returns the choice. PySpark has no way to set a Python RDD's preferred locations (``SparkContext.makeRDD`` with
  locations cannot carry the shuffled rows: ``zip`` needs equal partition sizes, and a zipped RDD prefers the union of
  its parents' hosts; ``spark.shuffle.reduceLocality.enabled=false`` only removes the map host, it places nothing).
- **Spark Connect**: no placement. The client has no RDD API and the server runs ``foreachBatch`` in a Python
  worker that reaches Spark only through Connect's DataFrame API, which has no preferred-location hint; a
  server-side plugin would have to be installed into the server's JVM. Tasks there run where Spark puts them, as
  before (a moved partition catches up or restores, ``blobstate.spark.partitioned.executor.partition``).
"""

from __future__ import annotations

import functools
import logging
import threading
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

from blobstate.spark.errors import HelperUnavailable
from blobstate.spark.placement.helper_jar import load

log = logging.getLogger(__name__)

class Placement:
    """The driver's record of the executor holding each partition's newest copy, and its choice of locations.
    Pure logic (no Spark): ``record`` after a commit, ``choose`` before a job. Thread-safe enough for one writer
    (the batch thread) and readers (the snapshot thread): it replaces whole dicts."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.holders: dict[int, str] = {}
        #: partition -> the executor keeping its warm standby copy (``choose_standbys``; empty without standbys)
        self.standbys: dict[int, str] = {}

    def record(self, partition: int, executor: str) -> None:
        """Partition ``partition``'s newest copy is on ``executor`` (ignored when unknown, ``""``)."""
        if executor:
            self.holders = {**self.holders, partition: executor}

    def choose(self, live: list[str], leaving: Collection[str] = frozenset()) -> list[str]:
        """One location per partition: its holder when in ``live`` (the executors' locations) and not ``leaving``
        (executors Spark is decommissioning), else a live, not leaving executor of the holder's host (the copy is on
        that disk), else its standby (``standbys``) when live and not leaving (a warm copy a catch-up away), else
        the live executor holding the fewest partitions (ties: the first in ``live``); ``""`` for all when ``live``
        is empty. Leaving executors are chosen only when every live one is leaving. A choice is not recorded: the
        task that runs reports where it ran."""
        if not live:
            return [""] * self.num_partitions
        usable = [e for e in live if e not in leaving] or list(live)
        by_host = {}
        for e in reversed(usable):
            by_host[host_of(e)] = e
        load = dict.fromkeys(usable, 0)
        wanted = {}
        for p, executor in self.holders.items():
            if executor not in load:
                executor = by_host.get(host_of(executor), "")
            if not executor and self.standbys.get(p, "") in load:
                executor = self.standbys[p]
            if executor:
                wanted[p] = executor
                load[executor] += 1
        out = []
        for p in range(self.num_partitions):
            executor = wanted.get(p, "")
            if not executor:
                executor = min(usable, key=lambda e: load[e])
                load[executor] += 1
            out.append(executor)
        return out

    def assign_standbys(self, live: list[str], leaving: Collection[str] = frozenset()) -> dict[int, str]:
        """Choose (``choose_standbys``) and keep (``standbys``) each partition's standby executor for the holders
        as recorded, the current standbys kept where they still qualify. Returns the new ``standbys``."""
        primaries = [self.holders.get(p, "") for p in range(self.num_partitions)]
        self.standbys = choose_standbys(live, primaries, current=self.standbys, leaving=leaving)
        return self.standbys

    def adopt(self, reports: list[tuple[str, dict[int, str]]], records: dict[int, tuple[Any, ...]]) -> int:
        """Take the holders from what executors report of their hosts' copies (``(executor, {partition:
        checkpoint id of the copy's marker})``): per partition without a holder, the executor whose copy is at the
        committed record (of ``records[p]``, ``Checkpoint``s) of the highest batch. Returns how many it adopted."""
        adopted = 0
        holders = dict(self.holders)
        for p in range(self.num_partitions):
            if p in holders:
                continue
            batch_of = {r.checkpoint_id: r.batch_id for r in records.get(p, ()) if r.batch_id is not None}
            found = [(batch_of[cid], executor) for executor, markers in reports if executor
                     for q, cid in markers.items() if q == p and cid in batch_of]
            if found:
                holders[p] = max(found)[1]
                adopted += 1
        self.holders = holders
        return adopted


def choose_standbys(live: Sequence[str], primaries: Sequence[str], *, current: Mapping[int, str] | None = None,
                    leaving: Collection[str] = frozenset()) -> dict[int, str]:
    """``{partition: standby executor}`` for the partitions of ``primaries`` (``primaries[p]``: the executor
    location, ``executor_<host>_<id>``, holding partition ``p``'s primary copy; ``""``: unknown, no standby).

    A standby (``standby=1`` on ``blobstate.spark.partitioned``) is a second local copy kept at the committed state
    (``blobstate.spark.partitioned.driver.standbys``) on a live executor (of ``live``, not in ``leaving``) of
    **another host** than the primary's, so that losing the primary's host leaves a copy a catch-up away; none when
    there is no such executor (a one-host cluster: a second copy on the same disk is no spare; Kafka Streams never
    puts a standby replica on its active task's client either). ``current``'s standby is kept while it still
    qualifies (a moved standby costs a copy); the others go to the candidate holding the fewest primaries and
    standbys so far (ties: the first in ``live``)."""
    usable = [e for e in live if e not in leaving]
    load = dict.fromkeys(usable, 0)
    for e in primaries:
        if e in load:
            load[e] += 1
    kept = {p: e for p, e in (current or {}).items()
            if 0 <= p < len(primaries) and primaries[p] and e in load and host_of(e) != host_of(primaries[p])}
    for e in kept.values():
        load[e] += 1
    out: dict[int, str] = {}
    for p, primary in enumerate(primaries):
        if not primary:
            continue
        if p in kept:
            out[p] = kept[p]
            continue
        candidates = [e for e in usable if host_of(e) != host_of(primary)]
        if candidates:
            chosen = min(candidates, key=lambda e: load[e])
            load[chosen] += 1
            out[p] = chosen
    return out


def host_of(executor: str) -> str:
    """The host of a location ``executor_<host>_<id>`` (the location itself when it names a host)."""
    if executor.startswith("executor_"):
        return executor[len("executor_"):].rsplit("_", 1)[0]
    return executor


class SparkPlacement:
    """``Placement`` applied to a classic SparkContext through the JVM helper. ``available`` is False (and
    ``place`` returns its input) when the helper cannot be loaded: the reason is logged once."""

    def __init__(self, sc: Any, num_partitions: int, *,
                 leaving: Callable[[Any], Collection[str]] | None = None) -> None:
        """``leaving(sc)``: the executors Spark is decommissioning (``blobstate.spark.placement.decommission
        .leaving``; None: none ever), never live for placement (no new task starts there)."""
        self.sc = sc
        self.placement = Placement(num_partitions)
        self._leaving = leaving
        try:
            self._helper: Any = load(sc)
        except HelperUnavailable as exc:
            log.warning("partition tasks run without placement (where Spark puts them): %s", exc)
            self._helper = None

    @property
    def available(self) -> bool:
        return self._helper is not None

    def leaving(self) -> frozenset[str]:
        """The executors Spark is decommissioning (empty without ``leaving``)."""
        return frozenset(self._leaving(self.sc)) if self._leaving is not None and self._helper is not None \
            else frozenset()

    def live_executors(self) -> list[str]:
        """The live executors' locations that are not leaving (the driver alone in local mode)."""
        if self._helper is None:
            return []
        gone = self.leaving()
        return [e for e in str(self._helper.executorLocations(self.sc._jsc.sc())).split("\n") if e and e not in gone]

    def choose(self) -> list[str]:
        return self.placement.choose(self.live_executors())

    def locate(self, task: Callable[[int, Iterable[Any]], Iterator[tuple[str, dict[int, str]]]],
               records: dict[int, tuple[Any, ...]], what: str, timeout_s: float) -> int:
        """Before the first batch of this driver: ``task(index, rows)`` runs once on each live executor and reports
        the copies of ``what``'s partitions its host has (``blobstate.spark.partitioned.executor.partition
        .locate_task``); ``Placement.adopt`` takes the newest committed one of ``records``. Returns how many
        partitions it placed (0: one executor or none, or the job did not finish within ``timeout_s``)."""
        live = self.live_executors()
        if len(live) < 2:
            return 0
        reports = run_bounded_job(self.sc, f"locate the copies of {what}", len(live),
                                  functools.partial(self.place, locations=live), task, timeout_s)
        return self.placement.adopt(reports or [], records)

    def release(self, task: Callable[[int, Iterable[Any]], Iterator[bool]], num_partitions: int, what: str,
                timeout_s: float) -> None:
        """The executors holding ``what``'s ``num_partitions`` partitions close their databases: ``task(partition,
        rows)`` runs where each is placed (``blobstate.spark.partitioned.executor.partition.release_task``), bounded
        by ``timeout_s`` (else they close once idle)."""
        run_bounded_job(self.sc, f"close the open partitions of {what}", num_partitions,
                        functools.partial(self.place, locations=self.choose()), task, timeout_s)

    def place(self, rdd: Any, locations: list[str]) -> Any:
        """``rdd`` (a PySpark RDD of N partitions) with partition ``p`` preferring ``locations[p]``; the same
        rows, no shuffle. Without the helper, ``rdd`` itself."""
        if self._helper is None:
            return rdd
        from pyspark.rdd import RDD

        placed = self._helper.place(rdd._jrdd, "\n".join(locations))
        return RDD(placed, rdd.ctx, rdd._jrdd_deserializer)


def run_bounded_job(sc: Any, what: str, tasks: int, place: Callable[[Any], Any] | None,
                    task: Callable[[int, Iterable[Any]], Iterator[Any]], timeout_s: float) -> list[Any] | None:
    """A small job of ``tasks`` tasks (``place``: where each runs) running ``task(index, rows)``, waited for at most
    ``timeout_s``: its results, or None when it did not finish in time (cancelled) or failed (logged at INFO:
    these jobs are optimisations). Classic PySpark, a running SparkContext."""
    group = f"blobstate-{uuid.uuid4().hex[:12]}"
    done: list[list[Any]] = []

    def job() -> None:
        try:
            sc.setJobGroup(group, f"blobstate: {what}", interruptOnCancel=True)
            rdd = sc.parallelize(list(range(tasks)), tasks)  # a list: no Python stage before the task's
            if place is not None:
                rdd = place(rdd)
            done.append(rdd.mapPartitionsWithIndex(task).collect())
        except Exception as exc:  # noqa: BLE001 - an optimisation: the caller goes on without it
            log.info("could not %s: %s", what, exc)

    thread = threading.Thread(target=job, name=group, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        log.info("could not %s within %s s", what, timeout_s)
        sc.cancelJobGroup(group)
        thread.join(timeout_s)
        return None
    return done[0] if done else None
