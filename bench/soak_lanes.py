"""The soak's other writers (issue 27): a delta writer and the owner of a partitioned store, beside the snapshot
writers of ``bench.soak``, on the same repository, clock and gc host.

- **deltas** (``soak/0/deltas``): a streaming query's delta records, one per micro-batch (batch ``b`` puts
  ``b<b> = v<b>``), by ``tests/support/commit_child.py`` (``DeltaCommitter``);
- **group** (``soak/group/routes``, 2 partitions): one micro-batch per process as Spark runs it, by
  ``tests/support/partition_children.py``: every partition's task runs the real ``run_partition`` on its executor
  disk (kept between batches; it keeps the changelog it staged), then the driver commits one group record of their
  parts, holding none of their bytes (partition ``p`` of batch ``b`` puts ``p<p>-b<b> = v<b>``).

Each run resumes where the log says (the batch after the latest committed one, as Spark's offsets would), and is
clean, SIGKILLed after a journal event of its commit, or SIGSTOPped after one while the clock jumps up to two TTLs
with gc runs in between (a late commit: the delta heals its changelog from its kept copy, the group's executors
put theirs back at the next batch, ``blobstate.commit.parts``), then resumed or killed. A check recovers each
lane's work directory (a run with no batch), then: the latest batch in the log is at least every batch a run
reported committed (nothing lost), ``verify --all`` passes, and a restore of the latest state (every partition)
gives exactly the state of that batch.
"""

from __future__ import annotations

import json
import random
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.soak_world import SUPPORT, World, read_all
from blobstate.errors import NothingToRestore
from blobstate.model.chain import partition_history, partitions_of, plan_chain
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

DELTAS = StoreKey("soak", "0", "deltas")
GROUP = StoreKey("soak", "group", "routes")
PARTITIONS = 2
EVENTS = ("CommitStarted", "UploadsPlanned", "CheckpointAppending", "CheckpointWritten", "TtlRemoved",
          "CommitCompleted")
HEAL_WORDS = ("putting it back", "committing the deltas of their batches again")
#: runs a child script with blobstate's plugins (the soak's clock, pause, kill) loaded before anything reads time
LAUNCH = ("import sys, runpy; from blobstate.plugin.manager import get_plugin_manager; get_plugin_manager(); "
          "script = sys.argv[1]; sys.argv = sys.argv[1:]; runpy.run_path(script, run_name='__main__')")


@dataclass
class Lane:
    """One writer of one store key: ``kind`` ``deltas`` or ``group``; ``known``: the newest batch a run reported
    committed (or the log showed)."""

    world: World
    kind: str
    key: StoreKey
    known: int = -1
    failures: dict[str, str] = field(default_factory=dict)

    @property
    def host(self) -> Path:
        return self.world.root / f"lane-{self.kind}"

    def latest_batch(self, repo: Repository) -> int:
        """The batch the latest state in the log is at (a group: its partitions' lowest); -1 for none."""
        history = repo.log.history(self.key)
        runs = [partition_history(history, p) for p in partitions_of(history)] if self.kind == "group" else [history]
        ups = []
        for records in runs:
            try:
                chain = plan_chain(records)
            except NothingToRestore:
                return -1
            ups.append(chain.upto if chain.upto is not None else -1)
        return min(ups, default=-1)

    def run(self, repo: Repository, ttl_ms: int, rng: random.Random, fault: str = "", *, batches: int = 1):
        """Start the next ``batches`` micro-batches (0: recovery only) with ``fault``; returns the ``Proc``."""
        first = self.latest_batch(repo) + 1
        config = {"url": self.world.target.url, "options": self.world.target.options, "job": self.key.job,
                  "task": self.key.task, "store": self.key.store, "ttl_ms": ttl_ms, "retain": 2,
                  "work_dir": str(self.host / "driver")}
        if self.kind == "deltas":
            script = SUPPORT / "commit_child.py"
            config.update(mode="deltas", batches=list(range(first, first + batches)))
        else:
            script = SUPPORT / "partition_children.py"
            config.update(partitions=PARTITIONS, batch=first if batches else -1, local_dir=str(self.host / "exec"))
        proc = self.world.spawn(f"lane-{self.kind}", f"lane-{self.kind}", self.host / "driver",
                                [str(script), json.dumps(config)], fault=fault, ttl_ms=ttl_ms,
                                program=["-c", LAUNCH])
        proc.attempt = first + batches - 1 if batches else None
        return proc

    def account(self, proc, stats: Counter) -> None:  # noqa: ANN001 - a bench.soak_world.Proc
        """What a finished run tells: its batches committed (exit 0), a heal, a kill."""
        err = proc.err()
        if proc.returncode == 0 and proc.attempt is not None:
            self.known = max(self.known, proc.attempt)
            stats[f"lane {self.kind} commits"] += 1
        elif proc.returncode == -9:
            stats[f"lane {self.kind} killed"] += 1
        elif proc.returncode != 0 and "TTL" not in err and "fenced" not in err:
            self.failures[proc.folder.name] = f"exit {proc.returncode}: {err[-1200:]}"
        if any(word in err for word in HEAL_WORDS):
            stats[f"lane {self.kind} heals"] += 1

    def check(self, repo: Repository, tag: str) -> None:
        """Nothing lost, ``verify --all`` passes, every partition's latest state restores exactly."""
        latest = self.latest_batch(repo)
        self.known = max(self.known, latest)
        if latest < self.known:
            self.failures[f"{tag}-lost"] = f"the log's latest batch {latest} < {self.known}, reported committed"
        if latest < 0:
            return
        verified = self.world.spawn("verify", "check", self.world.root / "check-host",
                                    ["verify", *self.world.target.args(self.key), "--all", "--json"])
        if verified.finish() != 0:
            self.failures[f"{tag}-verify"] = verified.err()[-1200:]
        for p in range(PARTITIONS) if self.kind == "group" else [None]:
            dest = self.world.root / "restores" / f"{tag}-{self.kind}-{p}" / self.key.store
            args = ["restore", str(dest), *self.world.target.args(self.key), "--no-cleanup", "-q"]
            proc = self.world.spawn("restore", "restore", self.world.root / "restore-host",
                                    args + ([] if p is None else ["--partition", str(p)]))
            if proc.finish() != 0:
                self.failures[f"{tag}-restore-{p}"] = proc.err()[-1200:]
                continue
            got = {str(k): str(v) for k, v in read_all(dest).items()}
            if got != self.expected(latest, p):
                self.failures[f"{tag}-state-{p}"] = f"batch {latest}: {sorted(got.items())[-3:]}"
            shutil.rmtree(dest.parent, ignore_errors=True)

    def expected(self, batch: int, partition: int | None) -> dict[str, str]:
        if partition is None:
            return {f"b{b}": f"v{b}" for b in range(batch + 1)}
        return {f"p{partition}-b{b}": f"v{b}" for b in range(batch + 1)}


def lanes(world: World) -> list[Lane]:
    return [Lane(world, "deltas", DELTAS), Lane(world, "group", GROUP)]


def step(soak, lane: Lane) -> None:  # noqa: ANN001 - a bench.soak.Soak
    """One run of ``lane`` in the soak's traffic: clean (60%), SIGKILLed after a journal event (20%), or SIGSTOPped
    after one while the clock jumps 0-2 TTLs with gc runs, then resumed (80%) or killed (20%)."""
    rng, ttl = soak.rng, soak.rng.choice([soak.ttl // 2, soak.ttl, 2 * soak.ttl])
    r = rng.random()
    fault = "" if r < 0.6 else f"{'kill' if r < 0.8 else 'pause'}:{rng.choice(EVENTS)}"
    proc = lane.run(soak.repo, ttl, rng, fault, batches=rng.randint(1, 3) if lane.kind == "deltas" else 1)
    soak.stats[f"lane {lane.kind} runs"] += 1
    if fault.startswith("pause") and proc.wait_stopped(soak.world.clock):
        soak.stats["lane pauses"] += 1
        total, steps = rng.uniform(0, 2 * ttl), rng.randint(1, 2)
        for _ in range(steps):
            soak.jump(total / steps)
            soak.finish(soak.gc())
        if rng.random() < 0.2:
            proc.fault += ",killed"
            proc.kill()
        else:
            proc.resume(soak.world.clock)
    proc.finish()
    lane.account(proc, soak.stats)


def check(soak, tag: str) -> None:  # noqa: ANN001 - a bench.soak.Soak
    """Every lane's work directory recovered, then its invariants (``Lane.check``)."""
    for lane in soak.lanes:
        proc = lane.run(soak.repo, soak.ttl, soak.rng, batches=0)
        proc.finish()
        lane.account(proc, soak.stats)
        lane.check(soak.repo, tag)


def orphans(soak) -> dict[str, list[str]]:  # noqa: ANN001 - a bench.soak.Soak
    """After the final gc: every lane's objects are exactly its records' references, none with a TTL left."""
    from blobstate.maintenance.gc import FAR_FUTURE_MS

    out: dict[str, list[str]] = {}
    for lane in soak.lanes:
        history = soak.repo.log.history(lane.key)
        referenced = soak.repo.retained_references(history, history=history)
        objects = {i.blob_id for i in soak.repo.store.list(lane.key.prefix)}
        leases = soak.repo.store.expired(lane.key.prefix, FAR_FUTURE_MS)
        found = sorted(objects - referenced) + sorted(leases)
        if found:
            out[lane.kind] = found[:20]
    return out
