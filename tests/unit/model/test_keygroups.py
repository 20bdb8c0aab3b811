"""Key groups (``blobstate.model.keygroups``): ranges per partition and the plan of a rescale. Pure.

The properties are checked by hypothesis over every count a group may have, and exhaustively for the small ones:
every key group owned by exactly one partition for any N, and kept by exactly one new partition, from the old
partition that owned it, for any N -> M."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.errors import ConfigurationError
from blobstate.model.keygroups import (
    DEFAULT_KEY_GROUPS,
    KEY_GROUP_BYTES,
    MAX_KEY_GROUPS,
    KeyGroupRange,
    check_key_groups,
    cut_ranges,
    key_group_of_hash,
    key_group_range,
    key_group_ranges,
    partition_of_key_group,
    plan_rescale,
    prefix,
)
from blobstate.model.records import MAX_PARTITIONS


@st.composite
def counts(draw: st.DrawFn) -> tuple[int, int, int]:
    """``(K, N, M)``: a number of key groups and two partition counts it allows."""
    k = draw(st.one_of(st.integers(1, 300), st.sampled_from([DEFAULT_KEY_GROUPS, MAX_KEY_GROUPS]),
                       st.integers(1, MAX_KEY_GROUPS)))
    most = min(k, 1000)
    return k, draw(st.integers(1, most)), draw(st.integers(1, most))


def owners(k: int, n: int) -> list[int]:
    """For each key group, the partition whose range holds it (-1: none; raises on two)."""
    owner = [-1] * k
    for p, r in enumerate(key_group_ranges(k, n)):
        for g in range(r.start, r.stop):
            assert owner[g] == -1, f"key group {g} in partitions {owner[g]} and {p}"
            owner[g] = p
    return owner


def check_ranges(k: int, n: int) -> None:
    ranges = key_group_ranges(k, n)
    assert len(ranges) == n
    assert ranges[0].start == 0 and ranges[-1].stop == k
    for a, b in zip(ranges, ranges[1:], strict=False):
        assert a.stop == b.start  # contiguous and disjoint
    sizes = {len(r) for r in ranges}
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1
    owner = owners(k, n)
    assert owner == [partition_of_key_group(g, k, n) for g in range(k)]


def check_plan(k: int, n: int, m: int) -> None:
    old, new = key_group_ranges(k, n), key_group_ranges(k, m)
    kept_by = [-1] * k
    plans = plan_rescale(k, n, m)
    assert [p.partition for p in plans] == list(range(m))
    for plan in plans:
        assert plan.range == new[plan.partition]
        covered = 0
        for source in plan.sources:
            assert len(source.keep) > 0
            assert source.keep.start >= old[source.partition].start and source.keep.stop <= old[source.partition].stop
            assert source.keep.start >= plan.range.start and source.keep.stop <= plan.range.stop
            for g in range(source.keep.start, source.keep.stop):
                assert kept_by[g] == -1, f"key group {g} kept by new partitions {kept_by[g]} and {plan.partition}"
                kept_by[g] = plan.partition
            covered += len(source.keep)
        assert covered == len(plan.range)
        assert len(plan.base.keep) == max(len(s.keep) for s in plan.sources)
        assert plan.base not in plan.others
    assert kept_by == [partition_of_key_group(g, k, m) for g in range(k)]


@settings(max_examples=100, deadline=None)
@given(counts())
def test_every_key_group_is_owned_by_exactly_one_partition_for_any_n(kn: tuple[int, int, int]) -> None:
    k, n, _ = kn
    check_ranges(k, n)


@settings(max_examples=100, deadline=None)
@given(counts())
def test_every_key_group_is_kept_exactly_once_after_any_rescale(knm: tuple[int, int, int]) -> None:
    check_plan(*knm)


def test_every_small_count_and_rescale_exhaustively() -> None:
    for k in range(1, 17):
        for n in range(1, k + 1):
            check_ranges(k, n)
            for m in range(1, k + 1):
                check_plan(k, n, m)


def test_the_default_keeps_any_group_size_within_5_percent() -> None:
    assert DEFAULT_KEY_GROUPS >= MAX_PARTITIONS
    for n in range(1, MAX_PARTITIONS + 1):
        sizes = [len(r) for r in key_group_ranges(DEFAULT_KEY_GROUPS, n)]
        assert max(sizes) / min(sizes) <= 1.05


def test_the_known_ranges_of_flinks_assignment() -> None:
    # partition p owns [ceil(p*K/N), ceil((p+1)*K/N)): 128 over 3 is 43, 43, 42
    assert key_group_ranges(128, 3) == (KeyGroupRange(0, 43), KeyGroupRange(43, 86), KeyGroupRange(86, 128))
    assert key_group_range(128, 4, 1) == KeyGroupRange(32, 64)


def test_a_negative_spark_hash_lands_in_range_as_pmod_does() -> None:
    assert key_group_of_hash(-1, 128) == 127
    assert key_group_of_hash(-(2**31), 4096) == 0
    assert key_group_of_hash(2**31 - 1, 4096) == 4095
    assert key_group_of_hash(5, 4096) == 5


def test_scale_out_4_to_8_starts_each_new_partition_from_exactly_one_old_one() -> None:
    plans = plan_rescale(128, 4, 8)
    assert [(p.base.partition, p.others) for p in plans] == [(q // 2, ()) for q in range(8)]


def test_scale_in_8_to_3_takes_the_largest_overlap_as_base() -> None:
    plans = plan_rescale(128, 8, 3)
    # new 0 = [0, 43): old 0 [0,16), old 1 [16,32), old 2 [32,48) gives 11
    assert plans[0].range == KeyGroupRange(0, 43)
    assert plans[0].base.partition == 0
    assert [(s.partition, s.keep) for s in plans[0].sources] == [
        (0, KeyGroupRange(0, 16)), (1, KeyGroupRange(16, 32)), (2, KeyGroupRange(32, 43))]
    # new 1 = [43, 86): old 2 gives 5, old 3 and 4 give 16 each, old 5 gives 6: the base is the first largest
    assert plans[1].base.partition == 3


def test_a_prefix_orders_key_groups_as_integers_and_the_cut_leaves_only_the_range() -> None:
    k = 300
    keys = sorted(prefix(g) + suffix for g in range(k) for suffix in (b"", b"\x00", b"\xff" * 3))
    assert [int.from_bytes(key[:KEY_GROUP_BYTES], "big") for key in keys] == sorted(
        int.from_bytes(key[:KEY_GROUP_BYTES], "big") for key in keys)
    for keep in (KeyGroupRange(0, k), KeyGroupRange(0, 1), KeyGroupRange(7, 8), KeyGroupRange(100, 300),
                 KeyGroupRange(299, 300), KeyGroupRange(1, 299)):
        cuts = cut_ranges(keep, k)
        left = [key for key in keys if not any(lo <= key < hi for lo, hi in cuts)]
        assert {int.from_bytes(key[:KEY_GROUP_BYTES], "big") for key in left} == set(range(keep.start, keep.stop))
        assert len(cuts) <= 2
    assert cut_ranges(KeyGroupRange(0, k), k) == ()


@pytest.mark.parametrize(("k", "n"), [(0, 1), (MAX_KEY_GROUPS + 1, 1), (8, 9), (8, 0), (True, 1), (8.0, 1)])
def test_counts_outside_the_bounds_are_refused(k: object, n: int) -> None:
    with pytest.raises(ConfigurationError):
        check_key_groups(k, n)  # type: ignore[arg-type]
    if isinstance(k, int) and not isinstance(k, bool):
        with pytest.raises(ConfigurationError):
            plan_rescale(k, n, 1)


def test_a_partition_outside_the_count_is_refused() -> None:
    with pytest.raises(ConfigurationError):
        key_group_range(128, 4, 4)
