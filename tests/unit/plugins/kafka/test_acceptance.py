"""``blobstate.plugins.kafka.acceptance``: the pure fold of one partition's records: the first record is accepted,
then only generation + 1; a stale, duplicate or gapped generation is rejected for good; tombstones delete; a
malformed or foreign record is a ``CorruptIndexError``; an append's outcome decided by the same rule."""

from __future__ import annotations

import pytest

from blobstate.errors import CorruptIndexError, FencedError
from blobstate.model import layout
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugins.kafka.acceptance import (
    PartitionView,
    decide_after_read,
    decide_before_produce,
    parse_record_key,
    read_target,
    record_key,
)

KEY = StoreKey("job", "0", "counts")


def _cp(generation: int, checkpoint_id: str = "", writer: str = "w1") -> Checkpoint:
    return Checkpoint(store_key=KEY, checkpoint_id=checkpoint_id or f"1700000000000-{generation:08x}",
                      generation=generation, index_blob_id=layout.new_index_id(KEY), index_crc32c=1, index_size=10,
                      created_time_ms=1, writer_id=writer)


def _fold(*records: tuple[bytes, bytes | None]) -> PartitionView:
    view = PartitionView("topic", 0)
    for offset, (key, value) in enumerate(records):
        view.apply(offset, key, value)
    return view


def _put(cp: Checkpoint, token: str = "t") -> tuple[bytes, bytes]:
    return record_key(cp.store_key, cp.generation, token), cp.to_bytes()


def test_record_keys_round_trip_and_anything_else_is_not_ours():
    rkey = record_key(KEY, 7, "abc")
    assert rkey == b"job/0/counts/00000000000000000007/abc"
    assert parse_record_key(rkey) == (KEY, 7)
    for other in (b"job/0/counts/7/abc", b"job/0/counts/00000000000000000007/", b"a/b", b"\xff\xfe",
                  b"job/../counts/00000000000000000007/abc"):
        assert parse_record_key(other) is None


def test_only_the_next_generation_is_accepted_and_a_rejection_is_permanent():
    one, two, zombie_two, three, gap = _cp(1), _cp(2), _cp(2, "zombie-2"), _cp(3), _cp(5)
    view = _fold(_put(one), _put(two), _put(zombie_two, "z"), _put(gap, "g"), _put(three))
    state = view.state(KEY)
    assert [state.holder(g).checkpoint_id for g in (1, 2, 3)] == [one.checkpoint_id, two.checkpoint_id,
                                                                  three.checkpoint_id]
    assert state.last_generation == 3 and state.holder(5) is None
    assert state.rejected == {_put(zombie_two, "z")[0], _put(gap, "g")[0]}


def test_the_first_record_seen_after_compaction_is_accepted_at_any_generation():
    view = _fold(_put(_cp(40)), _put(_cp(41)))
    assert view.state(KEY).last_generation == 41


def test_a_producer_retry_of_the_accepted_record_changes_nothing():
    view = _fold(_put(_cp(1)), _put(_cp(1)), _put(_cp(2)))
    assert view.state(KEY).last_generation == 2 and view.state(KEY).rejected == set()


def test_a_tombstone_deletes_the_record_and_the_generation_count_survives_it():
    one, two = _cp(1), _cp(2)
    view = _fold(_put(one), _put(two), (_put(one)[0], None), _put(_cp(1, "late-1"), "late"))
    state = view.state(KEY)
    assert state.holder(1) is None and state.holder(2).checkpoint_id == two.checkpoint_id
    assert state.last_generation == 2 and _put(_cp(1), "late")[0] in state.rejected


def test_a_malformed_record_or_a_foreign_key_is_corrupt_until_tombstoned():
    bad = (record_key(KEY, 1, "x"), b"{not json")
    view = _fold(bad)
    with pytest.raises(CorruptIndexError):
        view.state(KEY)
    view.apply(1, bad[0], None)
    assert view.state(KEY).last_generation == 0
    view.apply(2, b"something-else", b"value")
    with pytest.raises(CorruptIndexError, match="is not job/task/store/generation/token"):
        view.state(KEY)
    view.apply(3, b"something-else", None)
    view.state(KEY)


def test_a_record_under_another_generations_key_is_corrupt():
    cp = _cp(2)
    view = _fold((record_key(KEY, 3, "t"), cp.to_bytes()))
    with pytest.raises(CorruptIndexError, match="holds generation 2"):
        view.state(KEY)


def test_before_producing_a_re_append_finds_its_record_and_a_stale_writer_is_fenced():
    state = _fold(_put(_cp(1)), _put(_cp(2, "mine"))).state(KEY)
    assert decide_before_produce(state, _cp(2, "mine"), 1).checkpoint_id == "mine"
    assert decide_before_produce(state, _cp(3), 2) is None
    with pytest.raises(FencedError) as fenced:
        decide_before_produce(state, _cp(2, "theirs"), 1)
    assert (fenced.value.expected, fenced.value.actual) == (1, 2)


def test_after_reading_ours_is_found_nothing_landed_is_none_and_another_writers_record_fences():
    state = _fold(_put(_cp(1)), _put(_cp(2, "mine"))).state(KEY)
    assert decide_after_read(state, _cp(2, "mine"), 1).checkpoint_id == "mine"
    assert decide_after_read(state, _cp(3), 2) is None
    with pytest.raises(FencedError, match="appended generation 2 of job/0/counts first"):
        decide_after_read(state, _cp(2, "theirs", writer="w2"), 1)
    pruned = _fold(_put(_cp(1)), _put(_cp(2)), (_put(_cp(1))[0], None)).state(KEY)
    with pytest.raises(FencedError, match="no longer retained"):
        decide_after_read(pruned, _cp(1, "mine"), 0)


@pytest.mark.parametrize(("committed", "high", "next_offset", "target"), [
    (10, 12, 5, 10),   # a plausible last stable offset is trusted
    (0, 0, 0, 0),      # an empty partition
    (0, 12, 0, 12),    # 0 with records present: an open transaction (tansu), wait for the high watermark
    (3, 12, 5, 12),    # below what was already read: the same
])
def test_the_read_target(committed, high, next_offset, target):
    assert read_target(committed, high, next_offset) == target
