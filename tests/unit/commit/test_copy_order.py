"""Which source records a copy appends (``blobstate.commit.copy.to_copy``): only newer than what the target holds,
in the source's order, never one twice, up to ``--checkpoint``."""

from __future__ import annotations

from blobstate.commit.copy import to_copy
from blobstate.model.records import Checkpoint, StoreKey

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


def test_a_target_whose_records_the_source_pruned_gets_only_newer_ones():
    source = [rec(5), rec(6)]
    target = [rec(3).with_generation(1), rec(4, t=5500).with_generation(2)]
    assert ids(to_copy(source, target)[0]) == ["c6"]


def test_up_to_a_checkpoint():
    source = [rec(1), rec(2), rec(3)]
    assert ids(to_copy(source, [], source[1])[0]) == ["c1", "c2"]
