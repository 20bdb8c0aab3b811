"""The rescale at restart of a key-grouped partitioned store as actors (issue 42, profile ``regroup``).

A key-grouped store (``blobstate.model.keygroups``) keeps one history across restarts with another number of
partitions (``blobstate.model.regroup``). Its model here: the whole store's state after batch ``b`` is a pure fold
(``state``) over keys ``k0 .. k<KEYS-1>``; a key's key group is ``key_group_of_hash`` of a stand-in for Spark's hash
(``spark_hash``, a signed 32-bit int), and partition ``p`` of ``n`` holds exactly the keys of its key-group range
(``partition_state``), its writes per batch the store's writes of those keys (``partition_ops``).

- ``kg_owner``: the store's owner with ``partitions`` partitions (``GroupCommitter(key_groups=KEY_GROUPS)``, the one
  commit engine): each batch stages every partition's changelog (``stage_changelog``), a snapshot every
  ``snapshot_every`` batches (``stage_snapshot``), and commits one group. It starts from the store's latest state in
  its current partitioning (it may be a restart after a rescale) and pins the generation it opened on.
- ``regrouper``: the query restarted with ``partitions`` partitions. It opens the store like every writer (pinned,
  its journal recovered), plans with the real ``plan_regroup`` at the newest committed batch ``b`` (which uses
  ``plan_rescale``), and builds each new partition's state from the old partitions' chains restored with the real
  restore, cut to the key groups the plan gives it (``cut``: the in-memory ``delete_range`` of the key groups
  outside the range, the real ``key_group_range`` / ``key_group_of_hash``); then commits batch ``b + 1`` as one group of
  the new count: per new partition the snapshot of the state it started from (batch ``b``) and its delta of ``b + 1``,
  and runs ``batches - 1`` more batches with the new count as ``kg_owner`` does.

Invariants (``check`` after every step, ``final`` at the end, after recovery and gc): in the store's current
partitioning every partition's latest chain restores (with the real readers) to exactly its key-group range of the
fold after its batch; the partitions' states together hold every key of the fold once (nothing lost, nothing
duplicated: ``regroup`` violations). A chain that needs an object a fault lost or damaged, or one a landing commit
has not healed yet, is not held against the protocol (the other stores' checks own that).

Seeded bug (``SEEDED_BUG``, switched on by adding it to ``BUGS``: ``python -m bench.simulate --profile regroup
--seeded-bug regroup-off-by-one``, or a test's ``monkeypatch``): every cut keeps one key group more than its range
(``stop + 1``): a new partition keeps a key of its neighbour's range, which the neighbour also takes, so that key is
duplicated (and its later writes go to one copy only)."""

from __future__ import annotations

import random
import shutil
import zlib
from functools import lru_cache
from typing import TYPE_CHECKING

from blobstate.commit.group import GroupCommitter
from blobstate.errors import BlobstateError, IntegrityError, NothingToRestore
from blobstate.model import chain as chains
from blobstate.model import changelog, layout
from blobstate.model.changelog import DELETE, PUT, Op
from blobstate.model.keygroups import KeyGroupRange, key_group_of_hash, key_group_range, partition_of_key_group
from blobstate.model.records import StoreKey
from blobstate.model.regroup import current_partitioning, plan_regroup
from blobstate.plugins.dir_store import DirStore
from blobstate.testing.simulation import model
from blobstate.testing.simulation.actors import pinned_committer, restore_into
from blobstate.testing.simulation.invariants import Checker, Violation
from blobstate.testing.simulation.runner import ActorSpec
from blobstate.testing.simulation.scheduler import Fault
from blobstate.worker import stage_changelog, stage_snapshot

if TYPE_CHECKING:
    from blobstate.repository.repo import Repository
    from blobstate.testing.simulation.runner import Simulation
    from blobstate.testing.simulation.scheduler import Actor

KG = StoreKey("sim", "group", "kgrp")
KEY_GROUPS = 12  # small, so that every range boundary holds keys
KEYS = 30
SEEDED_BUG = "regroup-off-by-one"
#: the seeded bugs switched on in this process (empty: none; see the module docstring)
BUGS: set[str] = set()


# -- the model ------------------------------------------------------------------------------------------------------
def spark_hash(key: str) -> int:
    """A stand-in for Spark's ``hash(key columns)``: a signed 32-bit int, pure."""
    h = zlib.crc32(f"kg/{key}".encode())
    return h - (1 << 32) if h >= 1 << 31 else h


def key_group(key: str) -> int:
    """``key``'s key group (the real ``key_group_of_hash``)."""
    return key_group_of_hash(spark_hash(key), KEY_GROUPS)


def ops(batch: int) -> list[Op]:
    """Batch ``batch``'s writes to the whole store: a few puts and sometimes a delete."""
    rng = random.Random(zlib.crc32(f"kgrp/{batch}".encode()))
    out: list[Op] = [(PUT, f"k{rng.randrange(KEYS)}", f"{batch}-{rng.getrandbits(24):06x}") for _ in range(4)]
    if rng.random() < 0.5:
        out.append((DELETE, f"k{rng.randrange(KEYS)}", None))
    return out


@lru_cache(maxsize=1024)
def _state(batch: int) -> tuple[tuple[str, str], ...]:
    prev = dict(_state(batch - 1)) if batch > 0 else {}
    return tuple(sorted(model.apply(prev, ops(batch)).items()))


def state(batch: int) -> dict[str, str]:
    """The fold: the whole store after batch ``batch`` (-1: empty)."""
    return dict(_state(batch)) if batch >= 0 else {}


def owner(key: str, partitions: int) -> int:
    """The partition of ``partitions`` that holds ``key`` (the real ``partition_of_key_group``)."""
    return partition_of_key_group(key_group(key), KEY_GROUPS, partitions)


def partition_state(batch: int, partitions: int, p: int) -> dict[str, str]:
    return {k: v for k, v in state(batch).items() if owner(k, partitions) == p}


def partition_ops(batch: int, partitions: int, p: int) -> list[Op]:
    return [op for op in ops(batch) if owner(str(op[1]), partitions) == p]


def cut(values: dict[str, str], keep: KeyGroupRange) -> dict[str, str]:
    """``values`` with every key outside the key groups of ``keep`` deleted (the in-memory ``delete_range``); with
    the seeded bug, one key group more is kept."""
    if SEEDED_BUG in BUGS:
        keep = KeyGroupRange(keep.start, keep.stop + 1)
    return {k: v for k, v in values.items() if key_group(k) in keep}


# -- the actors -----------------------------------------------------------------------------------------------------
def _newest_batch(history: list) -> tuple[int, int]:
    """(batch, partitions) of the newest group record of the current partitioning ((-1, 0): none)."""
    groups = [cp for cp in current_partitioning(history) if cp.is_group and cp.partitions]
    if not groups:
        return -1, 0
    return groups[-1].batch_id if groups[-1].batch_id is not None else -1, groups[-1].num_partitions


def _commit(sim: Simulation, actor: Actor, repo: Repository, groups: GroupCommitter, batch: int, partitions: int,
            values: list[dict[str, str]], *, snapshot: bool, query: str) -> None:
    """One batch of ``partitions`` partitions: ``values`` (each partition's state before it) advanced in place,
    every partition's changelog staged, a snapshot too with ``snapshot``, one group committed."""
    history = repo.log.history(KG)
    current = current_partitioning(history)
    entries, new_ids, oldest = [], [], layout.now_ms()
    for p in range(partitions):
        batch_ops = partition_ops(batch, partitions, p)
        entries.append(stage_changelog(repo, KG, partition=p, batch_id=batch, data=changelog.encode(batch_ops),
                                       ttl_ms=sim.ttl_ms))
        values[p] = model.apply(values[p], batch_ops)
        if snapshot:
            previous = chains.latest_snapshot(chains.partition_history(current, p))
            staged = _stage_state(sim, actor, repo, p, batch, values[p], previous)
            entries.append(staged.entry)
            new_ids += staged.new_blob_ids
    groups.commit(entries, batch_id=batch, query_id=query, created_ms=oldest, new_blob_ids=new_ids)


def _stage_state(sim: Simulation, actor: Actor, repo: Repository, p: int, batch: int, values: dict[str, str],
                 previous: object) -> object:
    live = sim.local_dir(actor, f"kg-live-{p}")
    scratch = sim.local_dir(actor, f"kg-scratch-{batch}-{p}", create=False)
    try:
        model.write_dir(live, values)
        DirStore().create_checkpoint(live, scratch)
        return stage_snapshot(repo, KG, partition=p, batch_id=batch, checkpoint_dir=scratch, previous=previous,
                              ttl_ms=sim.ttl_ms, writer_id=actor.name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _restore_partition(sim: Simulation, actor: Actor, repo: Repository, chain: chains.Chain, tag: str) -> dict:
    scratch = sim.local_dir(actor, f"kg-restore-{tag}", create=False)
    try:
        return restore_into(repo, chain, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def kg_owner(sim: Simulation, actor: Actor, *, partitions: int, retain: int, batches: int, snapshot_every: int = 3,
             interval_ms: int = 0, log: str = "log") -> None:
    """The key-grouped store's owner with ``partitions`` partitions (see the module docstring)."""
    repo = sim.open_repo(log)
    if repo is None:
        return
    committer = pinned_committer(sim, actor, KG, repo, retain)
    try:
        history = repo.log.history(KG)
        start, had = _newest_batch(history)
        if had and had != partitions:
            return  # another count: a restart with it is the regrouper's
        current = current_partitioning(history)
        values = [{} if start < 0 else _restore_partition(sim, actor, repo, chains.plan_chain(
            chains.partition_history(current, p)), f"{p}") for p in range(partitions)]
        groups = GroupCommitter(committer, num_partitions=partitions, key_groups=KEY_GROUPS)
        for batch in range(start + 1, start + 1 + batches):
            if batch > start + 1 and interval_ms:
                layout.sleep(interval_ms / 1000)
            _commit(sim, actor, repo, groups, batch, partitions, values, snapshot=(batch + 1) % snapshot_every == 0,
                    query="kgrp")
    except (BlobstateError, OSError):
        return
    finally:
        committer.close()


def regrouper(sim: Simulation, actor: Actor, *, partitions: int, retain: int, batches: int,
              snapshot_every: int = 3, interval_ms: int = 0, log: str = "log") -> None:
    """The query restarted with ``partitions`` partitions (see the module docstring); its outcome is appended to
    ``sim.regroup_outcomes``."""
    repo = sim.open_repo(log)
    if repo is None:
        return
    outcomes: list = sim.__dict__.setdefault("regroup_outcomes", [])
    committer = pinned_committer(sim, actor, KG, repo, retain)
    try:
        history = repo.log.history(KG)
        batch, had = _newest_batch(history)
        if batch < 0:
            outcomes.append((actor.name, "nothing"))
            return
        if had == partitions:
            outcomes.append((actor.name, "same"))
            return
        plan = plan_regroup(history, new_partitions=partitions, batch=batch, what=str(KG))
        values: list[dict[str, str]] = []
        entries, new_ids = [], []
        for q, part in enumerate(plan.partitions):
            assert part.range == key_group_range(KEY_GROUPS, partitions, q)
            built = cut(_restore_partition(sim, actor, repo, part.base.chain, f"b{q}"), part.range)
            for other in part.others:  # the other sources' key groups ingested
                built.update(cut(_restore_partition(sim, actor, repo, other.chain, f"o{q}"), other.keep))
            staged = _stage_state(sim, actor, repo, q, batch, built, None)  # the state it started from
            entries.append(staged.entry)
            new_ids += staged.new_blob_ids
            values.append(built)
        groups = GroupCommitter(committer, num_partitions=partitions, key_groups=KEY_GROUPS)
        first, oldest = batch + 1, layout.now_ms()
        for q in range(partitions):
            batch_ops = partition_ops(first, partitions, q)
            entries.append(stage_changelog(repo, KG, partition=q, batch_id=first, data=changelog.encode(batch_ops),
                                           ttl_ms=sim.ttl_ms))
            values[q] = model.apply(values[q], batch_ops)
        groups.commit(entries, batch_id=first, query_id="kgrp", created_ms=oldest, new_blob_ids=new_ids)
        outcomes.append((actor.name, f"committed {plan.old_partitions}->{partitions} at {first}"))
        for b in range(first + 1, first + batches):
            if interval_ms:
                layout.sleep(interval_ms / 1000)
            _commit(sim, actor, repo, groups, b, partitions, values, snapshot=(b + 1) % snapshot_every == 0,
                    query="kgrp")
    except (BlobstateError, OSError) as exc:
        outcomes.append((actor.name, f"exited: {type(exc).__name__}: {str(exc)[:200]}"))
        return
    finally:
        committer.close()


# -- the invariants -------------------------------------------------------------------------------------------------
def check_store(sim: Simulation, *, final: bool) -> None:
    """Raise ``Violation`` unless every partition of the current partitioning restores to its range of the fold,
    and together they hold every key of the fold once (see the module docstring)."""
    repo = sim.checker.repos["log"]
    history = sim.checker._history(repo, "log", KG)
    if not history:
        return
    current = current_partitioning(history)
    groups = [cp for cp in current if cp.is_group and cp.partitions]
    if not groups:
        return
    n = groups[-1].num_partitions
    memo = sim.__dict__.setdefault("regroup_good", set())
    for p in range(n):
        try:
            chain = chains.plan_chain(chains.partition_history(current, p))
        except NothingToRestore as exc:
            raise Violation("regroup", f"{KG} partition {p} of {n}: the latest state does not restore: {exc}") \
                from None
        key = (n, p, tuple((cp.checkpoint_id, cp.generation) for cp in chain.records), len(sim.world.damaged))
        if key in memo:
            continue
        upto = chain.upto if chain.upto is not None else (chain.snapshot.batch_id if chain.snapshot else None)
        try:
            values = Checker.restore(repo, chain)
        except IntegrityError:
            if final and not any(b.startswith(KG.prefix + "/") for b in sim.world.damaged):
                raise Violation("regroup", f"{KG} partition {p} of {n}: the chain to batch {upto} does not restore "
                                           f"after recovery, with no object of it lost by a fault") from None
            continue  # a fault's object, or a landing commit's not healed yet
        if upto is None:
            continue
        want = partition_state(upto, n, p)
        if values != want:
            fold = state(upto)
            extra = sorted(k for k in values if owner(k, n) != p)
            lost = sorted(k for k in fold if owner(k, n) == p and k not in values)
            raise Violation("regroup", f"{KG} partition {p} of {n} (key groups {key_group_range(KEY_GROUPS, n, p)}) "
                                       f"after batch {upto}: keys of other partitions {extra} (duplicated), keys "
                                       f"of its range missing {lost}, values {values} != fold {want} (chain "
                                       f"{chain.describe()})")
        memo.add(key)


def prepare(sim: Simulation) -> None:
    """Nothing to set up: the store starts empty."""


def check(sim: Simulation) -> None:
    check_store(sim, final=False)


def final(sim: Simulation) -> None:
    """After recovery, the final commits and gc: the store's current partitioning still restores to the fold."""
    check_store(sim, final=True)


# -- the profile's part ---------------------------------------------------------------------------------------------
def add(rng: random.Random, specs: list[ActorSpec], faults: list[Fault], ttl_ms: int) -> None:
    """The key-grouped store's owner with 2..4 partitions, then one or two restarts with another count (each
    starting while the one before may still run: a zombie fenced by the pinned generation), each maybe killed
    (work directory kept or lost) or paused past the TTL."""
    n = rng.randint(2, 4)
    specs.append(ActorSpec("kg1", "kg_owner", 0, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                           dict(partitions=n, retain=2, batches=rng.randint(3, 7), snapshot_every=rng.choice([2, 3]),
                                interval_ms=rng.randint(ttl_ms // 60, ttl_ms // 6))))
    start = rng.randint(ttl_ms // 4, 2 * ttl_ms)
    counts = [n]
    for i in range(1, rng.randint(1, 2) + 1):
        m = rng.choice([c for c in range(1, 6) if c != counts[-1]])
        counts.append(m)
        name = f"rg{i}"
        specs.append(ActorSpec(name, "regrouper", start, rng.randint(-ttl_ms // 5, ttl_ms // 5),
                               dict(partitions=m, retain=2, batches=rng.randint(1, 4),
                                    snapshot_every=rng.choice([2, 3]),
                                    interval_ms=rng.randint(ttl_ms // 60, ttl_ms // 6))))
        start += rng.randint(ttl_ms // 4, 2 * ttl_ms)
    for spec in specs[-len(counts):]:
        roll = rng.random()
        if roll < 0.35:
            faults.append(Fault("kill", spec.name, rng.randint(1, 60), keep=rng.random() < 0.6))
        elif roll < 0.55:
            faults.append(Fault("pause", spec.name, rng.randint(1, 60), ms=rng.randint(ttl_ms, 3 * ttl_ms)))


__all__ = ["BUGS", "KEY_GROUPS", "KG", "SEEDED_BUG", "add", "check", "cut", "final", "kg_owner", "partition_state",
           "prepare", "regrouper", "state"]
