"""The never-lose soak of issue 12: two writers, one gc host, random SIGKILL/SIGSTOP points and clock jumps.

``python -m bench.soak --points 1000 --seed N --hours H [--s3] [--retain 2] [--check-every 25] [--no-held-gc]
[--work DIR] [--out FILE]``

Two writer hosts (own RocksDB written by ``fixtures_core.write_keys``, own work directory) back up under one store
key (racing commits fence each other: exit 4, expected); a gc host (its own work directory) runs ``gc --now`` on
the simulated clock (``bench.soak_world.SimClock``: real time plus an offset that only grows) with a ``--ttl``
drawn anew each run, sometimes two at once. A seeded schedule of ``--points`` fault points, each one of:

- **kill**: a backup SIGKILLed after a random journal event (``kill_plugin``), sometimes racing the other writer's
  backup and a gc run;
- **pause**: a backup SIGSTOPped after a random journal event (``pause_plugin``); while it sleeps the clock jumps
  0 to 2 of its TTLs in 1-3 steps, with gc runs, the other writer's backups (clean, killed or paused too) and
  recover runs in between, and sometimes a gc stopped after its decision or after its re-check (``soak_plugin``)
  held until the writer finished; then the writer is resumed with its clock moved by the jump (or SIGKILLed);
- **jump**: the clock jumps 0 to 2 base TTLs with nothing running, then gc;

and between points clean backups (one writer or both racing, sometimes with gc), recover runs (some SIGKILLed after
a random event) and restores (with their init cleanup, into a fresh directory or over the previous restore).
Beside them, a delta writer and the owner of a partitioned store (``bench.soak_lanes``: real processes committing
delta and group records, clean, SIGKILLed or SIGSTOPped across clock jumps with gc runs) share the repository.
The TTL scale is chosen so that the jumps add up to about ``--hours`` of simulated time.

Every ``--check-every`` points and at the end, both writers are recovered and the invariants are checked
(``bench.soak_ledger``): no known commit lost, every checkpoint in the log verified and restored to exactly the
data its commit held, and each lane's latest state (every partition) restores exactly. At the end, a gc far in the
future, then no orphan, no lease, no temporary (lanes included); every checkpoint restores again; each writer's
next backup succeeds. The report (stdout and ``--out``) has the figures; the exit
code is 1 when an invariant failed.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import soak_lanes
from bench.soak_report import build_report, failed
from bench.soak_world import GC_HOLD_S, KEY, Attempt, Proc, World, Writer
from blobstate.repository.repo import Repository

KILL_EVENTS = {"CommitStarted": 1, "LocalCheckpointCreated": 1, "UploadsPlanned": 1, "BlobUploaded": 3,
               "IndexUploaded": 2, "CheckpointAppending": 3, "CheckpointWritten": 3, "TtlRemoved": 2,
               "BlobsDeleted": 1, "LocalCheckpointsPruned": 1, "CommitCompleted": 1, "CommitAborted": 1}
PAUSE_EVENTS = {"LocalCheckpointCreated": 1, "UploadsPlanned": 1, "BlobUploaded": 2, "IndexUploaded": 3,
                "CheckpointAppending": 4, "CheckpointWritten": 2, "TtlRemoved": 1, "CommitCompleted": 1}
RECOVER_EVENTS = {"CheckpointWritten": 1, "TtlRemoved": 1, "BlobsDeleted": 2, "LocalCheckpointsPruned": 1,
                  "CommitCompleted": 1, "CommitAborted": 1}
HEAL_WORDS = ("missing from the store", "missing blobs; re-uploading", "was lost; putting it back")
MEAN_JUMP_PER_POINT = 0.675  # base TTLs per point the schedule's jumps add up to, on average (see ``ttl_base``)


@dataclass
class Config:
    points: int
    seed: int
    hours: float
    retain: int = 2
    check_every: int = 25
    s3: bool = False
    held_gc: bool = True  # the "gc stopped between its decision and its deletes" fault (test_gc_decided_race.py)
    lane_rate: float = 0.4  # chance of a delta or group run after each point (``bench.soak_lanes``)


def ttl_base(points: int, hours: float) -> int:
    """The base TTL (ms) that makes ``points`` points' clock jumps add up to about ``hours``: pauses (45%) jump
    U(0, 2 TTL) with a writer TTL of 1/2, 1 or 2 base TTLs, jumps (15%) U(0, 2 base TTLs): 0.675 base TTLs a
    point. Never below a minute, so a commit's real duration stays far inside half its TTL."""
    return max(60_000, int(hours * 3_600_000 / (MEAN_JUMP_PER_POINT * max(1, points))))


class Soak:
    def __init__(self, cfg: Config, world: World) -> None:
        from bench.soak_ledger import Ledger

        self.cfg = cfg
        self.world = world
        self.rng = random.Random(cfg.seed)
        self.ttl = ttl_base(cfg.points, cfg.hours)
        self.writers = {name: Writer(world, name, cfg.seed * 10 + i) for i, name in enumerate("AB")}
        self.busy: set[str] = set()  # writers with a process alive (stopped ones included)
        self.ledger = Ledger()
        self.stats: Counter[str] = Counter()
        self.gc_skips: Counter[str] = Counter()
        self.unexpected: list[str] = []
        self.restore_failures: list[str] = []
        self.lists: list[dict[str, int]] = []
        self.jumped_ms = 0
        self.before_gc: dict[str, list[str]] = {}
        self.repo = Repository.open(world.target.url, storage_options=world.target.options)
        self.lanes = soak_lanes.lanes(world)  # a delta writer and a group owner beside the snapshot writers
        self.lane_orphans: dict[str, list[str]] = {}

    # -- processes -------------------------------------------------------------------------------------------
    def backup(self, writer: Writer, fault: str = "") -> Proc:
        data, keys = writer.mutate(self.rng)
        number = len(self.ledger.attempts) + 1
        self.ledger.attempts[number] = Attempt(number, writer.name, data, keys, fault)
        self.busy.add(writer.name)
        self.stats["backups"] += 1
        return writer.backup(self.ledger.attempts[number], ttl_ms=self.rng.choice([self.ttl // 2, self.ttl,
                                                                                   2 * self.ttl]),
                             retain=self.cfg.retain)

    def gc(self, fault: str = "") -> Proc:
        self.stats["gc runs"] += 1
        return self.world.gc(self.rng.choice([self.ttl // 4, self.ttl // 2, self.ttl, 2 * self.ttl]), fault=fault)

    def recover(self, writer: Writer, fault: str = "") -> Proc:
        self.busy.add(writer.name)
        self.stats["recover runs"] += 1
        return writer.recover(fault=fault)

    def finish(self, *procs: Proc | None) -> None:
        for proc in procs:
            if proc is None:
                continue
            try:
                proc.finish()
            except TimeoutError as exc:
                self.unexpected.append(f"wedge: {exc}")
            self.busy.discard(proc.host)
            self.account(proc)
        self.ledger.observe(self.repo.log.history(KEY))

    def account(self, proc: Proc) -> None:
        self.ledger.record(proc)
        code, err, how = proc.returncode, proc.err(), proc.fault.partition(":")[0]
        if any(word in err for word in HEAL_WORDS):
            self.stats["writer heals"] += 1
        killed = code == -9 and (how == "kill" or "killed" in proc.fault)
        if proc.kind == "backup":
            if code == 0:
                self.stats["exit 0"] += 1
                self.lists.append(proc.lists())
            elif code == 4:
                self.stats["fenced"] += 1
            elif code == 1 and "raise --ttl" in err and how == "pause":
                self.stats["aborted: TTL budget"] += 1
            elif not killed:
                self.unexpected.append(f"{proc.folder.name} ({proc.fault or 'no fault'}): exit {code}: {err[-1500:]}")
        elif code != 0 and not killed:
            self.unexpected.append(f"{proc.folder.name} ({proc.fault or 'no fault'}): exit {code}: {err[-1500:]}")
        if killed:
            self.stats[f"{proc.kind} killed"] += 1
        if proc.kind == "gc" and code == 0:
            for report in proc.json() or []:
                for name in ("expiredDeleted", "expiredHealed", "orphansDeleted", "checkpointsPruned",
                             "temporariesDeleted"):
                    self.stats[f"gc {name}"] += len(report.get(name) or [])
                if report.get("skipped"):
                    self.gc_skips[report["skipped"][:90]] += 1

    def pick(self, weights: dict[str, int], nth_max: int = 3) -> str:
        event = self.rng.choices(list(weights), list(weights.values()))[0]
        return f"{event}:{self.rng.randint(1, nth_max)}" if event == "BlobUploaded" else event

    def pair(self) -> tuple[Writer, Writer]:
        a, b = self.rng.sample(list(self.writers.values()), 2)
        return a, b

    def jump(self, ms: float) -> None:
        self.world.clock.jump(int(ms))
        self.jumped_ms += int(ms)
        self.stats["clock jumps"] += 1

    # -- fault points ----------------------------------------------------------------------------------------
    def kill_point(self) -> None:
        writer, other = self.pair()
        procs = [self.backup(writer, f"kill:{self.pick(KILL_EVENTS)}")]
        if self.rng.random() < 0.3:
            procs.append(self.backup(other))
        if self.rng.random() < 0.3:
            procs.append(self.gc())
        self.finish(*procs)
        self.stats["kills"] += procs[0].returncode == -9
        self.stats["kill points not reached"] += procs[0].returncode != -9

    def pause_point(self) -> None:
        writer, other = self.pair()
        paused = self.backup(writer, f"pause:{self.pick(PAUSE_EVENTS)}")
        if not paused.wait_stopped(self.world.clock):
            self.stats["pause points not reached"] += 1
            self.finish(paused)
            return
        self.stats["pauses"] += 1
        also: Proc | None = None  # the other writer, paused too
        total = self.rng.uniform(0, 2 * paused.ttl_ms)
        steps = self.rng.randint(1, 3)
        for _ in range(steps):
            self.jump(total / steps)
            also = self.during_pause(other, also)
        held = None
        held_since = 0.0
        if self.cfg.held_gc and self.rng.random() < 0.3:  # a gc stopped after its decision, or after its re-check
            reads = self.rng.choice([1, 2])
            held = self.gc(f"gc-stop:{reads}")
            if held.wait_stopped(self.world.clock):
                held_since = time.monotonic()
                self.stats["gc stopped before deleting"] += 1
                self.stats["gc stopped after deciding" if reads == 1 else "gc stopped after re-checking"] += 1
            else:
                self.finish(held)
                held = None
        for proc in (paused, also):
            if proc is None:
                continue
            if self.rng.random() < 0.2:
                proc.fault += ",killed"
                proc.kill()
            else:
                proc.resume(self.world.clock)
        racing = self.gc() if held is None and self.rng.random() < 0.3 else None
        self.finish(paused, also, racing)
        if held is not None:
            while time.monotonic() < held_since + GC_HOLD_S:  # a pause longer than the (scaled) re-check bound
                time.sleep(0.05)
            held.resume(self.world.clock)
            self.finish(held)

    def during_pause(self, other: Writer, also: Proc | None) -> Proc | None:
        """One step of a pause: gc runs, or the other writer's backup (clean, killed, or paused until the end)."""
        r = self.rng.random()
        if r < 0.5 or also is not None:
            self.finish(*[self.gc() for _ in range(1 + (self.rng.random() < 0.3))])
            return also
        if r < 0.7:
            self.finish(self.backup(other), self.gc() if self.rng.random() < 0.5 else None)
        elif r < 0.8:
            self.finish(self.backup(other, f"kill:{self.pick(KILL_EVENTS)}"))
        elif r < 0.9:
            proc = self.backup(other, f"pause:{self.pick(PAUSE_EVENTS)}")
            if proc.wait_stopped(self.world.clock):
                self.stats["pauses"] += 1
                self.finish(self.gc())
                return proc
            self.stats["pause points not reached"] += 1
            self.finish(proc)
        else:
            self.finish(self.recover(other))
        return None

    def jump_point(self) -> None:
        self.jump(self.rng.uniform(0, 2 * self.ttl))
        self.finish(*[self.gc() for _ in range(1 + (self.rng.random() < 0.3))])

    def between(self) -> None:
        """Ordinary traffic between fault points: clean backups, recover runs, restores."""
        if self.rng.random() < 0.5:
            writer, other = self.pair()
            both = self.rng.random() < 0.3
            self.finish(self.backup(writer), self.backup(other) if both else None,
                        self.gc() if self.rng.random() < 0.2 else None)
        if self.rng.random() < 0.1:
            writer = self.rng.choice(list(self.writers.values()))
            fault = f"kill:{self.pick(RECOVER_EVENTS)}" if self.rng.random() < 0.3 else ""
            self.finish(self.recover(writer, fault))
        if self.rng.random() < 0.08:
            self.restore_op()
        if self.rng.random() < self.cfg.lane_rate:
            soak_lanes.step(self, self.rng.choice(self.lanes))

    def restore_op(self) -> None:
        from bench.soak_ledger import restore_matches

        history = self.repo.log.history(KEY)
        if not history:
            return
        cp = history[-1] if self.rng.random() < 0.7 else self.rng.choice(history)
        attempt = self.ledger.attempts.get(cp.batch_id or 0)
        self.stats["restores"] += 1
        dest = self.world.root / "restore-dest" / KEY.store if self.rng.random() < 0.5 else None
        expected = attempt.digest if attempt else ""
        why = restore_matches(self.world, cp.checkpoint_id, expected, f"op-{cp.generation}", cleanup=True, dest=dest)
        if not why:
            return
        # A commit that landed late may be healed only by its writer's recovery: recover both, then try again.
        self.restore_failures.append(f"{cp.checkpoint_id} (generation {cp.generation}): {why}")
        self.finish(*[self.recover(w) for w in self.writers.values()])
        if any(c.checkpoint_id == cp.checkpoint_id for c in self.repo.log.history(KEY)):
            again = restore_matches(self.world, cp.checkpoint_id, expected, f"op-{cp.generation}-again")
            if again:
                self.ledger.unrestorable.setdefault(cp.checkpoint_id, f"restore after recovery: {again}")

    # -- checks ----------------------------------------------------------------------------------------------
    def check(self, tag: str) -> None:
        """Both writers recovered, then: nothing lost, every checkpoint in the log restores to its data."""
        self.finish(*[self.recover(w) for w in self.writers.values()])
        history = self.repo.log.history(KEY)
        self.ledger.check_log(history, self.cfg.retain)
        self.ledger.check_restorable(self.world, history, tag)
        soak_lanes.check(self, tag)
        self.stats["checks"] += 1

    def check_present(self, point: int) -> None:
        """After a point (nothing running): every object each checkpoint in the log references is in the store;
        when one is not, both writers recover (a late commit is healed by its writer) and it must be then."""
        missing = self.ledger.missing(self.repo, self.repo.log.history(KEY))
        if not missing:
            return
        self.stats["points leaving objects missing"] += 1
        self.finish(*[self.recover(w) for w in self.writers.values()])
        for checkpoint_id, ids in self.ledger.missing(self.repo, self.repo.log.history(KEY)).items():
            self.ledger.unrestorable.setdefault(checkpoint_id, f"after point {point} and recovery, {len(ids)} "
                                                               f"referenced objects missing: {ids[:3]}")

    def run(self) -> None:
        kinds = ["kill", "pause", "jump"]
        for point in range(1, self.cfg.points + 1):
            kind = self.rng.choices(kinds, [40, 45, 15])[0]
            try:
                getattr(self, f"{kind}_point")()
                self.between()
            except TimeoutError as exc:  # a process that neither ended nor paused: a wedge, reported
                self.unexpected.append(f"wedge at point {point}: {exc}")
                self.world.stop_all()
                self.busy.clear()
            self.stats[f"{kind} points"] += 1
            self.check_present(point)
            if point % self.cfg.check_every == 0 and point < self.cfg.points:
                self.check(f"check-{point}")
        self.check("final")
        self.final()

    def final(self) -> None:
        """A gc far in the future, then no orphan; everything restores again; each writer's next backup works."""
        self.before_gc = self.ledger.scan(self.world, self.repo.log.history(KEY))
        far = self.world.clock.now_ms() + 30 * 24 * 3_600_000
        gc = self.world.spawn("gc", "gc", self.world.root / "gc-host",
                              ["gc", "--repo", self.world.target.url, "--ttl", str(self.ttl), "--json", "--now",
                               str(far)])
        self.finish(gc)
        history = self.repo.log.history(KEY)
        self.ledger.check_orphans(self.world, history)
        self.ledger.check_restorable(self.world, history, "after-final-gc")
        self.lane_orphans = soak_lanes.orphans(self)
        soak_lanes.check(self, "after-final-gc")
        for writer in self.writers.values():
            self.finish(self.backup(writer))
        self.ledger.check_log(self.repo.log.history(KEY), self.cfg.retain)


def run_soak(cfg: Config, work: Path) -> dict[str, Any]:
    """Run the soak in ``work`` (file:// repository there, or a moto S3 server it starts) and return the report."""
    from fault_harness import Target  # type: ignore[import-not-found]

    server = None
    if cfg.s3:
        from bench.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server, client_env

        server = S3Server(str(work / "moto.log"))
        server.fs().mkdir("soak")
        options = {"endpoint_url": server.endpoint, "key": ACCESS_KEY, "secret": SECRET_KEY}
        target = Target("s3://soak/repo", {**options, "skip_instance_cache": True},
                        {**client_env(), "BLOBSTATE_STORAGE_OPTIONS": json.dumps(options),
                         "AWS_DEFAULT_REGION": REGION})
    else:
        target = Target(f"file://{work}/repo")
    world = World(work, target)
    soak = None
    started = time.monotonic()
    try:
        soak = Soak(cfg, world)
        soak.run()
        return build_report(soak, time.monotonic() - started)
    finally:
        world.stop_all()
        if soak is not None:
            soak.repo.close()
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1000, help="fault points (kills, pauses, clock jumps)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours the clock jumps add up to")
    parser.add_argument("--retain", type=int, default=2, help="checkpoints each writer keeps")
    parser.add_argument("--check-every", type=int, default=25, help="points between invariant checks")
    parser.add_argument("--s3", action="store_true", help="a moto S3 repository instead of file://")
    parser.add_argument("--no-held-gc", action="store_true",
                        help="leave out the fault 'gc stopped between its decision and its deletes'")
    parser.add_argument("--work", type=Path, default=None, help="working directory (default: a new temp dir)")
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here too")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="blobstate-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    cfg = Config(args.points, args.seed, args.hours, args.retain, args.check_every, args.s3, not args.no_held_gc)
    report = run_soak(cfg, work)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    print(f"soak work directory: {work}", file=sys.stderr)
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
