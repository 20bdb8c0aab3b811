"""The plan of a key-grouped store's restart with another number of partitions (``blobstate.model.regroup``): which
records belong to the current partitioning, and each new partition's sources with their chains. Pure: records built
in memory."""

from __future__ import annotations

import pytest

from blobstate.errors import BrokenChainError, PartitionCountError
from blobstate.model.align import StateNotHeld
from blobstate.model.chain import partition_history
from blobstate.model.keygroups import KeyGroupRange, key_group_range
from blobstate.model.records import DELTA, GROUP, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey
from blobstate.model.regroup import current_partitioning, partitioning_start, plan_regroup

KEY = StoreKey("j", "group", "s")
K = 128


def group(gen: int, n: int, batch: int, *, k: int = K, snapshots_of: int | None = None,
          only: range | None = None, deltas: bool = True) -> Checkpoint:
    """Group record ``gen`` of ``n`` partitions for ``batch``: a delta per partition (of ``only``), and a snapshot
    of batch ``snapshots_of`` per partition when given (the first group of a new partitioning)."""
    entries = []
    for p in only if only is not None else range(n):
        if deltas:
            entries.append(PartitionEntry(p, DELTA, f"g{gen}d{p}", batch, f"{KEY.prefix}/blobs/{gen:016x}{p:016x}",
                                          1, 5))
        if snapshots_of is not None:
            entries.append(PartitionEntry(p, SNAPSHOT, f"g{gen}s{p}", snapshots_of,
                                          f"{KEY.prefix}/indexes/{gen:016x}{p:016x}.json", 1, 5))
    return Checkpoint(KEY, f"g{gen}", gen, "", 0, 0, 0, batch, kind=GROUP, query_id="q", num_partitions=n,
                      partitions=tuple(sorted(entries, key=lambda e: (e.partition, e.kind != SNAPSHOT))),
                      key_groups=k)


def ids(chain) -> list[str]:
    return [cp.checkpoint_id for cp in chain.records]


def test_scale_out_4_to_8_starts_each_new_partition_from_one_old_chain():
    history = [group(g + 1, 4, g) for g in range(4)]  # batches 0..3
    plan = plan_regroup(history, new_partitions=8, batch=3)
    assert (plan.key_groups, plan.old_partitions, plan.new_partitions, plan.batch) == (K, 4, 8, 3)
    for q, p in enumerate(plan.partitions):
        assert p.range == key_group_range(K, 8, q) and p.others == ()
        assert p.base.partition == q // 2 and p.base.keep == p.range
        assert ids(p.base.chain) == [f"g{g}d{q // 2}" for g in range(1, 5)]


def test_scale_in_8_to_3_names_every_source_with_its_chain_and_range():
    history = [group(1, 8, 0), group(2, 8, 1)]
    plan = plan_regroup(history, new_partitions=3, batch=1)
    first = plan.partitions[0]
    assert first.range == KeyGroupRange(0, 43) and first.base.partition == 0
    assert [(s.partition, s.keep, ids(s.chain)) for s in first.others] == [
        (1, KeyGroupRange(16, 32), ["g1d1", "g2d1"]), (2, KeyGroupRange(32, 43), ["g1d2", "g2d2"])]
    kept = sorted((s.keep.start, s.keep.stop) for p in plan.partitions for s in (p.base, *p.others))
    assert kept[0][0] == 0 and kept[-1][1] == K and all(a[1] == b[0] for a, b in zip(kept, kept[1:], strict=False))


def test_the_records_of_an_earlier_partitioning_never_count_for_a_partition_of_the_current_one():
    # batches 0..2 with N=4; the restart with M=8 at batch 2 commits snapshots of batch 2 beside batch 3's deltas
    history = [group(1, 4, 0), group(2, 4, 1), group(3, 4, 2), group(4, 8, 3, snapshots_of=2), group(5, 8, 4)]
    assert partitioning_start(history) == 4
    current = current_partitioning(history)
    assert [cp.generation for cp in current] == [4, 5]
    assert [cp.checkpoint_id for cp in partition_history(current, 1)] == ["g4s1", "g4d1", "g5d1"]
    # read over the whole history, partition 1 would mix the 4-partition era's partition 1 (other key groups) in
    assert {cp.checkpoint_id for cp in partition_history(history, 1)} >= {"g1d1", "g2d1", "g3d1"}
    back = plan_regroup(history, new_partitions=4, batch=4)  # and back to 4: from the 8-partition chains
    assert back.old_partitions == 8
    assert ids(back.partitions[1].base.chain) == ["g4s2", "g4d2", "g5d2"]


def test_a_store_without_key_groups_keeps_the_offline_rescale_and_says_so():
    with pytest.raises(PartitionCountError, match="no key groups.*blobstate spark rescale"):
        plan_regroup([group(1, 4, 0, k=0)], new_partitions=8, batch=0)
    with pytest.raises(PartitionCountError):
        plan_regroup([], new_partitions=8, batch=0)


def test_a_source_whose_records_do_not_reach_the_batch_is_refused_by_the_align_door():
    history = [group(1, 4, 0), group(2, 4, 1), group(3, 4, 2, only=range(0, 3))]  # partition 3 lacks batch 2
    plan_regroup(history[:2], new_partitions=2, batch=1)
    with pytest.raises(BrokenChainError, match="batch 2"):
        plan_regroup(history, new_partitions=2, batch=2)
    with pytest.raises(StateNotHeld, match="old partition 0 of 4"):  # a snapshot of batch 0 never stands for 1
        plan_regroup([group(1, 4, 0, snapshots_of=0, deltas=False)], new_partitions=2, batch=1)
