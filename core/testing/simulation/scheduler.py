"""The seeded scheduler: actors are threads, exactly one runs at a time, hand-offs only at scheduling points.

An actor runs real blobstate code (the pipelines) in its own thread. Whenever that code reaches a scheduling point
(a blob store or checkpoint log call of the simulated backends, a journal event through the
``blobstate_journal_event`` hook, a sleep) the actor hands the baton back to the scheduler and waits. The
scheduler picks the next actor to run from the runnable ones (a seeded ``random.Random``, or an explicit list of
choices when a schedule is replayed or shrunk), so the same seed gives the same interleaving and the same result:
the way FoundationDB's simulator runs many processes in one thread of control.

Time is virtual (``VirtualClock``, installed with ``blobstate.model.layout.use_clock``): it moves by a fixed
quantum per scheduled step and jumps when every actor is paused or asleep. Each actor reads the wall clock with
its own skew; monotonic time has none.

Faults tied to an actor fire when it reaches its n-th scheduling point: ``pause`` (not runnable for a while: a
SIGSTOP, a GC pause, a zombie), ``kill`` (it never runs again; its session's lock is released like the kernel
does for a dead process, and its work directory is kept or removed).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STEP_MS = 3  # virtual ms a scheduled step takes


class Killed(BaseException):
    """Raised in a killed actor's thread when the run is torn down (it never runs protocol code again)."""


@dataclass
class Fault:
    """A fault of ``actor`` at its ``at``-th scheduling point: ``pause`` for ``ms``, or ``kill`` (``keep``: its
    work directory survives); or, with ``actor`` empty, a ``lose``/``damage`` of an object at global step ``at``,
    or an ``unknown`` outcome of the ``at``-th append (``keep``: the log applied it)."""

    kind: str
    actor: str
    at: int
    ms: int = 0
    keep: bool = True
    label: str = ""  # with a label, ``at`` counts the actor's points of that label (a journal event type, a call)

    def where(self) -> str:
        return f"its {self.at}th '{self.label}'" if self.label else f"its point {self.at}"

    def __str__(self) -> str:
        if self.kind == "pause":
            return f"pause {self.actor} at {self.where()} for {self.ms} ms"
        if self.kind == "kill":
            return f"kill {self.actor} at {self.where()} ({'work dir kept' if self.keep else 'work dir lost'})"
        if self.kind == "unknown":
            return f"append #{self.at} outcome unknown ({'applied' if self.keep else 'not applied'})"
        return f"{self.kind} an object at step {self.at}"


@dataclass
class Actor:
    name: str
    program: Callable[[Actor], None]
    start_ms: int = 0
    skew_ms: int = 0
    wake_ms: int = 0
    points: int = 0
    seen: dict[str, int] = field(default_factory=dict)  # points per label
    state: str = "new"  # new, ready, done, dead
    error: BaseException | None = None
    resources: list[Any] = field(default_factory=list)  # sessions to release when killed
    work_dirs: list[str] = field(default_factory=list)
    go: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    thread: threading.Thread | None = None
    last: str = ""


class VirtualClock:
    """``blobstate.model.layout.SystemClock`` on virtual time: ``now`` ms, per-actor skew, seeded id tokens."""

    def __init__(self, scheduler: Scheduler, start_ms: int, seed: int) -> None:
        self.scheduler = scheduler
        self.now = start_ms
        self.ids = random.Random(seed ^ 0x1D5)

    def time(self) -> float:
        actor = self.scheduler.current()
        return (self.now + (actor.skew_ms if actor else 0)) / 1000

    def monotonic(self) -> float:
        return self.now / 1000

    def sleep(self, seconds: float) -> None:
        actor = self.scheduler.current()
        if actor is None:
            self.now += int(seconds * 1000)
            return
        actor.wake_ms = self.now + max(1, int(seconds * 1000))
        self.scheduler.point("sleep")

    def token(self) -> str:
        return f"{self.ids.getrandbits(128):032x}"


class Scheduler:
    """Runs ``Actor`` programs one scheduling point at a time; ``choices`` replays a recorded interleaving."""

    def __init__(self, seed: int, *, start_ms: int, faults: list[Fault], choices: list[str] | None = None,
                 on_fault: Callable[[Fault], None] | None = None) -> None:
        self.rng = random.Random(seed)
        self.clock = VirtualClock(self, start_ms, seed)
        self.actors: list[Actor] = []
        self.faults = {(f.actor, f.label, f.at): f for f in faults if f.kind in ("pause", "kill")}
        self.global_faults = {f.at: f for f in faults if f.kind in ("lose", "damage")}
        self.on_fault = on_fault
        self.choices = choices
        self.trace: list[str] = []  # the actor chosen at each step
        self.labels: list[str] = []  # where it stopped next (for the printed schedule)
        self.fired: list[Fault] = []
        self.steps = 0
        self._back = threading.Semaphore(0)
        self._local = threading.local()
        self.tearing_down = False

    # -- actors' side -------------------------------------------------------------------------------------------
    def current(self) -> Actor | None:
        return getattr(self._local, "actor", None)

    def spawn(self, name: str, program: Callable[[Actor], None], *, start_ms: int = 0, skew_ms: int = 0) -> Actor:
        actor = Actor(name, program, start_ms=self.clock.now + start_ms, skew_ms=skew_ms)
        actor.wake_ms = actor.start_ms
        self.actors.append(actor)
        return actor

    def point(self, label: str) -> None:
        """A scheduling point of the calling actor (a no-op outside actor threads)."""
        actor = self.current()
        if actor is None:
            return
        if self.tearing_down or actor.state == "dead":
            raise Killed(actor.name)
        actor.points += 1
        actor.last = label
        actor.seen[label] = actor.seen.get(label, 0) + 1
        fault = self.faults.get((actor.name, "", actor.points)) or self.faults.get((actor.name, label,
                                                                                    actor.seen[label]))
        if fault is not None and fault not in self.fired:
            self.fired.append(fault)
            if fault.kind == "pause":
                actor.wake_ms = max(actor.wake_ms, self.clock.now + fault.ms)
            else:
                actor.state = "dead"
                if self.on_fault is not None:
                    self.on_fault(fault)  # releases its lock; may remove its work dir
        self._back.release()
        actor.go.acquire()
        if self.tearing_down or actor.state == "dead":
            raise Killed(actor.name)

    def _body(self, actor: Actor) -> None:
        self._local.actor = actor
        actor.go.acquire()
        try:
            if not self.tearing_down:
                actor.program(actor)
        except Killed:
            pass
        except BaseException as exc:  # noqa: BLE001 - reported as the actor's outcome
            actor.error = exc
        finally:
            if actor.state != "dead":
                actor.state = "done"
            self._back.release()

    # -- the scheduler's side -----------------------------------------------------------------------------------
    def runnable(self) -> list[Actor]:
        return [a for a in self.actors if a.state in ("new", "ready") and a.wake_ms <= self.clock.now]

    def step(self) -> bool:
        """Run one actor to its next scheduling point; False when every actor is done or dead."""
        ready = self.runnable()
        if not ready:
            waiting = [a.wake_ms for a in self.actors if a.state in ("new", "ready")]
            if not waiting:
                return False
            self.clock.now = max(self.clock.now, min(waiting))
            ready = self.runnable()
        actor = self._choose(ready)
        fault = self.global_faults.get(self.steps)
        if fault is not None and self.on_fault is not None:
            self.fired.append(fault)
            self.on_fault(fault)
        self.trace.append(actor.name)
        self.steps += 1
        if actor.state == "new":
            actor.state = "ready"
            actor.thread = threading.Thread(target=self._body, args=(actor,), name=f"sim-{actor.name}", daemon=True)
            actor.thread.start()
        actor.go.release()
        self._back.acquire()
        self.labels.append(actor.last if actor.state == "ready" else actor.state)
        self.clock.now += STEP_MS
        return True

    def _choose(self, ready: list[Actor]) -> Actor:
        if self.choices is None:
            return ready[self.rng.randrange(len(ready))]
        if self.steps < len(self.choices):
            wanted = self.choices[self.steps]
            for actor in ready:
                if actor.name == wanted:
                    return actor
        return ready[0]

    def teardown(self) -> None:
        """End every thread still waiting (killed actors, or all of them after a failure)."""
        self.tearing_down = True
        for actor in self.actors:
            if actor.thread is not None and actor.thread.is_alive():
                actor.go.release()
                self._back.acquire(timeout=5)
                actor.thread.join(timeout=5)
