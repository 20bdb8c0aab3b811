"""Key groups: the fixed units a partitioned store's keys are divided into, so a restart with another number of
partitions reassigns ranges of them instead of rewriting every key (Flink's max parallelism and key-group ranges).

A group written with key groups records their number ``K`` (``Checkpoint.key_groups``, fixed for the store's life).
A key's key group is ``pmod(h, K)``, ``h`` the hash Spark's own ``repartition(N, *key_cols)`` computes for the key
columns (``hash(cols...)``: Murmur3, seed 42, a signed 32-bit int), so the key group is decided in the JVM by the
very expression that partitions today, and never needs the stored key decoded. Partition ``p`` of ``N`` owns the
contiguous range ``[ceil(p*K/N), ceil((p+1)*K/N))``; a key group ``g`` belongs to partition ``g*N // K`` (the same
assignment as Flink's ``KeyGroupRangeAssignment``, written as half-open ranges). The ranges of ``N`` partitions
cover ``0..K-1``, are disjoint, and differ in size by at most one key group.

In a key-grouped RocksDB every key starts with its key group, ``KEY_GROUP_BYTES`` big-endian bytes (``prefix``), so a
range of key groups is a range of keys: a copy is cut to its partition's range by at most two ``delete_range`` calls
(``cut_ranges``), whatever the number of keys.

A rescale from ``N`` to ``M`` partitions (``plan_rescale``) starts each new partition from the old partitions whose
ranges overlap its own: the one sharing most key groups is its base (its snapshot restored whole, then cut), the
others give only the key groups the new range takes from them.

``DEFAULT_KEY_GROUPS`` is 4096: a group may have up to ``MAX_PARTITIONS`` (200) partitions, and with 4096 key groups
the largest partition of any N <= 200 holds at most 1/20 (5%) more key groups than the smallest (with Flink's 128
the ratio reaches 2 at N = 100). More key groups cost blobstate nothing per key group: the prefix is two bytes
either way, a cut is two range deletions whatever K is, and no record lists key groups (Flink keeps an offset per
key group in each snapshot, which is why its default is small). The bound ``MAX_KEY_GROUPS`` is Flink's (32768),
the most two prefix bytes order as integers with room to spare.
"""

from __future__ import annotations

from dataclasses import dataclass

from blobstate.errors import ConfigurationError

DEFAULT_KEY_GROUPS = 4096
MAX_KEY_GROUPS = 1 << 15
KEY_GROUP_BYTES = 2  # the big-endian key-group prefix of every key of a key-grouped store


@dataclass(frozen=True, order=True)
class KeyGroupRange:
    """The key groups ``start .. stop - 1`` (half-open; empty when ``stop <= start``)."""

    start: int
    stop: int

    def __len__(self) -> int:
        return max(0, self.stop - self.start)

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group < self.stop

    def __and__(self, other: KeyGroupRange) -> KeyGroupRange:
        """The key groups both ranges hold (possibly empty)."""
        return KeyGroupRange(max(self.start, other.start), min(self.stop, other.stop))

    def __str__(self) -> str:
        return f"[{self.start}, {self.stop})"


def check_key_groups(key_groups: int, num_partitions: int) -> None:
    """``ConfigurationError`` unless ``1 <= num_partitions <= key_groups <= MAX_KEY_GROUPS``."""
    if isinstance(key_groups, bool) or not isinstance(key_groups, int) or not 1 <= key_groups <= MAX_KEY_GROUPS:
        raise ConfigurationError(f"key_groups must be an integer in 1..{MAX_KEY_GROUPS}, got {key_groups!r}")
    if not 1 <= num_partitions <= key_groups:
        raise ConfigurationError(
            f"num_partitions={num_partitions} with key_groups={key_groups}: a partition owns at least one key group, "
            f"so num_partitions must be 1..{key_groups} (the store's number of key groups is fixed when it is first "
            "written)")


def key_group_of_hash(spark_hash: int, key_groups: int) -> int:
    """The key group of a key whose Spark hash of the key columns is ``spark_hash`` (``pmod(spark_hash,
    key_groups)``, in 0..key_groups-1, for negative hashes too)."""
    return spark_hash % key_groups


def partition_of_key_group(key_group: int, key_groups: int, num_partitions: int) -> int:
    """The partition of ``num_partitions`` that owns ``key_group`` (``key_group * N // K``)."""
    return key_group * num_partitions // key_groups


def key_group_range(key_groups: int, num_partitions: int, partition: int) -> KeyGroupRange:
    """The key groups partition ``partition`` of ``num_partitions`` owns: ``[ceil(p*K/N), ceil((p+1)*K/N))``.
    Raises ``ConfigurationError`` for counts ``check_key_groups`` refuses or a partition outside 0..N-1."""
    check_key_groups(key_groups, num_partitions)
    if not 0 <= partition < num_partitions:
        raise ConfigurationError(f"partition {partition} of {num_partitions}")
    return KeyGroupRange(-(-partition * key_groups // num_partitions),
                         -(-(partition + 1) * key_groups // num_partitions))


def key_group_ranges(key_groups: int, num_partitions: int) -> tuple[KeyGroupRange, ...]:
    """Every partition's range, partition 0 first: contiguous, disjoint, covering ``0..key_groups-1``."""
    return tuple(key_group_range(key_groups, num_partitions, p) for p in range(num_partitions))


def prefix(key_group: int) -> bytes:
    """The ``KEY_GROUP_BYTES`` big-endian bytes every key of ``key_group`` starts with in a key-grouped store."""
    return key_group.to_bytes(KEY_GROUP_BYTES, "big")


def cut_ranges(keep: KeyGroupRange, key_groups: int) -> tuple[tuple[bytes, bytes], ...]:
    """The key ranges ``[begin, end)`` to delete from a key-grouped store so that it holds only the key groups of
    ``keep``: at most two, whatever the number of keys (``delete_range`` each). Nothing of a store with key groups
    lies outside ``[prefix(0), prefix(key_groups))``."""
    cuts = []
    if keep.start > 0:
        cuts.append((prefix(0), prefix(min(keep.start, key_groups))))
    if keep.stop < key_groups:
        cuts.append((prefix(max(keep.stop, 0)), prefix(key_groups)))
    return tuple(cuts)


@dataclass(frozen=True)
class RescaleSource:
    """An old partition a new one starts from, and the key groups it takes from it (``keep``, non-empty)."""

    partition: int
    keep: KeyGroupRange


@dataclass(frozen=True)
class PartitionRescale:
    """How new partition ``partition`` starts after a rescale: its ``range``, its ``base`` (the old partition sharing
    most of its key groups: its snapshot restored whole, then cut to ``range``) and the ``others`` whose key groups
    it takes besides (each only ``keep``), in partition order."""

    partition: int
    range: KeyGroupRange
    base: RescaleSource
    others: tuple[RescaleSource, ...]

    @property
    def sources(self) -> tuple[RescaleSource, ...]:
        """Every old partition it starts from, in partition order."""
        return tuple(sorted((self.base, *self.others), key=lambda s: s.partition))


def plan_rescale(key_groups: int, old_partitions: int, new_partitions: int) -> tuple[PartitionRescale, ...]:
    """The plan of a rescale from ``old_partitions`` to ``new_partitions`` of a store of ``key_groups`` key groups,
    new partition 0 first: every key group is kept by exactly one new partition, from the old partition that owned
    it. Raises ``ConfigurationError`` as ``check_key_groups`` for either count."""
    check_key_groups(key_groups, old_partitions)
    old = key_group_ranges(key_groups, old_partitions)
    plans = []
    for q, new in enumerate(key_group_ranges(key_groups, new_partitions)):
        first = partition_of_key_group(new.start, key_groups, old_partitions)
        last = partition_of_key_group(new.stop - 1, key_groups, old_partitions)
        sources = [RescaleSource(p, old[p] & new) for p in range(first, last + 1) if len(old[p] & new)]
        base = max(sources, key=lambda s: (len(s.keep), -s.partition))
        plans.append(PartitionRescale(q, new, base, tuple(s for s in sources if s is not base)))
    return tuple(plans)


__all__ = ["DEFAULT_KEY_GROUPS", "KEY_GROUP_BYTES", "MAX_KEY_GROUPS", "KeyGroupRange", "PartitionRescale",
           "RescaleSource", "check_key_groups", "cut_ranges", "key_group_of_hash", "key_group_range",
           "key_group_ranges", "partition_of_key_group", "plan_rescale", "prefix"]
