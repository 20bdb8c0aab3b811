"""When a local copy (a primary's, a standby's, a hand-over's seed) may be used, and from which batch it is caught up
(``blobstate.model.local_copy.first_batch_to_apply``): only at the committed record, never behind it unapplied, ahead
of it, at a superseded attempt or across a gap."""

from __future__ import annotations

from blobstate.model.align import chain_to
from blobstate.model.chain import current_run, latest_deltas
from blobstate.model.local_copy import first_batch_to_apply
from blobstate.model.records import DELTA, Checkpoint, StoreKey

KEY = StoreKey("j", "0", "s")


def snap(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"s{gen}", gen, f"{KEY.prefix}/indexes/{gen:032x}.json", 1, 10, 0, batch, query_id="q")


def delta(gen: int, batch: int) -> Checkpoint:
    return Checkpoint(KEY, f"d{gen}", gen, "", 0, 0, 0, batch, kind=DELTA, changelog_blob_id=f"{KEY.prefix}/blobs/"
                      f"{gen:032x}", changelog_crc32c=7, changelog_size=5, query_id="q")


def at(record: Checkpoint) -> dict:
    """The marker of a copy at ``record`` (as ``LocalPartition._mark`` writes it)."""
    return {"checkpointId": record.checkpoint_id, "batchId": record.batch_id}


EMPTY = {"checkpointId": "", "batchId": None}


def decide(marker: dict | None, history: list[Checkpoint], upto: int) -> int | None:
    """The decision as a batch task makes it: the chain to ``upto``, the current run's newest deltas."""
    return first_batch_to_apply(marker, chain_to(history, upto), latest_deltas(current_run(history)))


HISTORY = [delta(1, 0), delta(2, 1), delta(3, 2), delta(4, 3)]


def test_a_copy_at_the_committed_record_applies_nothing():
    assert decide(at(HISTORY[-1]), HISTORY, 3) == 4  # the first batch past the chain's end: nothing to apply


def test_a_copy_behind_on_the_chain_is_caught_up_from_the_batch_after_its_marker():
    assert decide(at(HISTORY[1]), HISTORY, 3) == 2
    assert decide(at(HISTORY[0]), HISTORY, 3) == 1


def test_a_copy_ahead_of_the_chain_is_restored():
    # the engine runs batch 3 again (its commit log says 2 is done): a copy that applied 3 holds writes batch 2's
    # state does not
    assert decide(at(HISTORY[-1]), HISTORY, 2) is None
    assert decide({"checkpointId": "d9", "batchId": 7}, HISTORY, 3) is None


def test_a_copy_at_a_superseded_attempt_of_its_batch_is_restored():
    # batch 2 re-ran after the copy applied its first run (d3): the same batch id, another record
    history = [*HISTORY[:3], delta(4, 2), delta(5, 3)]
    assert decide(at(HISTORY[2]), history, 3) is None
    assert decide(at(history[3]), history, 3) == 3  # the re-run's record is the chain's: caught up from 3


def test_a_copy_of_another_run_is_restored():
    other = Checkpoint(KEY, "x1", 1, "", 0, 0, 0, 1, kind=DELTA, changelog_blob_id=f"{KEY.prefix}/blobs/x",
                       changelog_crc32c=7, changelog_size=5, query_id="q2")
    assert decide(at(other), HISTORY, 3) is None


def test_a_copy_at_the_chains_snapshot_applies_the_deltas_after_it():
    history = [delta(1, 0), delta(2, 1), snap(3, 1), delta(4, 2), delta(5, 3)]
    assert decide(at(history[2]), history, 3) == 2
    assert decide(at(history[2]), history, 1) == 2  # the chain is the snapshot alone: nothing to apply
    # a snapshot the chain no longer stands on (a newer one took its place) is not a record the copy may stand on,
    # even with every delta after it held: restored (the conservative answer)
    newer = [*history, snap(6, 3), delta(7, 4)]
    assert decide(at(history[2]), newer, 4) is None
    assert decide(at(history[4]), newer, 4) == 4  # a delta the chain's snapshot covers: its deltas still chain
    assert decide({"checkpointId": "s99", "batchId": 1}, history, 3) is None


def test_the_empty_state_is_used_only_when_every_delta_from_batch_0_is_held():
    assert decide(EMPTY, HISTORY, 3) == 0
    assert decide(EMPTY, HISTORY, -1) == 0  # the state before batch 0: nothing to apply
    with_snapshot = [delta(1, 0), snap(2, 0), delta(3, 1)]
    assert decide(EMPTY, with_snapshot, 1) is None  # the chain starts at a snapshot: restore it


def test_a_gap_in_the_deltas_after_the_marker_restores():
    # retention pruned deltas 1 and 2 once the snapshot of batch 2 was kept: a copy at batch 0 cannot be caught up
    history = [delta(1, 0), snap(4, 2), delta(5, 3)]
    assert decide(at(history[0]), history, 3) is None
    assert decide(at(history[1]), history, 3) == 3


def test_no_marker_or_a_marker_of_the_wrong_shape_restores():
    assert decide(None, HISTORY, 3) is None
    assert decide({"batchId": 2}, HISTORY, 3) is None
    assert decide({"checkpointId": "d3", "batchId": "2"}, HISTORY, 3) is None
    assert decide({"checkpointId": "d3", "batchId": True}, HISTORY, 3) is None
    assert decide({"checkpointId": "d3", "batchId": None}, HISTORY, 3) is None
