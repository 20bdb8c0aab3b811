"""The stage of one simulated run: the scenario it plays (``Scenario``, ``ActorSpec``) and the state its actors act
on (``Stage``: the in-memory world, the repositories, the scheduler, each actor's directories). The actors
(``actors``, ``doors``, ``rescaler`` and the extras) take a ``Stage``; ``blobstate.testing.simulation.runner`` runs
one.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
from dataclasses import dataclass, field

from blobstate.codec.cipher import ObjectCipher
from blobstate.errors import LogMismatchError
from blobstate.model.records import StoreKey
from blobstate.repository.log_identity import log_identity
from blobstate.repository.marker import bind_log, ensure_repository
from blobstate.repository.repo import Repository
from blobstate.testing.simulation.invariants import Checker, StoreInfo
from blobstate.testing.simulation.scheduler import Actor, Fault, Scheduler
from blobstate.testing.simulation.world import SimBlobStore, World, sim_repository

START_MS = 1_800_000_000_000  # the virtual epoch (ms)


@dataclass
class ActorSpec:
    """An actor of a scenario: ``program`` (a name in ``blobstate.testing.simulation.actors``) and its arguments."""

    name: str
    program: str
    start_ms: int = 0
    skew_ms: int = 0
    args: dict = field(default_factory=dict)

    def __str__(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.args.items() if k != "key")
        return f"{self.name}: {self.program}({shown}) from {self.start_ms} ms, clock skew {self.skew_ms:+d} ms"


@dataclass
class Scenario:
    """What a run does: ``seed`` (the scheduler's and the ids' randomness), stores, actors, faults, and
    optionally the explicit interleaving ``choices`` (actor names, one per step)."""

    seed: int
    ttl_ms: int
    stores: dict[StoreKey, StoreInfo]
    actors: list[ActorSpec]
    faults: list[Fault]
    logs: tuple[str, ...] = ("log",)
    choices: list[str] | None = None
    damage_targets: int = 0  # seed of the choice of the object a lose/damage fault hits
    encrypted: bool = False  # every object encrypted, every record sealed (a data key drawn from the seed)
    #: modules of further actors (``blobstate.testing.simulation.keys``): their programs, and ``prepare(sim)``,
    #: ``check(sim)`` (after every step) and ``final(sim)`` (at the end) hooks
    extras: tuple[str, ...] = ()

    def cipher(self) -> ObjectCipher | None:
        """The encrypted repository's cipher (None: not encrypted): the same seed, the same key."""
        if not self.encrypted:
            return None
        return ObjectCipher(hashlib.sha256(f"blobstate-simulation/{self.seed}".encode()).digest(), "simulation")


class Stage:
    """The state of one run that its actors act on: the world, the repositories, the scheduler, the directories
    of each actor's host, the rescales' sources (``blobstate.testing.simulation.runner.Simulation`` runs it)."""

    def __init__(self, scenario: Scenario, base: str) -> None:
        self.scenario = scenario
        self.seed = scenario.seed
        self.ttl_ms = scenario.ttl_ms
        self.stores = scenario.stores
        self.base = base
        self.world = World()
        self.store = SimBlobStore(self.world)
        self.repos = {name: sim_repository(self.store, name, scenario.cipher()) for name in scenario.logs}
        self.checker = Checker(self.world, scenario.stores, list(scenario.logs), cipher=scenario.cipher())
        self.work_dirs: dict[str, list[tuple[StoreKey, str, int]]] = {}
        self.killed: list[tuple[Actor, bool]] = []
        self.rescale_sources: dict[str, StoreKey] = {}  # a rescale actor -> its source, which it never changes
        self.rescale_batch: dict[StoreKey, int] = {}  # a rescale's destination -> the batch its command rescales
        self.rescale_outcomes: list[tuple[str, str]] = []  # (actor, outcome) of every rescale run
        self.scheduler = Scheduler(scenario.seed, start_ms=START_MS, faults=scenario.faults,
                                   choices=scenario.choices, on_fault=self._fault)
        self.world.point = self.scheduler.point
        self.world.server_clock = lambda: self.scheduler.clock.now
        self.world.unknown_appends = {f.at: f.keep for f in scenario.faults if f.kind == "unknown"}
        self.world.on_mutation = self._mutated
        self._targets = __import__("random").Random(scenario.damage_targets)
        self.extras = [importlib.import_module(name) for name in scenario.extras]
        self._acting = ""  # the actor the run's end acts as, outside the scheduler

    # -- for the actors -----------------------------------------------------------------------------------------
    def open_repo(self, log: str) -> Repository | None:
        """The repository as an actor opened with checkpoint log ``log`` sees it, opened as ``Repository.open`` does:
        the marker read (created on a first open) and the log's identity checked against the one it records
        (``marker.bind_log``); None when that refuses (``LogMismatchError``: the process would exit 2)."""
        try:
            info = ensure_repository(self.store, SIM_URL, create=True, checkpoint_log=log_identity(_log_url(log),
                                                                                                   SIM_URL))
            bind_log(self.store, info, SIM_URL, log_identity(_log_url(log), SIM_URL))
        except LogMismatchError:
            return None
        return self.repos[log]

    def local_dir(self, actor: Actor, name: str, *, create: bool = True) -> str:
        path = os.path.join(self.base, actor.name, name)
        if create:
            os.makedirs(path, exist_ok=True)
        return path

    def work_dir(self, actor: Actor, key: StoreKey, retain: int, *, host: str | None = None) -> str:
        """``actor``'s work directory of ``key`` on ``host`` (default: its own host, named after it)."""
        path = os.path.join(self.base, host or actor.name, "work", key.store)
        self.work_dirs.setdefault(actor.name, []).append((key, path, retain))
        return path

    def orphaned_work_dirs(self) -> list[tuple[StoreKey, str, int]]:
        """The work directories killed actors left behind (kept ones)."""
        return [w for actor, kept in self.killed if kept for w in self.work_dirs.get(actor.name, [])
                if os.path.isdir(w[1])]

    def _mutated(self, op: str, target: str) -> None:
        """A rescale never changes its source: no object of the source's prefix, no record of its log."""
        actor = self.scheduler.current()
        source = self.rescale_sources.get(actor.name if actor is not None else self._acting)
        if source is not None and target.startswith(source.prefix + "/"):
            self.checker.tampered.append(f"rescale {actor.name if actor else self._acting} made {op} {target} "
                                         f"in its source {source}")

    def _fault(self, fault: Fault) -> None:
        if fault.kind == "kill":
            actor = next(a for a in self.scheduler.actors if a.name == fault.actor)
            for session in actor.resources:
                session.close()  # the kernel releases a dead process's lock
            if not fault.keep:
                shutil.rmtree(os.path.join(self.base, actor.name), ignore_errors=True)
                for _, wd, _ in self.work_dirs.get(actor.name, []):  # on another host's disk too
                    shutil.rmtree(wd, ignore_errors=True)
            self.killed.append((actor, fault.keep))
        elif fault.kind in ("lose", "damage"):
            refs = sorted(b for b in self.world.blobs if not b.startswith("checkpoints/") and "/" in b)
            if refs:
                target = refs[self._targets.randrange(len(refs))]
                (self.world.lose if fault.kind == "lose" else self.world.damage)(target)

SIM_URL = "sim://repo"


def _log_url(name: str) -> str:
    return f"sim-log://{name}"


