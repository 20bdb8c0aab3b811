"""The Align door (``blobstate.model.align``): which state a batch or a reader sees. Pure: records built in memory.

Issue 39 case 4: a store whose newest record is a snapshot of batch 2 was accepted as the state after batch 4
(``plan_chain``'s log-without-deltas branch let the older snapshot stand for the batch asked for); case 6: a reader
without the engine's commit log read a batch the engine never committed."""

from __future__ import annotations

import pytest

from blobstate.errors import BrokenChainError, NothingToRestore
from blobstate.model.align import (
    UNCONFIRMED,
    BatchNotCommitted,
    EngineLog,
    StateNotHeld,
    align,
    chain_to,
    ends_at,
    engine_batch,
    spark_done,
)
from blobstate.model.chain import INITIAL_BATCH, plan_chain
from blobstate.model.records import DELTA, Checkpoint, StoreKey

KEY = StoreKey("j", "0", "s")
Q = "11111111-0000-4000-8000-000000000001"


def snap(gen: int, batch: int | None, query: str = Q, lineage: str = "") -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch, query_id=query,
                      lineage_id=lineage)


def delta(gen: int, batch: int, query: str = Q) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA, changelog_blob_id=f"{KEY.prefix}/blobs/"
                      f"{gen:032x}", changelog_crc32c=7, changelog_size=5, query_id=query)


def spark(done: int | None, query: str | None = Q) -> EngineLog:
    return EngineLog(done, "Spark's checkpoint location /ck", query)


def test_a_snapshot_of_an_older_batch_never_stands_for_a_later_one():
    history = [snap(1, 2)]  # write_state or a rescale at batch 2; Spark went on to batch 4 on the old store
    assert plan_chain(history, 4).upto == 2  # the planner says what it holds, a bound, not the batch asked for
    with pytest.raises(StateNotHeld, match=r"after batch 4 is needed.*after batch 2 at most.*snapshots of batches "
                                           r"\[2\]") as info:
        align(history, engine=spark(4))
    assert (info.value.needed, info.value.exit_code) == (4, 5)
    with pytest.raises(StateNotHeld):
        chain_to(history, 3)
    sight = align(history, engine=spark(2))
    assert (sight.chain.snapshot, sight.batch, sight.confirmed) == (history[0], 2, True)


def test_deltas_after_the_snapshot_reach_the_batch_and_a_gap_is_refused():
    history = [snap(1, 2), delta(2, 3), delta(3, 4)]
    sight = align(history, engine=spark(4))
    assert ends_at(sight.chain) == 4 and [d.batch_id for d in sight.chain.deltas] == [3, 4]
    with pytest.raises(BrokenChainError, match="batch 5"):
        align(history, engine=spark(5))


def test_a_batch_the_engine_did_not_commit_is_never_read_with_its_log():
    history = [delta(1, 0), delta(2, 1), delta(3, 2)]  # batch 2's commit point passed; its sink failed
    assert align(history, engine=spark(1)).batch == 1
    assert align(history).batch == 2 and not align(history).confirmed  # the newest: unconfirmed
    assert align(history).unconfirmed_engine_state and "re-runs" in UNCONFIRMED
    with pytest.raises(BatchNotCommitted, match=r"batch 2 was asked for.*committed batches up to 1"):
        align(history, engine=spark(1), batch=2)
    assert align(history, engine=spark(1), batch=0).batch == 0
    assert engine_batch(spark(None), None) == INITIAL_BATCH


def test_an_engine_that_committed_nothing_sees_the_initial_state_or_the_empty_one():
    assert align([delta(1, 0)], engine=spark(None)).chain.records == []
    initial = snap(1, INITIAL_BATCH, "", "x")
    sight = align([initial], engine=spark(None))
    assert sight.chain.snapshot == initial and sight.batch == INITIAL_BATCH


def test_records_of_another_query_are_not_the_engines_state():
    with pytest.raises(StateNotHeld, match="query other.*belongs to query"):
        align([delta(1, 0, "other")], engine=spark(0))
    assert align([delta(1, 0, "other")], engine=spark(0, None)).batch == 0  # an engine log that names no query


def test_a_plain_backup_has_no_batch_and_is_no_engines_state():
    history = [snap(1, None, ""), snap(2, None, "")]
    sight = align(history)
    assert sight.chain.snapshot == history[-1] and sight.batch is None and not sight.unconfirmed_engine_state
    with pytest.raises(NothingToRestore):
        align([], engine=spark(3))


def test_spark_done_takes_planned_offsets_ahead_of_commits_as_done_but_one():
    assert spark_done(None, None) is None and spark_done(1, 2) == 1 and spark_done(1, 4) == 3
    assert spark_done(3, None) == 3 and spark_done(None, 0) is None
