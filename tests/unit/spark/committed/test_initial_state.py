"""Pure logic of an initial state (issue 32, bootstrap): the record of the state before batch 0
(``write_state(initial_state=True)``: batch -1, no query, a lineage of its own), which query adopts it
(``blobstate.spark.committed.alignment.plan_alignment``), how the adopting run's records chain onto it and nothing
else's do (``blobstate.model.chain.current_run``), and what retention keeps. No Spark: records built in memory."""

from __future__ import annotations

from dataclasses import replace

import pytest

from blobstate.errors import CorruptIndexError
from blobstate.model.chain import INITIAL_BATCH, is_initial, partition_history, plan_chain, retention
from blobstate.model.records import DELTA, GROUP, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.committed.alignment import plan_alignment
from blobstate.spark.errors import SparkAlignmentError

KEY = StoreKey("flights", "0", "stats")
GKEY = StoreKey("flights", "group", "routes")
Q1, Q2 = "11111111-0000-4000-8000-000000000001", "22222222-0000-4000-8000-000000000002"
X = "0123456789abcdef0123456789abcdef"  # the initial state's lineage


def snap(gen: int, batch: int, query: str = "", lineage: str = "") -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch,
                      query_id=query, lineage_id=lineage)


def delta(gen: int, batch: int, query: str, lineage: str) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA,
                      changelog_blob_id=f"{KEY.prefix}/blobs/{gen:032x}", changelog_crc32c=7, changelog_size=5,
                      query_id=query, lineage_id=lineage)


def initial(gen: int = 1) -> Checkpoint:
    return snap(gen, INITIAL_BATCH, "", X)


def plan(history, last, query=Q1):
    return plan_alignment(history, KEY, last_committed=last, query_id=query, location="/ck/new",
                          repo_url="file:///r")


def test_a_new_query_adopts_an_initial_state_and_begins_a_run_from_it():
    p = plan([initial()], None)
    assert p.adopted and p.chain.snapshot.checkpoint_id == "s1" and p.chain.deltas == ()
    assert p.restored_batch == INITIAL_BATCH  # the engine expects batch 0 next
    assert p.lineage_id.startswith(X + ".") and p.lineage_id != X + "."
    assert "initial state" in p.describe()
    # an empty store still starts empty, a run of its own
    empty = plan([], None)
    assert not empty.adopted and empty.chain is None and "." not in empty.lineage_id


def test_the_adopting_runs_deltas_chain_onto_the_initial_state_and_a_restart_restores_them():
    run = plan([initial()], None).lineage_id
    history = [initial(), delta(2, 0, Q1, run), delta(3, 1, Q1, run)]
    restart = plan(history, 1)
    assert restart.chain.snapshot.checkpoint_id == "s1"
    assert [d.batch_id for d in restart.chain.deltas] == [0, 1]
    assert restart.lineage_id == run and not restart.adopted
    # later, its own snapshot of batch 1 replaces the initial state as the chain's base
    later = plan([*history, snap(4, 1, Q1, run), delta(5, 2, Q1, run)], 2)
    assert later.chain.snapshot.checkpoint_id == "s4" and [d.batch_id for d in later.chain.deltas] == [2]


def test_once_the_adopting_query_committed_another_new_query_is_refused():
    run = plan([initial()], None).lineage_id
    history = [initial(), delta(2, 0, Q1, run)]
    with pytest.raises(SparkAlignmentError, match=Q1):
        plan(history, None, query=Q2)
    # before any commit both may restore it: the first commit fences the other (the pinned generation)
    assert plan([initial()], None, query=Q2).adopted


def test_a_query_with_committed_batches_is_unaffected_by_an_initial_record_its_run_did_not_begin_from():
    plain = "fedcba9876543210fedcba9876543210"  # a run begun from the empty state
    history = [initial(), delta(2, 0, Q1, plain), delta(3, 1, Q1, plain)]
    p = plan(history, 1)
    assert p.chain.snapshot is None and [d.batch_id for d in p.chain.deltas] == [0, 1]  # the empty state + deltas
    with_snapshot = plan([*history, snap(4, 0, Q1, plain)], 1)
    assert with_snapshot.chain.snapshot.checkpoint_id == "s4"
    # a lineage that merely starts with the same characters is not begun from it
    assert plan([initial(), delta(2, 0, Q1, X + "0")], 0).chain.snapshot is None


def test_committed_batches_with_only_an_initial_state_are_refused():
    with pytest.raises(SparkAlignmentError, match="initial state"):
        plan([initial()], 3)


def test_a_reset_of_the_adopting_query_begins_again_from_the_initial_state_never_from_the_abandoned_run():
    first = plan([initial()], None).lineage_id
    history = [initial(), delta(2, 0, Q1, first), delta(3, 1, Q1, first), snap(4, 1, Q1, first)]
    again = plan(history, None)  # Spark's offsets deleted (or batch 0 never committed): batch 0 again
    assert again.adopted and again.abandoned == 3 and again.lineage_id != first
    assert again.chain.snapshot.checkpoint_id == "s1"
    history.append(delta(5, 0, Q1, again.lineage_id))
    chain = plan(history, 0).chain
    assert chain.snapshot.checkpoint_id == "s1" and [d.checkpoint_id for d in chain.deltas] == ["d5"]


def test_retention_keeps_the_initial_snapshot_while_a_chain_needs_it():
    run = plan([initial()], None).lineage_id
    history = [initial(), delta(2, 0, Q1, run), delta(3, 1, Q1, run)]
    assert retention(history, 2) == ([], history)
    history.append(snap(4, 0, Q1, run))  # snapshots of batches -1 and 0: retain 2 keeps both
    assert retention(history, 2) == ([], history)
    history += [snap(5, 1, Q1, run), delta(6, 2, Q1, run)]  # batch 1's snapshot: the initial state is not needed
    expiring, kept = retention(history, 2)
    assert [cp.checkpoint_id for cp in expiring] == ["s1", "d2"]
    assert plan_chain(kept, 2).snapshot.checkpoint_id == "s5"


def _group(gen: int, batch: int, kind: str, query: str, lineage: str, partitions: int = 2) -> Checkpoint:
    def blob(p: int) -> str:
        return (f"{GKEY.prefix}/indexes/{gen:030x}{p:02x}.json" if kind == SNAPSHOT
                else f"{GKEY.prefix}/blobs/{gen:030x}{p:02x}")

    entries = tuple(PartitionEntry(p, kind, f"g{gen}p{p}", batch, blob(p), 1, 10) for p in range(partitions))
    return Checkpoint(GKEY, f"g{gen}", gen, "", 0, 0, 0, batch, kind=GROUP, query_id=query, lineage_id=lineage,
                      num_partitions=partitions, partitions=entries)


def test_a_group_initial_state_is_adopted_partition_by_partition_and_round_trips_as_a_record():
    boot = _group(1, INITIAL_BATCH, SNAPSHOT, "", X)
    assert Checkpoint.from_bytes(boot.to_bytes()) == replace(boot, schema_version=3) and is_initial(boot)
    plans = [plan_alignment(partition_history([boot], p), GKEY, last_committed=None, query_id=Q1,
                            location="/ck", repo_url="file:///r") for p in range(2)]
    assert all(p.adopted and p.chain.snapshot.checkpoint_id == f"g1p{i}" for i, p in enumerate(plans))
    run = plans[0].lineage_id
    history = [boot, _group(2, 0, DELTA, Q1, run), _group(3, 1, DELTA, Q1, run)]
    for p in range(2):
        chain = plan_alignment(partition_history(history, p), GKEY, last_committed=1, query_id=Q1, location="/ck",
                               repo_url="file:///r").chain
        assert chain.snapshot.checkpoint_id == f"g1p{p}" and [d.batch_id for d in chain.deltas] == [0, 1]
    assert retention(history, 2) == ([], history)
    with pytest.raises(SparkAlignmentError, match=Q1):
        plan_alignment(partition_history(history, 0), GKEY, last_committed=None, query_id=Q2, location="/ck",
                       repo_url="file:///r")


def test_a_batch_id_below_the_initial_state_is_a_corrupt_record():
    data = initial().to_bytes()
    assert Checkpoint.from_bytes(data).batch_id == INITIAL_BATCH
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(data.replace(b'"batchId":-1', b'"batchId":-2'))
