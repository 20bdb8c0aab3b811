"""Scenarios drawn from a seed: which stores, which actors (and when, with which clock skew), which faults.

Profiles:

- ``safe``: what today's protocol is meant to survive and does: a snapshot store with two writers (one may be a
  zombie: paused past its TTL, then resumed), a delta store with one writer, a partitioned store with its group
  owner (retried and speculative part attempts), a delta store whose query is followed by a new run on the same
  key (a reset of the engine's checkpoint, or a second query), gc runs, restores, recovery; kills with the work
  directory kept or lost, short pauses of the delta and group writers, unknown append outcomes, a lost or damaged
  object, clock skew below TTL/4.
- ``full``: the same with a second writer on the delta store and long pauses (zombies) for every writer, where
  issue 27's cases 1 and 2 live.
- ``two-logs``: ``full`` plus a writer of the snapshot store opened with a second checkpoint log on the same blob
  store (issue 27's case 3): it opens through the repository marker like every actor and must be refused.
- ``unpinned``: ``full`` with the delta store's second writer taking its expected generation at its first append
  instead of when it opens (today's driver binding: issue 27's case 10).
- ``rescale``: ``full`` plus an offline rescale of the partitioned store into a new store key of 1 to 3
  partitions (``blobstate.testing.simulation.rescaler``), run twice (the second run on the first one's host, or on
  another), interleaved with everything else; either run may be killed (work directory kept or lost) or paused
  past its TTL (a zombie). The run's end reruns the command once more (``runner.Simulation._rescale_again``).
- ``encrypted``: ``full`` on an encrypted repository (issue 33): every object compressed and encrypted by the
  repository's codec, every record sealed; a damaged object fails authentication.
- ``doors``: ``full`` plus the doors' actors (issue 39, ``blobstate.testing.simulation.doors_scenario``): a
  ``write_state`` and a rescale racing running queries that then restart on what they wrote, two adopters of one
  initial state, a reader beside a query whose sink fails and whose batch Spark re-runs with other data.
- ``keys``: ``full`` plus the marker's rewriters (issue 39, ``blobstate.testing.simulation.keys``): one to three key
  rotations (two of them racing) and commands recording the log in a marker from before the field, killed and
  paused, before the other actors start.
- ``heal``: ``full`` plus issue 39's heal actors (``blobstate.testing.simulation.heal_actors``): three copies of the
  snapshot store into a second repository (one early, one killed at a protocol step, one rerun from another host
  after its TTL) beside that repository's gc; the executors' hosts of the partitioned store losing their disks while
  its owner may be paused past its TTL before an append; a host writing a store of its own whose latest index is
  lost between two of its processes.
- ``regroup``: ``full`` plus a key-grouped partitioned store restarted with another number of partitions (issue 42,
  ``blobstate.testing.simulation.regrouper``): its owner, then one or two rescales at restart (planned with
  ``plan_regroup``, each new partition built from the old partitions' chains cut to its key-group range), killed or
  paused past the TTL beside the writers, gc and zombies; every key's value must be the fold's, once.
- ``standby``: ``full`` plus a partitioned store with warm standby copies of its partitions and the hand-over of
  its primary (issue 42, ``blobstate.testing.simulation.standby``): a standby per partition applying the committed
  changelogs and lagging, the primary killed, decommissioned or paused past the TTL (a zombie), a promoter (and
  sometimes a second hand-over from its host) starting from those copies, deciding with
  ``first_batch_to_apply`` whether to catch up or restore, then committing more batches; every promoted copy must
  be the fold of the committed batches, each applied once.
- ``all``: ``full`` with the actors of ``rescale``, ``doors``, ``keys``, ``heal``, ``regroup`` and ``standby``
  together in one scenario (issue 39: a million steps with every actor).
- ``processor``: ``full`` plus two stateful processors (issue 41, ``blobstate.testing.simulation.processor``): a
  dedup with a TTL and sessions closed by event-time timers, each a query and a later restart of it on the same
  store, killed or paused past the TTL; their committed state must be the reference fold's.

Every writer of the other profiles pins the generation it opened on (``StoreCommitter(expected_generation=)``,
as the partitioned driver does and as issue 27 asks of every writer).
"""

from __future__ import annotations

import random

from blobstate.model.records import StoreKey
from blobstate.testing.simulation import model
from blobstate.testing.simulation.invariants import StoreInfo
from blobstate.testing.simulation.runner import ActorSpec, Scenario
from blobstate.testing.simulation.scheduler import Fault

TTL_MS = 60_000
PROFILES = ("safe", "full", "two-logs", "unpinned", "rescale", "encrypted", "doors", "keys", "heal", "all", "processor",
            "regroup", "standby")
#: the profiles whose actors ``all`` runs together in one scenario
COMBINED = ("rescale", "doors", "keys", "heal", "regroup", "standby")


def _has(profile: str, part: str) -> bool:
    """Whether ``profile`` runs the actors of profile ``part`` (itself, or ``all``)."""
    return profile == part or (profile == "all" and part in COMBINED)

SNAP = StoreKey("sim", "0", "snap")
CHG = StoreKey("sim", "0", "chg")
GRP = StoreKey("sim", "group", "grp")
RST = StoreKey("sim", "0", "rst")
RESCALED = StoreKey("sim", "group", "grp-rescaled")
IDX = StoreKey("sim", "0", "idx")


def scenario(seed: int, profile: str = "full") -> Scenario:
    """The scenario of ``seed`` in ``profile`` (see the module docstring); the same seed, the same scenario."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: one of {', '.join(PROFILES)}")
    rng = random.Random(f"scenario/{profile}/{seed}")
    ttl = TTL_MS

    def skew() -> int:
        return rng.randint(-ttl // 5, ttl // 5)  # below TTL/4

    def later() -> int:
        return rng.randint(0, ttl)

    def every() -> int:
        return rng.randint(ttl // 60, ttl // 6)  # the trigger interval of a streaming query

    stores = {SNAP: StoreInfo("snap", 2), CHG: StoreInfo("chg", 2), GRP: StoreInfo("grp", 2, partitions=2),
              RST: StoreInfo("rst", 2)}
    specs = [
        ActorSpec("w1", "writer", 0, skew(), dict(key=SNAP, name="snap", retain=2, batches=rng.randint(3, 6),
                                                   deltas=False, interval_ms=every())),
        ActorSpec("w2", "writer", later(), skew(), dict(key=SNAP, name="snap", retain=rng.choice([2, 3]),
                                                         batches=rng.randint(2, 5), deltas=False, interval_ms=every())),
        ActorSpec("c1", "writer", 0, skew(), dict(key=CHG, name="chg", retain=2, batches=rng.randint(4, 9),
                                                   deltas=True, snapshot_every=3, interval_ms=every())),
        ActorSpec("g1", "group_owner", 0, skew(), dict(key=GRP, name="grp", partitions=2, retain=2,
                                                        batches=rng.randint(3, 7), snapshot_every=3,
                                                        interval_ms=every())),
    ]
    # a query on store rst, then a new run on the same key: its engine's checkpoint reset (the same query id, a new
    # lineage), or a second query (another query id); the pinned view fences whichever appends second
    specs.append(ActorSpec("q1", "writer", 0, skew(), dict(key=RST, name="rst", retain=2, batches=rng.randint(3, 7),
                                                         deltas=True, snapshot_every=3, interval_ms=every())))
    specs.append(ActorSpec("q2", "writer", later(), skew(),
                           dict(key=RST, name="rst", retain=2, batches=rng.randint(2, 6), deltas=True,
                                snapshot_every=3, interval_ms=every(), run=f"reset-{seed}",
                                query=rng.choice(["rst", "rst-second-query"]))))
    if profile != "safe":
        specs.append(ActorSpec("c2", "writer", later(), skew(),
                               dict(key=CHG, name="chg", retain=rng.choice([2, 3]), batches=rng.randint(4, 9),
                                    deltas=True, snapshot_every=3, interval_ms=every(),
                                    pin=profile != "unpinned")))
    if profile == "two-logs":
        specs.append(ActorSpec("x1", "writer", later(), skew(),
                               dict(key=SNAP, name="snap", retain=2, batches=rng.randint(2, 4), deltas=False,
                                    log="log2", interval_ms=every())))
    if _has(profile, "rescale"):
        m = rng.randint(1, 3)
        stores[RESCALED] = StoreInfo(model.rescaled("grp", 2, m), 2, partitions=m)
        command = dict(source=GRP, target=RESCALED, partitions=m, retain=2)
        specs.append(ActorSpec("rs1", "rescaler", rng.randint(ttl // 4, 2 * ttl), skew(), dict(command, host="rs1")))
        specs.append(ActorSpec("rs2", "rescaler", rng.randint(ttl // 2, 4 * ttl), skew(),
                               dict(command, host=rng.choice(["rs1", "rs2"]))))
        specs.append(ActorSpec("gcr", "gc", rng.randint(ttl, 4 * ttl), skew(),  # gc while a rescale waits or lands
                               dict(runs=rng.randint(2, 4), gap_ms=rng.randint(ttl // 4, ttl))))
    for i in range(rng.randint(2, 3)):
        specs.append(ActorSpec(f"gc{i + 1}", "gc", later(), skew(), dict(runs=rng.randint(1, 3),
                                                                        gap_ms=rng.randint(ttl // 4, 2 * ttl))))
    specs.append(ActorSpec("r1", "restorer", later(), skew(), dict(cleanup=rng.random() < 0.5)))
    specs.append(ActorSpec("rec", "recoverer", rng.randint(ttl // 2, 3 * ttl), skew(), {}))
    writers = [s.name for s in specs if s.program in ("writer", "group_owner", "rescaler")]
    faults: list[Fault] = []
    for _ in range(rng.randint(1, 4)):
        who = rng.choice(writers)
        long_ok = profile != "safe" or who.startswith("w")
        ms = rng.randint(ttl, 3 * ttl) if long_ok and rng.random() < 0.6 else rng.randint(10, ttl // 4 - 1)
        at, label = _where(rng)
        faults.append(Fault("pause", who, at, ms=ms, label=label))
    if rng.random() < 0.5:  # safe: not the group owner (its recovery after the TTL is issue 27's case 11)
        at, label = _where(rng)
        killable = [w for w in writers if profile != "safe" or w != "g1"]
        faults.append(Fault("kill", rng.choice(killable), at, keep=rng.random() < 0.6, label=label))
    for _ in range(rng.choice([0, 0, 1, 2])):
        faults.append(Fault("unknown", "", rng.randint(0, 20), keep=rng.random() < 0.7))
    if rng.random() < 0.15:
        faults.append(Fault(rng.choice(["lose", "damage"]), "", rng.randint(50, 800)))
    if _has(profile, "rescale"):  # a rescale killed, or paused past its TTL, in most scenarios
        for who in ("rs1", "rs2"):  # a rescale is one commit: its k-th point, or the first of a protocol step
            at, label = (rng.randint(1, 60), "") if rng.random() < 0.5 else (1, rng.choice(STEPS))
            if rng.random() < 0.5:
                faults.append(Fault("kill", who, at, keep=rng.random() < 0.6, label=label))
            elif rng.random() < 0.5:
                faults.append(Fault("pause", who, at, ms=rng.randint(ttl, 3 * ttl), label=label))
    if _has(profile, "doors"):  # issue 39: the queries, writers, adopters and readers of the doors
        from blobstate.testing.simulation.doors_scenario import doors_part

        more_specs, more_faults = doors_part(rng, ttl)
        specs, faults = specs + more_specs, faults + more_faults
    extras: tuple[str, ...] = ()
    if _has(profile, "keys"):
        from blobstate.testing.simulation import keys

        keys.add(rng, specs, faults, ttl)
        extras += (keys.__name__,)
    if _has(profile, "heal"):
        _heal(rng, ttl, stores, specs, faults)
        extras += ("blobstate.testing.simulation.heal_actors",)
    if _has(profile, "regroup"):
        from blobstate.testing.simulation import regrouper

        regrouper.add(rng, specs, faults, ttl)
        extras += (regrouper.__name__,)
    if _has(profile, "standby"):
        from blobstate.testing.simulation import standby

        standby.add(rng, stores, specs, faults, ttl)
        extras += (standby.__name__,)
    if profile == "processor":
        from blobstate.testing.simulation import processor

        processor.add(rng, specs, faults, ttl)
        extras += (processor.__name__,)
    return Scenario(seed, ttl, stores, specs, _dedupe(faults), logs=("log", "log2") if profile == "two-logs"
                    else ("log",), damage_targets=seed, encrypted=profile == "encrypted", extras=extras)


def _heal(rng: random.Random, ttl: int, stores: dict, specs: list[ActorSpec], faults: list[Fault]) -> None:
    """Profile ``heal``'s actors and faults (see the module docstring)."""
    killed = rng.randint(ttl, 2 * ttl)
    rerun = killed + ttl + rng.randint(ttl // 10, ttl)
    copy = dict(key=SNAP, name="snap", retain=2)
    specs += [ActorSpec("cp0", "copier", rng.randint(ttl // 4, ttl), 0, copy),
              ActorSpec("cp1", "copier", killed, 0, copy), ActorSpec("cp2", "copier", rerun, 0, copy),
              ActorSpec("tgc", "target_gc", rerun - rng.randint(0, ttl // 20), 0,
                        dict(runs=rng.randint(6, 10), gap_ms=rng.randint(ttl // 300, ttl // 30))),
              ActorSpec("hl", "host_loss", rng.randint(ttl // 2, ttl), 0,
                        dict(key=GRP, runs=rng.randint(3, 6), gap_ms=rng.randint(ttl // 4, ttl))),
              ActorSpec("gch", "gc", ttl, 0, dict(runs=rng.randint(4, 8), gap_ms=rng.randint(ttl // 4, ttl // 2))),
              ActorSpec("ix", "cached_index_writer", rng.randint(0, ttl), 0,
                        dict(key=IDX, name="idx", retain=2, batches=rng.randint(1, 3), interval_ms=ttl // 20))]
    stores[IDX] = StoreInfo("idx", 2)
    step = rng.choice(("journal UploadsPlanned", "journal BlobUploaded", "journal IndexUploaded",
                       "journal CheckpointAppending"))
    faults.append(Fault("kill", "cp1", rng.randint(1, 2), keep=rng.random() < 0.5, label=step))
    if rng.random() < 0.7:  # the owner paused past its TTL right before a group append: gc may take its parts
        faults.append(Fault("pause", "g1", rng.randint(1, 4), ms=rng.randint(ttl + ttl // 4, 3 * ttl),
                            label="journal CheckpointAppending"))


#: The protocol steps a pause or kill may be tied to (the k-th such journal event of the actor), besides a plain
#: k-th scheduling point: the journal events are where the commit protocol's decisions are (FoundationDB's
#: BUGGIFY places faults at the interesting lines the same way).
STEPS = ("journal CommitStarted", "journal UploadsPlanned", "journal IndexUploaded", "journal CheckpointAppending",
         "journal CheckpointWritten", "journal TtlRemoved", "journal BlobsDeleted", "journal CommitCompleted")


def _where(rng: random.Random) -> tuple[int, str]:
    """``(at, label)`` of a fault: half of them at the k-th scheduling point, half at the k-th protocol step."""
    if rng.random() < 0.5:
        return rng.randint(1, 150), ""
    return rng.randint(1, 9), rng.choice(STEPS)


def _dedupe(faults: list[Fault]) -> list[Fault]:
    """One fault per place (an actor's point, or an append, or a step)."""
    seen: set[tuple[str, str, int]] = set()
    out = []
    for f in faults:
        place = (f.actor, f.label, f.at) if f.kind in ("pause", "kill") else (f.kind, "", f.at)
        if place not in seen:
            seen.add(place)
            out.append(f)
    return out
