"""``blobstate.model.chain`` under Hypothesis: logs written the way a writer writes them (a delta per batch, a batch
re-run after a crash, background snapshots of earlier batches landing late), then the state a chain restores is
the state the batches made, and retention never takes away a state it keeps; plus group retention by partition."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import NothingToRestore
from blobstate.model.chain import (
    BrokenChainError,
    Chain,
    has_deltas,
    latest_deltas,
    latest_snapshot,
    partition_history,
    partitions_of,
    plan_chain,
    retention,
    valid_snapshots,
)
from blobstate.model.records import DELTA, GROUP, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KEY = StoreKey("j", "0", "s")


def snap(gen: int, batch: int | None) -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch)


def delta(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA,
                      changelog_blob_id=f"{KEY.prefix}/blobs/{gen:032x}", changelog_crc32c=7, changelog_size=5)


@st.composite
def writer_logs(draw) -> list[Checkpoint]:
    """A log as one writer appends it: the next batch's delta, a re-run of the last batch (a second delta of the
    same batch id), or a snapshot of any batch already committed landing now."""
    history: list[Checkpoint] = []
    top = -1
    for step in draw(st.lists(st.sampled_from(["next", "next", "rerun", "snapshot"]), max_size=30)):
        gen = len(history) + 1
        if step == "next" or top < 0:
            top += 1
            history.append(delta(gen, top))
        elif step == "rerun":
            history.append(delta(gen, top))
        else:
            history.append(snap(gen, draw(st.integers(0, top))))
    return history


def batch_runs(history: list[Checkpoint], upto: int) -> dict[int, int]:
    """What the state after batch ``upto`` is made of: ``{batch: generation of the run that counts}``."""
    return {b: d.generation for b, d in latest_deltas(history).items() if b <= upto}


def restored_runs(history: list[Checkpoint], chain: Chain) -> dict[int, int]:
    """What ``chain`` restores: the runs its snapshot held when it was taken, then its deltas."""
    runs: dict[int, int] = {}
    if chain.snapshot is not None:
        taken = [cp for cp in history if cp.generation < chain.snapshot.generation]
        runs.update(batch_runs(taken, chain.snapshot.batch_id))
    runs.update({d.batch_id: d.generation for d in chain.deltas})
    return runs


@FAST
@given(writer_logs())
def test_every_chain_restores_exactly_the_runs_that_made_the_state(history):
    tops = [cp.batch_id for cp in history if cp.is_delta]
    for upto in range(max(tops, default=-1) + 1):
        chain = plan_chain(history, upto)
        start = chain.snapshot.batch_id + 1 if chain.snapshot else 0
        assert [d.batch_id for d in chain.deltas] == list(range(start, upto + 1))
        assert restored_runs(history, chain) == batch_runs(history, upto)
        assert chain.records == ([chain.snapshot] if chain.snapshot else []) + list(chain.deltas)
        assert chain.changelog_bytes == 5 * len(chain.deltas)
    if history:
        assert plan_chain(history).upto == max(tops)
    else:
        with pytest.raises(NothingToRestore):
            plan_chain(history)


@FAST
@given(writer_logs(), st.integers(1, 4))
def test_retention_expires_a_prefix_and_keeps_every_state_after_its_oldest_snapshot(history, retain):
    expiring, retained = retention(history, retain)
    assert expiring + retained == history
    assert not expiring or not retained or expiring[-1].generation < retained[0].generation
    valid = valid_snapshots(history)
    if len(valid) < retain:
        assert expiring == []
        return
    oldest = valid[-retain]
    assert len(valid_snapshots(retained)) >= retain
    for upto in range(oldest.batch_id, max(d.batch_id for d in history if d.is_delta) + 1):
        assert plan_chain(retained, upto) == plan_chain(history, upto)


@FAST
@given(writer_logs())
def test_a_snapshot_is_valid_unless_a_later_run_of_a_batch_it_covers_replaced_it(history):
    valid = {cp.generation for cp in valid_snapshots(history)}
    for s in (cp for cp in history if cp.kind == SNAPSHOT):
        overridden = any(d.is_delta and d.batch_id <= s.batch_id and d.generation > s.generation for d in history)
        assert (s.generation in valid) == (not overridden)
    latest = latest_snapshot(history)
    assert latest is None or (latest.batch_id, latest.generation) == max(
        (cp.batch_id, cp.generation) for cp in valid_snapshots(history))


def test_a_broken_chain_names_the_missing_batch_and_what_is_retained():
    history = [delta(1, 0), delta(2, 1), delta(3, 2), delta(4, 3), delta(5, 7), delta(6, 9), delta(7, 10)]
    with pytest.raises(BrokenChainError, match=r"first: batch 4.*deltas of batches 0-3, 7, 9-10") as caught:
        plan_chain(history, 10)
    assert isinstance(caught.value, NothingToRestore)  # exit code 5, like nothing to restore


def test_a_chain_describes_itself():
    assert plan_chain([delta(1, 0)], 0).describe() == "the empty state + 1 deltas (batches 0..0)"
    chain = plan_chain([delta(1, 0), snap(2, 0), delta(3, 1), delta(4, 2)], 2)
    assert chain.describe() == "snapshot s2 (batch 0) + 2 deltas (batches 1..2)"
    assert plan_chain([snap(1, 4)]).describe() == "snapshot s1 (batch 4)"


def test_a_log_without_deltas_keeps_its_newest_records():
    history = [snap(1, 0), snap(2, 1), snap(3, 2)]
    assert not has_deltas(history)
    assert retention(history, 0) == (history[:2], history[2:])  # at least one is always kept
    assert plan_chain(history, 1).snapshot.generation == 2


def group(gen: int, *entries: tuple[int, str, int], partitions: int = 2) -> Checkpoint:
    parts = tuple(PartitionEntry(p, kind, f"g{gen}p{p}{kind[0]}", batch,
                                 f"{KEY.prefix}/{'blobs' if kind == DELTA else 'indexes'}/{gen:016x}{p:016x}"
                                 + ("" if kind == DELTA else ".json"), 1, 1) for p, kind, batch in entries)
    return Checkpoint(KEY, f"g{gen}", gen, "", 0, 0, 0, max(b for _, _, b in entries), kind=GROUP,
                      num_partitions=partitions, partitions=parts)


def test_group_retention_keeps_every_record_the_slowest_partition_needs():
    history = [
        group(1, (0, DELTA, 0), (1, DELTA, 0)),
        group(2, (0, DELTA, 1), (1, DELTA, 1), (0, SNAPSHOT, 0)),
        group(3, (0, DELTA, 2), (1, DELTA, 2), (1, SNAPSHOT, 1)),
        group(4, (0, DELTA, 3), (1, DELTA, 3), (0, SNAPSHOT, 2)),
    ]
    assert partitions_of(history) == [0, 1]
    assert [cp.batch_id for cp in partition_history(history, 1)] == [0, 1, 2, 1, 3]
    expiring, retained = retention(history, 1)
    # partition 0 needs its snapshot of batch 2 (generation 4); partition 1 its snapshot of batch 1 (generation 3)
    assert [cp.generation for cp in expiring] == [1, 2] and [cp.generation for cp in retained] == [3, 4]
    assert plan_chain(partition_history(retained, 1), 3).snapshot.batch_id == 1
    assert retention(history[:1], 1) == ([], history[:1])  # no partition has a snapshot yet: keep everything


def test_a_voided_group_counts_for_no_partition_until_its_batch_runs_again():
    """Issue 39 case 7: a group record that a later void record names (``Checkpoint.voids``) is in no partition's
    records; the state is the one before its batch until a new group of that batch lands, and its parts are needed
    by nothing (``overridden_parts``)."""
    from dataclasses import replace

    from blobstate.model.chain import expand_all, overridden_parts, voided

    lost = group(3, (0, DELTA, 2), (1, DELTA, 2), (1, SNAPSHOT, 1))
    void = replace(group(4, (0, DELTA, 2)), partitions=(), voids=(lost.checkpoint_id,))
    history = [group(1, (0, DELTA, 0), (1, DELTA, 0)), group(2, (0, DELTA, 1), (1, DELTA, 1)), lost, void]
    assert voided(history) == {"g3"} and voided(history[:3]) == set()
    for p in (0, 1):
        assert [cp.batch_id for cp in partition_history(history, p)] == [0, 1]
        assert plan_chain(partition_history(history, p)).upto == 1
    assert not {cp.checkpoint_id for cp in expand_all(history)} & {e.checkpoint_id for e in lost.partitions}
    assert overridden_parts(history) == {e.checkpoint_id for e in lost.partitions}
    rerun = history + [group(5, (0, DELTA, 2), (1, DELTA, 2))]
    assert [d.generation for d in plan_chain(partition_history(rerun, 1)).deltas] == [1, 2, 5]
    _, retained = retention(rerun, 3)
    assert retained == rerun  # no snapshot yet: every record stays, the void with the group it voids
