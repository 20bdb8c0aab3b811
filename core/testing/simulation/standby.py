"""Standby partitions and the hand-over of a lost or decommissioned primary as actors (issue 42, profile ``standby``).

A partitioned store (``SB``, model name ``stby``, two or three partitions) is written by its owner, the group owner
of every profile (``blobstate.testing.simulation.actors.group_owner``: the one commit engine, retried and speculative
part attempts, snapshots, its executors healing what gc took). Beside it:

- ``standby``: partition ``p``'s warm copy on a second host. At its scheduling points it reads the committed records
  and brings its own copy (a directory of one file per key and a marker naming the record it is at, ``Copy``)
  forward: it asks the one decision (``blobstate.model.local_copy:first_batch_to_apply``) and applies the committed
  changelogs after its marker with the real reader and decoder (``Repository.read_changelog``, size and CRC32C
  checked; ``changelog.decode``), at most a few per wake, so it lags arbitrarily; or, when its copy is off the chain
  (a batch re-run after it applied, a gap retention left, no copy yet), restores it with the real restore. It never
  stages or commits, and stops once a promotion took its copy.
- ``promoter``: the new writer after the primary is lost (killed), decommissioned (its last batch done) or paused
  past the TTL (a zombie that may resume and try to commit: the engine fences it, or it fences the promoter). It
  opens the store like every writer (pinned generation, journal recovered), takes each partition's copy from the
  host it runs on (``sources``: a standby's, or a hand-over's seed: the copy a previous promoter left on its host),
  and decides with the real ``first_batch_to_apply`` whether to catch it up (the committed changelogs replayed) or
  restore it (the real restore). Sometimes the engine's log says the newest batch is not done (Spark's ``commits/``
  lacks it): it then brings the copies to the batch before and runs the newest again (a new delta of the same batch
  id, which supersedes the one a standby may have applied). Then it commits ``batches`` more groups, each
  partition's changelog applied to its copy and, every ``snapshot_every`` batches, a snapshot staged from it.

Invariant (``standby`` violations): after every commit a promoter made, each partition's copy is exactly the fold of
the committed batches (``blobstate.testing.simulation.model.state``), and its ledger (the batch ids whose writes it
applied, a snapshot standing for every batch up to its own) is ``0 .. batch`` once each: no committed batch's writes
lost or applied twice. A standby checks the same of its copy after every batch it applies. The store is one of the
scenario's stores, so the invariants of every profile hold for it too (nothing lost, the latest state and every
retained snapshot restore to the model: a snapshot staged from a wrong copy is ``wrong``).

Seeded bug (``SEEDED_BUG`` in ``BUGS``: ``python -m bench.simulate --profile standby --seeded-bug standby-behind``,
or a test's ``monkeypatch``): a promotion uses the copy it takes as if it were at the committed record (no catch-up,
no restore): a standby that lagged, or one ahead of a batch the engine runs again, becomes the primary as it is.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.commit.group import GroupCommitter
from blobstate.commit.parts import heal_parts
from blobstate.errors import BlobstateError
from blobstate.model import chain as chains
from blobstate.model import layout
from blobstate.model.align import chain_to, ends_at
from blobstate.model.local_copy import first_batch_to_apply
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugins.dir_store import DirStore
from blobstate.testing.simulation import model
from blobstate.testing.simulation.actors import _Executor, pinned_committer, restore_into
from blobstate.testing.simulation.invariants import StoreInfo, Violation
from blobstate.testing.simulation.runner import ActorSpec
from blobstate.testing.simulation.scheduler import Fault
from blobstate.worker import stage_changelog, stage_snapshot

if TYPE_CHECKING:
    from blobstate.repository.repo import Repository
    from blobstate.testing.simulation.runner import Simulation
    from blobstate.testing.simulation.scheduler import Actor

SB = StoreKey("sim", "group", "stby")
NAME = "stby"
SEEDED_BUG = "standby-behind"
#: the seeded bugs switched on in this process (empty: none; see the module docstring)
BUGS: set[str] = set()


# -- a local copy ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Copy:
    """A partition's local copy: ``marker`` (``{"checkpointId", "batchId"}``, the record it is at; ``checkpointId``
    ``""``: the empty state; None: no usable copy), ``values`` (its key-value state), ``applied`` (the simulator's
    ledger: the batch ids whose writes it holds, in the order they were applied)."""

    marker: dict[str, Any] | None
    values: dict[str, str]
    applied: tuple[int, ...]


NONE = Copy(None, {}, ())
EMPTY = Copy({"checkpointId": "", "batchId": None}, {}, ())


def _at(record: Checkpoint) -> dict[str, Any]:
    return {"checkpointId": record.checkpoint_id, "batchId": record.batch_id}


def copy_dir(sim: Simulation, host: str, partition: int) -> str:
    """Partition ``partition``'s copy on ``host`` (an actor's host: removed with it when it is killed, disk lost)."""
    return os.path.join(sim.base, host, f"copy-p{partition}")


def save(path: str, copy: Copy) -> None:
    """Write ``copy`` at ``path``: its state (``db/``), then its marker (naming what ``db/`` holds)."""
    model.write_dir(os.path.join(path, "db"), copy.values)
    with open(os.path.join(path, "marker.json"), "w", encoding="utf-8") as fh:
        json.dump({"marker": copy.marker, "applied": list(copy.applied)}, fh)


def load(path: str) -> Copy:
    """The copy at ``path`` (``NONE`` when there is none: never made, or its host's disk lost)."""
    try:
        with open(os.path.join(path, "marker.json"), encoding="utf-8") as fh:
            doc = json.load(fh)
        return Copy(doc["marker"], model.read_dir(os.path.join(path, "db")), tuple(doc["applied"]))
    except (OSError, ValueError, KeyError):
        return NONE


def check_copy(copy: Copy, partition: int, batch: int, where: str) -> None:
    """Raise ``Violation`` unless ``copy`` holds exactly the fold of batches ``0 .. batch`` of ``partition``, each
    applied once."""
    want = model.state(f"{NAME}/p{partition}", batch)
    ledger = list(copy.applied)
    if copy.values != want or ledger != list(range(batch + 1)):
        twice = sorted({b for b in ledger if ledger.count(b) > 1})
        lost = [b for b in range(batch + 1) if b not in ledger]
        raise Violation("standby", f"{where}: partition {partition}'s copy after batch {batch} (marker "
                                   f"{copy.marker}) holds {copy.values}, the fold {want}; batches applied {ledger}: "
                                   f"lost {lost}, applied twice {twice}")


def _restored(repo: Repository, chain: chains.Chain, scratch: str) -> Copy:
    """The copy ``chain`` restores to, with the real restore (a snapshot stands for every batch up to its own)."""
    try:
        values = restore_into(repo, chain, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = tuple(range(chain.snapshot.batch_id + 1)) if chain.snapshot and chain.snapshot.batch_id is not None \
        else ()
    marker = _at(chain.records[-1]) if chain.records else EMPTY.marker
    return Copy(marker, values, base + tuple(d.batch_id for d in chain.deltas if d.batch_id is not None))


def _apply(repo: Repository, copy: Copy, record: Checkpoint) -> Copy:
    """``copy`` with committed delta ``record`` applied (its changelog read and decoded by the real readers)."""
    data = repo.read_changelog(record)
    values = model.replay(copy.values, data, record.changelog_blob_id)
    return Copy(_at(record), values, (*copy.applied, record.batch_id or 0))


def _taken(sim: Simulation) -> set[tuple[str, int]]:
    """(host, partition) of every copy a promotion took."""
    return sim.__dict__.setdefault("standby_taken", set())  # type: ignore[no-any-return]


def outcomes(sim: Simulation) -> list[tuple[str, str]]:
    """(actor, what it did) of every standby restore and every promotion, in order."""
    return sim.__dict__.setdefault("standby_outcomes", [])  # type: ignore[no-any-return]


# -- the actors -----------------------------------------------------------------------------------------------------
def standby(sim: Simulation, actor: Actor, *, partition: int, runs: int, gap_ms: int, most: int,
            log: str = "log") -> None:
    """Partition ``partition``'s standby (see the module docstring): ``runs`` wakes ``gap_ms`` apart, each applying
    at most a random ``0 .. most`` of the committed deltas its copy lacks."""
    repo = sim.open_repo(log)
    if repo is None:
        return
    rng = random.Random(f"{sim.seed}/{actor.name}")
    path = copy_dir(sim, actor.name, partition)
    os.makedirs(path, exist_ok=True)
    copy = load(path)
    if copy.marker is None:
        copy = EMPTY
        save(path, copy)
    for run in range(runs):
        if run:
            layout.sleep(gap_ms / 1000)
        if (actor.name, partition) in _taken(sim):
            return  # promoted: the copy is the primary's now
        try:
            records = chains.partition_history(repo.log.history(SB), partition)
            if not records or (actor.name, partition) in _taken(sim):
                continue
            chain = chains.plan_chain(records)
            upto = ends_at(chain)
            assert upto is not None
            deltas = chains.latest_deltas(chains.current_run(records))
            start = first_batch_to_apply(copy.marker, chain, deltas)
            if start is None:
                copy = _restored(repo, chain, os.path.join(sim.base, actor.name, "restore"))
                if (actor.name, partition) in _taken(sim):
                    return
                outcomes(sim).append((actor.name, f"restored at {upto}"))
                check_copy(copy, partition, upto, f"standby {actor.name}")
                save(path, copy)
                continue
            for b in range(start, min(upto, start + rng.randint(0, most) - 1) + 1):
                applied = _apply(repo, copy, deltas[b])
                if (actor.name, partition) in _taken(sim):
                    return  # taken while it read: the promotion has the copy as it was
                copy = applied
                check_copy(copy, partition, b, f"standby {actor.name}")
                save(path, copy)
        except (BlobstateError, OSError):
            continue  # a fault's object, a chain retention moved on: the next wake tries again


def _target(history: list[Checkpoint], partitions: int, rerun: bool) -> tuple[int, list[chains.Chain]]:
    """(batch, each partition's chain to it): the newest committed batch, or with ``rerun`` the one before (the engine
    runs the newest again) where every partition's chain to it is still held. Raises what ``chain_to`` raises."""
    per = [chains.partition_history(history, p) for p in range(partitions)]
    newest = ends_at(chains.plan_chain(per[0])) if per[0] else -1
    assert newest is not None
    if rerun and newest >= 0:
        try:
            return newest - 1, [chain_to(r, newest - 1) for r in per]
        except BlobstateError:
            pass  # retention took what the batch before needs: the newest is done
    return newest, [chain_to(r, newest) for r in per]


def promoter(sim: Simulation, actor: Actor, *, sources: list[str], retain: int, batches: int,
             snapshot_every: int = 3, interval_ms: int = 0, rerun: bool = False, log: str = "log") -> None:
    """The new writer of ``SB`` from the copies on the hosts ``sources`` (one per partition; see the module
    docstring)."""
    repo = sim.open_repo(log)
    if repo is None:
        return
    partitions = len(sources)
    committer = pinned_committer(sim, actor, SB, repo, retain)
    try:
        history = repo.log.history(SB)
        upto, chain_of = _target(history, partitions, rerun)
        copies = []
        for p, source in enumerate(sources):  # the task of p runs on the host of its source's copy
            _taken(sim).add((source, p))
            copy = load(copy_dir(sim, source, p))
            taken = copy.marker
            records = chains.partition_history(history, p)
            deltas = chains.latest_deltas(chains.current_run(records))
            start = first_batch_to_apply(copy.marker, chain_of[p], deltas)
            if SEEDED_BUG in BUGS and copy.marker is not None:
                how = "used as is"  # the bug: the copy taken as if it were at the committed record
            elif start is None:
                copy = _restored(repo, chain_of[p], os.path.join(sim.base, actor.name, f"restore-{p}"))
                how = "restored"
            else:
                for b in range(start, upto + 1):
                    copy = _apply(repo, copy, deltas[b])
                how = f"caught up from {start}"
            outcomes(sim).append((actor.name, f"p{p} from {source} (marker {taken}) {how} to {upto}"))
            save(copy_dir(sim, actor.name, p), copy)  # the primary's copy on this host now (a later hand-over's seed)
            copies.append(copy)
        query = next((cp.query_id for cp in reversed(history) if cp.query_id), NAME)  # a restart keeps its query
        groups = GroupCommitter(committer, num_partitions=partitions)
        for batch in range(upto + 1, upto + 1 + batches):
            if batch > upto + 1 and interval_ms:
                layout.sleep(interval_ms / 1000)
            copies = _commit(sim, actor, repo, groups, batch, copies, query, (batch + 1) % snapshot_every == 0)
            for p, copy in enumerate(copies):
                check_copy(copy, p, batch, f"promoter {actor.name} after committing batch {batch}")
                save(copy_dir(sim, actor.name, p), copy)
            outcomes(sim).append((actor.name, f"committed {batch}"))
    except (BlobstateError, OSError) as exc:
        outcomes(sim).append((actor.name, f"exited: {type(exc).__name__}"))
        return  # fenced, refused, a fault's object: the process exits
    finally:
        committer.close()


def _commit(sim: Simulation, actor: Actor, repo: Repository, groups: GroupCommitter, batch: int,
            copies: list[Copy], query: str, snapshot: bool) -> list[Copy]:
    """One batch: each partition's task heals what gc took of the changelogs its host kept, stages its changelog
    (and with ``snapshot`` a snapshot of its copy after the batch); one group committed. Returns the copies after
    the batch (each partition's changelog applied once the group landed)."""
    history = repo.log.history(SB)
    entries, new_ids, after, oldest = [], [], [], layout.now_ms()
    for p, copy in enumerate(copies):
        executor = _Executor(sim, SB, p)
        heal_parts(repo, chains.partition_history(history, p), executor.kept, ttl_ms=sim.ttl_ms)
        executor.clear()
        data = model.encoded(f"{NAME}/p{p}", batch)
        entry = stage_changelog(repo, SB, partition=p, batch_id=batch, data=data, ttl_ms=sim.ttl_ms)
        executor.keep(entry.checkpoint_id, data)
        entries.append(entry)
        values = model.replay(copy.values, data, entry.checkpoint_id)
        after.append(Copy({"checkpointId": entry.checkpoint_id, "batchId": batch}, values, (*copy.applied, batch)))
        if snapshot:
            live = sim.local_dir(actor, f"live-{p}")
            scratch = sim.local_dir(actor, f"scratch-{batch}-{p}", create=False)
            model.write_dir(live, values)
            DirStore().create_checkpoint(live, scratch)
            previous = chains.latest_snapshot(chains.partition_history(history, p))
            staged = stage_snapshot(repo, SB, partition=p, batch_id=batch, checkpoint_dir=scratch, previous=previous,
                                    ttl_ms=sim.ttl_ms, writer_id=actor.name)
            shutil.rmtree(scratch, ignore_errors=True)
            entries.append(staged.entry)
            new_ids += staged.new_blob_ids
    groups.commit(entries, batch_id=batch, query_id=query, created_ms=oldest, new_blob_ids=new_ids)
    return after


# -- the profile's part ---------------------------------------------------------------------------------------------
def add(rng: random.Random, stores: dict, specs: list[ActorSpec], faults: list[Fault], ttl_ms: int) -> None:
    """The store's owner; a standby per partition (started now or later, lagging, maybe paused or killed with its
    disk); the primary lost (killed), decommissioned (its last batch done) or paused past the TTL (a zombie); a
    promoter from the standbys' copies, and sometimes a second hand-over later from the first promoter's host
    (its copy the seed), either maybe killed or paused past the TTL."""
    n = rng.randint(2, 3)
    stores[SB] = StoreInfo(NAME, 2, partitions=n)
    every = (ttl_ms // 60, ttl_ms // 6)
    specs.append(ActorSpec("sp", "group_owner", 0, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                           dict(key=SB, name=NAME, partitions=n, retain=2, batches=rng.randint(3, 8),
                                snapshot_every=rng.choice([2, 3, 4]), interval_ms=rng.randint(*every))))
    roll = rng.random()
    if roll < 0.4:  # lost: killed at a scheduling point or a protocol step, its disk kept or not
        faults.append(Fault("kill", "sp", rng.randint(5, 120), keep=rng.random() < 0.5))
    elif roll < 0.7:  # a zombie: paused past the TTL, then resumed (fenced, or fencing the promoter)
        faults.append(Fault("pause", "sp", rng.randint(5, 120), ms=rng.randint(ttl_ms, 3 * ttl_ms)))
    for p in range(n):
        name = f"sb{p}"
        specs.append(ActorSpec(name, "standby", rng.choice([0, rng.randint(0, ttl_ms)]), 0,
                               dict(partition=p, runs=rng.randint(2, 12), gap_ms=rng.randint(ttl_ms // 60, ttl_ms // 3),
                                    most=rng.randint(1, 3))))
        roll = rng.random()
        if roll < 0.15:
            faults.append(Fault("kill", name, rng.randint(1, 40), keep=rng.random() < 0.5))
        elif roll < 0.35:
            faults.append(Fault("pause", name, rng.randint(1, 40), ms=rng.randint(ttl_ms // 4, 2 * ttl_ms)))
    start = rng.randint(ttl_ms // 4, 2 * ttl_ms)
    promoters = [("ho1", [f"sb{p}" for p in range(n)])]
    if rng.random() < 0.4:  # a second hand-over: the first promoter's host decommissioned, its copies the seed
        promoters.append(("ho2", ["ho1"] * n))
    for name, sources in promoters:
        specs.append(ActorSpec(name, "promoter", start, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                               dict(sources=sources, retain=2, batches=rng.randint(1, 5),
                                    snapshot_every=rng.choice([2, 3]), interval_ms=rng.randint(*every),
                                    rerun=rng.random() < 0.3)))
        roll = rng.random()
        if roll < 0.2:
            faults.append(Fault("kill", name, rng.randint(1, 80), keep=rng.random() < 0.6))
        elif roll < 0.35:
            faults.append(Fault("pause", name, rng.randint(1, 80), ms=rng.randint(ttl_ms, 3 * ttl_ms)))
        start += rng.randint(ttl_ms // 4, 2 * ttl_ms)


def prepare(sim: Simulation) -> None:
    """Nothing to set up: the store starts empty."""


def check(sim: Simulation) -> None:
    """Nothing between steps: the standbys and promoters check their copies as they change them."""


def final(sim: Simulation) -> None:
    """Nothing more at the end: the store is one of the scenario's, checked like every other."""


__all__ = ["BUGS", "EMPTY", "NAME", "NONE", "SB", "SEEDED_BUG", "Copy", "add", "check", "check_copy", "copy_dir",
           "final", "load", "outcomes", "prepare", "promoter", "save", "standby"]
