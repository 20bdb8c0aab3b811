"""Retention after a key-grouped store's rescale at restart (issue 42): the records of the old partitioning (4
partitions) are kept while a partition of the new one (3) still needs them for its last ``retain`` snapshots, and
collected after; partition 3, which the new partitioning no longer has, keeps nothing alive by itself (before, its
last snapshots pinned every record from them on: the log was never pruned again)."""

from __future__ import annotations

from blobstate.model import chain
from blobstate.model.records import DELTA, Checkpoint, PartitionEntry, StoreKey
from blobstate.model.retention import plan_retention

KEY = StoreKey("j", "group", "s")
DAY = 86_400_000


def group(gen: int, batch: int, n: int, snapshot_of: int | None = None) -> Checkpoint:
    """Generation ``gen``: the deltas of ``batch`` for ``n`` partitions, and a snapshot of batch ``snapshot_of`` of
    each when given (a rescale's first group: the batch the new partitions started from)."""
    parts = []
    for p in range(n):
        parts.append(PartitionEntry(p, DELTA, f"g{gen}p{p}d", batch, f"{KEY.prefix}/blobs/{gen:030x}{p:02x}", 1, 5))
        if snapshot_of is not None:
            parts.append(PartitionEntry(p, "snapshot", f"g{gen}p{p}s", snapshot_of,
                                        f"{KEY.prefix}/indexes/{gen:030x}{p:02x}.json", 1, 5))
    return Checkpoint(KEY, f"g{gen}", gen, "", 0, 0, gen * DAY, batch, kind="group", num_partitions=n,
                      partitions=tuple(parts), query_id="q", key_groups=64)


OLD = [group(1, 0, 4), group(2, 1, 4, snapshot_of=0), group(3, 2, 4), group(4, 3, 4, snapshot_of=2)]


def _gens(records: list[Checkpoint]) -> list[int]:
    return [cp.generation for cp in records]


def test_the_old_partitioning_is_collected_once_the_new_one_holds_retain_snapshots():
    history = OLD + [group(5, 4, 3, snapshot_of=3), group(6, 5, 3), group(7, 6, 3, snapshot_of=5),
                     group(8, 7, 3)]
    expiring, retained = chain.retention(history, 2)
    assert _gens(retained) == [5, 6, 7, 8] and _gens(expiring) == [1, 2, 3, 4]
    assert _gens(plan_retention(history, 2).retained) == [5, 6, 7, 8]


def test_the_old_partitioning_is_kept_while_the_new_one_needs_it_for_its_last_snapshots():
    history = OLD + [group(5, 4, 3, snapshot_of=3), group(6, 5, 3)]
    expiring, retained = chain.retention(history, 2)
    # partitions 0..2 keep their last two snapshots: the old partitioning's of batch 2 (generation 4), the rescale's
    assert _gens(retained) == [4, 5, 6] and _gens(expiring) == [1, 2, 3]
    for p in range(3):  # every state a partition of the new partitioning had is still restorable
        assert chain.plan_chain(chain.partition_history(retained, p)).records == \
            chain.plan_chain(chain.partition_history(history, p)).records
