"""Which source records a copy appends (``blobstate.commit.copy.to_copy``): only newer than what the target holds,
in the source's order, never one twice, up to ``--checkpoint``."""

from __future__ import annotations

import pytest

from blobstate.commit.copy import to_copy
from blobstate.errors import DivergedTargetError
from blobstate.model.records import GROUP, Checkpoint, StoreKey

KEY = StoreKey("j", "0", "s")


def rec(gen: int, t: int | None = None) -> Checkpoint:
    return Checkpoint(KEY, f"c{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, t or gen * 1000)


def ids(records):
    return [cp.checkpoint_id for cp in records]


def test_an_empty_target_gets_every_record_in_order():
    source = [rec(1), rec(2), rec(3)]
    assert [ids(part) for part in to_copy(source, [])] == [["c1", "c2", "c3"], [], []]


def test_only_records_after_the_newest_one_the_target_holds_never_one_twice():
    source = [rec(1), rec(2), rec(3), rec(4)]
    target = [rec(1).with_generation(1), rec(3).with_generation(2)]  # c2 was pruned at the target: not brought back
    fresh, present, skipped = to_copy(source, target)
    assert (ids(fresh), ids(present), ids(skipped)) == (["c4"], ["c1", "c3"], ["c2"])
    assert ids(to_copy(source, target + [rec(4).with_generation(3)])[0]) == []  # a rerun: nothing new


def test_a_target_whose_records_the_source_pruned_gets_the_records_after_its_newest():
    source = [rec(5), rec(6)]
    target = [rec(3).with_generation(1), rec(4).with_generation(2)]
    assert ids(to_copy(source, target, follows=lambda: target[-1].index_blob_id)[0]) == ["c5", "c6"]


def test_a_target_sharing_nothing_with_the_source_is_refused_unless_the_sources_oldest_follows_its_newest():
    source = [rec(5), rec(6)]
    target = [rec(3).with_generation(1), rec(4).with_generation(2)]
    for follows in (None, lambda: None, lambda: target[0].index_blob_id):  # unknown, first snapshot, an older one
        with pytest.raises(DivergedTargetError) as refused:
            to_copy(source, target, follows=follows)
        assert refused.value.exit_code == 4 and refused.value.own == ("c3", "c4")
        assert "c4 (generation 2" in str(refused.value) and "copy the other way" in str(refused.value)


def test_a_target_that_took_its_own_record_after_the_last_shared_one_is_refused():
    source = [rec(1), rec(2), rec(3)]
    own = Checkpoint(KEY, "t9", 3, f"{KEY.prefix}/indexes/{99:032x}.json", 1, 10, 2500)
    target = [rec(1).with_generation(1), rec(2).with_generation(2), own]
    with pytest.raises(DivergedTargetError) as refused:
        to_copy(source, target)
    assert refused.value.own == ("t9",) and "after checkpoint c2" in str(refused.value)


def test_a_void_record_of_the_targets_own_is_no_divergence_and_an_empty_source_copies_nothing():
    source = [rec(1), rec(2)]
    void = Checkpoint(KEY, "v", 2, "", 0, 0, 1500, kind=GROUP, voids=("c1",))
    assert ids(to_copy(source, [rec(1).with_generation(1), void])[0]) == ["c2"]
    assert to_copy([], [rec(1).with_generation(1)]) == ([], [], [])


def test_up_to_a_checkpoint():
    source = [rec(1), rec(2), rec(3)]
    assert ids(to_copy(source, [], source[1])[0]) == ["c1", "c2"]
