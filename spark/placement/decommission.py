"""How the driver hears that Spark is decommissioning an executor, and where that executor's partitions go.

Spark (``spark.decommission.enabled=true``) decommissions an executor when it gets its decommission signal (SIGPWR
by default, ``spark.executor.decommission.signal``; Kubernetes' ``decom.sh`` sends it before a pod goes), when its
standalone worker gets its own signal or the master is asked to decommission the worker, or when dynamic allocation
lets it go. The driver's task scheduler then holds an ``ExecutorDecommissionState`` for it until it is removed, and
the scheduler backend offers none of its cores again: no new task starts there, running ones finish. Spark posts no
listener event when a decommission starts, so the driver asks: ``leaving(sc)`` reads the scheduler's state through
the JVM helper (``blobstate.spark.Decommission``), and ``DecommissionWatcher`` polls it (every second by default)
and calls back once for each executor newly leaving, so the driver can hand its partitions over before the next
batch. ``hand_over`` is that choice: a leaving primary's partition goes to its standby, else to the least loaded
executor that stays, on another host. docs/architecture.md, "Decommission: what Spark exposes and how blobstate
hears it", has the sources.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from blobstate.spark.errors import HelperUnavailable
from blobstate.spark.placement.coordinator import host_of
from blobstate.spark.placement.helper_jar import helper_class

log = logging.getLogger(__name__)

CLASS_NAME = "blobstate.spark.Decommission"
POLL_INTERVAL_S = 1.0

_UNAVAILABLE_LOGGED: set[int] = set()  # ids of the JavaSparkContexts whose reason was logged


def parse_locations(text: str) -> frozenset[str]:
    """The locations in the helper's answer: ``'\\n'``-separated ``executor_<host>_<id>`` strings, blank lines
    ignored."""
    return frozenset(line.strip() for line in text.split("\n") if line.strip())


def enabled(sc: Any) -> bool:
    """Whether the classic SparkContext ``sc`` runs with ``spark.decommission.enabled`` (off: no executor is ever
    decommissioned, so nothing is worth polling)."""
    return str(sc.getConf().get("spark.decommission.enabled", "false")).strip().lower() == "true"


def leaving(sc: Any) -> frozenset[str]:
    """The locations (``executor_<host>_<id>``, the strings ``PlacedRDD.executorLocations`` gives) of the live
    executors that the driver of the classic SparkContext ``sc`` is decommissioning: registered with its block
    manager master and holding a decommission state in its task scheduler. Empty when none is leaving, when Spark
    has no decommission state (``spark.decommission.enabled`` off: nothing is ever decommissioned), or when the JVM
    helper cannot be loaded or lacks the class (the reason logged once per context). Never raises for those; an
    error of the py4j gateway itself (the JVM gone) propagates."""
    try:
        cls = helper_class(sc, CLASS_NAME)
    except HelperUnavailable as exc:
        key = id(sc._jsc)
        if key not in _UNAVAILABLE_LOGGED:
            _UNAVAILABLE_LOGGED.add(key)
            log.warning("decommissioning executors cannot be heard (handled as losses): %s", exc)
        return frozenset()
    return parse_locations(str(cls.leavingLocations(sc._jsc.sc())))


def newly_leaving(seen: frozenset[str], now: frozenset[str]) -> tuple[list[str], frozenset[str]]:
    """(the executors of ``now`` not in ``seen``, sorted; the executors seen so far, ``seen | now``). An executor id
    is never reused within an application, so an executor is announced once even after it is gone."""
    return sorted(now - seen), seen | now


class DecommissionWatcher:
    """A daemon thread calling ``poll()`` (a set of leaving executor locations: ``lambda: leaving(sc)``) every
    ``interval_s`` seconds and ``on_leaving(executor)`` once for each executor it names for the first time, in the
    watcher's thread, in sorted order within one poll. An exception of ``poll`` or ``on_leaving`` is logged and the
    watching goes on. A context manager (started on enter, stopped on exit); ``stop()`` returns once the thread
    ended (a callback running then is waited for, up to ``timeout_s``)."""

    def __init__(self, poll: Callable[[], Iterable[str]], on_leaving: Callable[[str], None], *,
                 interval_s: float = POLL_INTERVAL_S, name: str = "blobstate-decommission-watcher") -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s!r}")
        self._poll, self._on_leaving, self.interval_s = poll, on_leaving, interval_s
        self.seen: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> DecommissionWatcher:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def __enter__(self) -> DecommissionWatcher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def poll_once(self) -> list[str]:
        """One poll: the executors newly leaving (each handed to ``on_leaving``)."""
        try:
            now = frozenset(self._poll())
        except Exception:  # noqa: BLE001 - a failed poll is retried at the next interval
            log.warning("could not ask Spark which executors are decommissioning", exc_info=True)
            return []
        new, self.seen = newly_leaving(self.seen, now)
        for executor in new:
            if self._stop.is_set():
                break
            try:
                self._on_leaving(executor)
            except Exception:  # noqa: BLE001 - one hand-over failing must not stop hearing the others
                log.warning("the hand-over of decommissioning executor %s failed", executor, exc_info=True)
        return new

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval_s)


def watch(sc: Any, on_leaving: Callable[[str], None], *, interval_s: float = POLL_INTERVAL_S) -> DecommissionWatcher:
    """A started ``DecommissionWatcher`` of the classic SparkContext ``sc`` (``leaving(sc)`` every ``interval_s``
    seconds); stop it before the context stops."""
    return DecommissionWatcher(lambda: leaving(sc), on_leaving, interval_s=interval_s).start()


def hand_over(leaving: Iterable[str], holders: Mapping[int, str], standbys: Mapping[int, str],
              live: Iterable[str]) -> dict[int, str]:
    """Where each partition whose primary is leaving goes: ``{partition: executor}``, only those partitions.

    ``leaving``: the decommissioning executors; ``holders``: each partition's primary; ``standbys``: each
    partition's standby (partitions without one absent); ``live``: the live executors (leaving ones included or
    not). A partition goes to its standby when the standby is live and not leaving; otherwise to the non-leaving
    live executor holding the fewest partitions (primaries, counting the moves already chosen; ties by location),
    on another host than the leaving primary where there is one, else on its host. A partition with nowhere to go
    (every live executor leaving) is left out: placement restores it where Spark runs it. Partitions are handed in
    ascending order; the result is deterministic. Locations are ``executor_<host>_<id>`` strings."""
    going = frozenset(leaving)
    staying = sorted(frozenset(live) - going)
    load = {e: 0 for e in staying}
    for executor in holders.values():
        if executor in load:
            load[executor] += 1
    moves: dict[int, str] = {}
    for partition in sorted(p for p, e in holders.items() if e in going):
        standby = standbys.get(partition)
        if standby is not None and standby in load:
            target = standby
        else:
            host = host_of(holders[partition])
            elsewhere = [e for e in staying if host_of(e) != host]
            candidates = elsewhere or staying
            if not candidates:
                continue
            target = min(candidates, key=lambda e: (load[e], e))
        moves[partition] = target
        load[target] += 1
    return moves
