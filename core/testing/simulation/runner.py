"""One simulated run: a scenario (actors and faults, drawn from a seed), the scheduler, the invariants, the end.

``run(scenario)`` builds a fresh world (an in-memory blob store and its checkpoint logs), starts the actors, and
after every scheduled step checks the invariants (``blobstate.testing.simulation.invariants``). When every actor
is done or dead it finishes like an operator would: recovery of every work directory left behind, every rescale
command run once more (``_rescale_again``), a final writer per store (the next commit and a restore must succeed:
no store is wedged), time moved past the TTL, two gc runs through every log, and the orphan check. The result
says the first violation (if any), the interleaving and the faults that fired: with the same scenario (and
``choices``) a run is replayed exactly.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from blobstate.commit.recover import recover
from blobstate.commit.session import StoreSession
from blobstate.errors import BlobstateError, IntegrityError
from blobstate.journal.events import Event
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.manager import get_plugin_manager
from blobstate.repository.log_identity import log_identity
from blobstate.repository.marker import write_marker
from blobstate.testing.simulation import actors, doors, rescaler
from blobstate.testing.simulation.invariants import StoreInfo, Violation
from blobstate.testing.simulation.scheduler import Actor, Fault, Killed
from blobstate.testing.simulation.stage import SIM_URL, ActorSpec, Scenario, Stage, _log_url

MAX_STEPS = 200_000  # a run that takes longer is reported as a livelock


@dataclass
class Result:
    """A run's outcome: ``violation`` (None: every invariant held), the interleaving, the faults that fired."""

    scenario: Scenario
    violation: Violation | None
    steps: int
    trace: list[str]
    labels: list[str]
    fired: list[Fault]
    errors: dict[str, str]
    phase: str = "run"  # where the violation was found: "run" (after a step) or "final" (the operator's end)
    rescales: list[tuple[str, str]] = field(default_factory=list)  # (actor, outcome) of every rescale run

    @property
    def failed(self) -> bool:
        return self.violation is not None


class _Relay:
    """The ``blobstate_journal_event`` observer: every journal event is a scheduling point."""

    sim: Simulation | None = None

    @hookimpl
    def blobstate_journal_event(self, event: Event, store_key: StoreKey) -> None:
        sim = self.sim
        if sim is None:
            return
        if event.type_name == "CommitCompleted":
            sim.checker.completed.add(event.commit_id)
        sim.scheduler.point(f"journal {event.type_name}")


RELAY = _Relay()
RELAY_NAME = "blobstate-simulation"


class Simulation(Stage):
    """One run: the stage its actors act on, run step by step and finished as an operator would."""

    # -- the run ------------------------------------------------------------------------------------------------
    def run(self, *, check_every_step: bool = True) -> Result:
        manager = get_plugin_manager()
        if not manager.has_plugin(RELAY_NAME):
            manager.register(RELAY, RELAY_NAME)
        RELAY.sim = self
        violation: Violation | None = None
        phase = "run"
        try:
            with layout.use_clock(self.scheduler.clock):
                write_marker(self.store, log_identity(_log_url(self.scenario.logs[0]), SIM_URL))  # blobstate init
                for extra in self.extras:
                    extra.prepare(self)
                for spec in self.scenario.actors:
                    program = _program(spec.program, self.extras)
                    self.scheduler.spawn(spec.name, partial(_call, program, self, spec.args),
                                         start_ms=spec.start_ms, skew_ms=spec.skew_ms)
                violation = self._loop(check_every_step)
                if violation is None:
                    phase = "final"
                    violation = self._finish()
        finally:
            RELAY.sim = None
            self.scheduler.teardown()
        errors = {a.name: f"{type(a.error).__name__}: {a.error}" for a in self.scheduler.actors if a.error}
        return Result(self.scenario, violation, self.scheduler.steps, self.scheduler.trace, self.scheduler.labels,
                      self.scheduler.fired, errors, phase, self.rescale_outcomes)

    def _loop(self, check_every_step: bool) -> Violation | None:
        while self.scheduler.step():
            for actor in self.scheduler.actors:
                if actor.error is not None:
                    return _as_violation(actor)
            if check_every_step:
                try:
                    self.checker.check()
                    for extra in self.extras:
                        extra.check(self)
                except Violation as exc:
                    return exc
            if self.scheduler.steps > MAX_STEPS:
                return Violation("livelock", f"no end after {MAX_STEPS} steps")
        return None

    def _finish(self) -> Violation | None:
        """Recovery of what was left, the next commit and a restore of every store, then gc and the orphan check."""
        clock = self.scheduler.clock
        repo = self.repos["log"]
        try:
            for names in list(self.work_dirs.values()):
                for key, wd, retain in names:
                    if os.path.isdir(wd):
                        with StoreSession(key, wd) as session:
                            recover(session, repo, retain=retain)
            self.checker.check(final=True, next_batch_pending=True)
            doors.check_engines(self)  # every query's committed state restores (issue 39)
            final = Actor("final", lambda a: None)
            self._rescale_again(final)
            self.checker.check(final=True, next_batch_pending=True)
            for key, info in sorted(self.stores.items()):
                self._next_commit(final, key, info)
            self.checker.check(final=True)
            clock.now += 2 * self.ttl_ms + 1
            for _ in range(2):
                for name in self.scenario.logs:
                    actors.gc(self, final, runs=1, gap_ms=0, log=name)
            self.checker.check(final=True)
            self.checker.orphans()
            for extra in self.extras:
                extra.final(self)
        except Violation as exc:
            return exc
        except (BlobstateError, AssertionError, OSError) as exc:
            return Violation("wedged", f"the final recovery, commit or gc failed: {type(exc).__name__}: {exc}")
        return None

    def _rescale_again(self, final: Actor) -> None:
        """Every rescale command once more, from the host of its first run, as an operator would rerun it: a run
        killed or paused earlier is finished or redone. It commits the copy, or finds exactly this rescale
        committed (``RescaleAlreadyCommitted``), or finds no source state of its batch left (a source that kept
        running pruned it), or cannot read the source (an object of it a fault lost or damaged); never anything
        else."""
        for spec in self.scenario.actors:
            if spec.program != "rescaler" or spec.args.get("host", spec.name) != spec.name:
                continue
            self._acting = f"final-{spec.name}"
            self.rescale_sources[self._acting] = spec.args["source"]
            try:
                outcome = rescaler.rescale_once(self, final, self.repos["log"], source=spec.args["source"],
                                                target=spec.args["target"], partitions=spec.args["partitions"],
                                                retain=spec.args["retain"], host=spec.name)
            finally:
                self._acting = ""
            self.rescale_outcomes.append((f"final-{spec.name}", outcome))
            history = self.repos["log"].log.history(spec.args["target"])
            source_damaged = any(b.startswith(spec.args["source"].prefix + "/") for b in self.world.damaged)
            allowed = ("committed", "already", "nothing", *(("unreadable",) if source_damaged else ()))
            if outcome not in allowed or (outcome in ("committed", "already") and len(history) != 1):
                raise Violation("rescale", f"rerun of {spec.name}'s rescale into {spec.args['target']}: {outcome}, "
                                           f"the destination holds {len(history)} records")
            if outcome in ("committed", "already"):  # finished: nothing it references still carries a TTL
                refs = self.checker.references(self.checker.repos["log"], "log", history[0])
                held = sorted(b for b in refs if b in self.world.blobs and self.world.blobs[b].expires_ms is not None)
                if held:
                    raise Violation("rescale", f"rerun of {spec.name}'s rescale: {len(held)} objects of the committed "
                                               f"copy still carry a TTL ({held[0]}): a lifecycle rule expires them")

    def _next_commit(self, final: Actor, key: StoreKey, info: StoreInfo) -> None:
        """No store is wedged: a new writer commits the next batch after the latest, and it restores."""
        deltas = any(cp.is_delta for cp in self.repos["log"].log.history(key))
        if info.partitions:
            actors.group_owner(self, final, key=key, name=info.name, partitions=info.partitions,
                               retain=info.retain, batches=1, snapshot_every=1, from_model=True)
        else:
            actors.writer(self, final, key=key, name=info.name, retain=info.retain, batches=1, deltas=deltas,
                          snapshot_every=1, from_model=True)
        for p in range(info.partitions) if info.partitions else [None]:
            name = info.name if p is None else f"{info.name}/p{p}"
            dest = self.local_dir(final, f"check-{key.store}-{p}", create=False)
            try:
                actors.restore_latest(self, self.repos["log"], key, name, dest, partition=p)
            except IntegrityError:
                if not self.world.damaged:  # a fault's damaged object may live on in a reused blob
                    raise
        history = self.repos["log"].log.history(key)
        if not history or history[-1].writer_id != "final":
            raise Violation("wedged", f"{key}: a new writer could not commit the next batch (latest: "
                                      f"{history[-1].writer_id if history else None})")


def _program(name: str, extras: list = ()) -> Callable:  # type: ignore[assignment]
    """An actor's program by name: a module of ``Scenario.extras``', ``blobstate.testing.simulation.actors``', the
    rescale actor or the doors'."""
    for extra in extras:
        if hasattr(extra, name):
            return getattr(extra, name)  # type: ignore[no-any-return]
    return getattr(rescaler, name) if name == "rescaler" else getattr(actors, name, None) or getattr(doors, name)


def _call(program: Callable, sim: Simulation, args: dict, actor: Actor) -> None:
    program(sim, actor, **args)


def _as_violation(actor: Actor) -> Violation:
    if isinstance(actor.error, Violation):
        return actor.error
    text = "".join(traceback.format_exception(actor.error)[-6:])
    return Violation("crash", f"actor {actor.name} raised {type(actor.error).__name__}: {actor.error}\n{text}")


def run(scenario: Scenario, *, check_every_step: bool = True) -> Result:
    """Run ``scenario`` in a fresh temporary directory (removed afterwards)."""
    base = tempfile.mkdtemp(prefix="blobstate-sim-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        return Simulation(scenario, base).run(check_every_step=check_every_step)
    finally:
        shutil.rmtree(base, ignore_errors=True)


__all__ = ["ActorSpec", "Killed", "Result", "Scenario", "Simulation", "run"]
