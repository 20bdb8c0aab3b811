"""The plan of a key-grouped store's restart with another number of partitions (issue 42): which records belong to
the store's current partitioning, and, for each new partition, the old partitions' chains it starts from. Pure.

A key-grouped partitioned store (``Checkpoint.key_groups``) keeps one history across rescales: the group records of
``N`` partitions, then, from the first batch of a restart with ``M``, those of ``M``. A partition number means
another range of key groups in each, so the records of partition ``p`` are always read within one partitioning
(``current_partitioning``): from the first group record of the newest run of records of the newest group's count.
The first group of ``M`` partitions commits, for every new partition, a snapshot of the state it started from (the
batch restored) beside its delta, so the new partitioning's records make every later state on their own.

``plan_regroup`` is the Open door's plan for such a restart (the records read once and pinned, then this): the
rescale of ``blobstate.model.keygroups.plan_rescale`` with each source's chain ending exactly at the batch Spark
committed (``blobstate.model.align.chain_to``, the Align door), refused as the door refuses. A store without key
groups has no such plan (``PartitionCountError``: its rescale is offline, ``blobstate spark rescale``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from blobstate.errors import PartitionCountError
from blobstate.model.align import chain_to
from blobstate.model.chain import Chain, partition_history
from blobstate.model.keygroups import KeyGroupRange, plan_rescale
from blobstate.model.records import Checkpoint


def _groups(history: Sequence[Checkpoint]) -> list[Checkpoint]:
    return [cp for cp in history if cp.is_group and cp.partitions]


def partitioning_start(history: Sequence[Checkpoint]) -> int:
    """The generation of the first group record of the store's current partitioning (0: no group yet): the oldest
    of the newest run of group records holding the newest one's number of partitions."""
    groups = _groups(history)
    if not groups:
        return 0
    count, start = groups[-1].num_partitions, groups[-1].generation
    for cp in reversed(groups):
        if cp.num_partitions != count:
            break
        start = cp.generation
    return start


def current_partitioning(history: Sequence[Checkpoint]) -> list[Checkpoint]:
    """``history`` without the group records of an earlier partitioning (void records and every other kind kept):
    what ``partition_history`` of a current partition number reads."""
    start = partitioning_start(history)
    return [cp for cp in history if not (cp.is_group and cp.partitions and cp.generation < start)]


@dataclass(frozen=True)
class RegroupSource:
    """An old partition a new one starts from: its ``chain`` to the batch restored, and the key groups it gives
    (``keep``)."""

    partition: int
    keep: KeyGroupRange
    chain: Chain


@dataclass(frozen=True)
class PartitionRegroup:
    """New partition ``partition``'s start: its ``range``; its ``base`` (restored whole, then cut to ``range``);
    the ``others`` whose key groups it takes in."""

    partition: int
    range: KeyGroupRange
    base: RegroupSource
    others: tuple[RegroupSource, ...]


@dataclass(frozen=True)
class RegroupPlan:
    """A restart of a store of ``key_groups`` key groups from ``old_partitions`` to ``new_partitions`` at the state
    after ``batch``: one ``PartitionRegroup`` per new partition, partition 0 first."""

    key_groups: int
    old_partitions: int
    new_partitions: int
    batch: int
    partitions: tuple[PartitionRegroup, ...]


def plan_regroup(history: Sequence[Checkpoint], *, new_partitions: int, batch: int,
                 what: str = "the store") -> RegroupPlan:
    """The plan of ``what``'s restart with ``new_partitions`` at the state after ``batch`` (its records
    ``history``). Raises ``PartitionCountError`` for a store without key groups or with no group record,
    ``ConfigurationError`` for a count its key groups do not allow, and what ``chain_to`` raises for an old
    partition whose records do not end exactly at ``batch`` (``StateNotHeld``, ``BrokenChainError``,
    ``NothingToRestore``)."""
    current = current_partitioning(history)
    groups = _groups(current)
    if not groups or not groups[-1].key_groups:
        raise PartitionCountError(
            f"{what} has no key groups (it was written before them or without key_groups=), so it cannot restart "
            f"with num_partitions={new_partitions}: re-partition it offline into a new store (blobstate spark "
            "rescale); nothing was changed")
    newest = groups[-1]
    key_groups, old = newest.key_groups, newest.num_partitions
    rescale = plan_rescale(key_groups, old, new_partitions)
    chains: dict[int, Chain] = {}

    def source(partition: int, keep: KeyGroupRange) -> RegroupSource:
        if partition not in chains:
            chains[partition] = chain_to(partition_history(current, partition), batch,
                                         f"{what} (old partition {partition} of {old})")
        return RegroupSource(partition, keep, chains[partition])

    out = tuple(PartitionRegroup(p.partition, p.range, source(p.base.partition, p.base.keep),
                                 tuple(source(s.partition, s.keep) for s in p.others)) for p in rescale)
    return RegroupPlan(key_groups, old, new_partitions, batch, out)


__all__ = ["PartitionRegroup", "RegroupPlan", "RegroupSource", "current_partitioning", "partitioning_start",
           "plan_regroup"]
