"""Whether a local copy of a partition may be used, and from which batch it is caught up. Pure.

A local copy is a partition's state on a host outside the repository: the primary's copy a batch task keeps between
batches (``blobstate.spark.partitioned.executor.partition:LocalPartition``), a standby's copy kept warm by applying
committed changelogs, or the seed a hand-over (a decommissioned executor's) leaves on another host. Each copy carries
a *marker*: the record it is at. A copy is used only at the committed record: ``first_batch_to_apply`` is the one
decision, and every way of promoting a copy (a batch task, a standby taking over, a hand-over) asks it.

Rules (``marker`` is the copy's, ``chain`` the committed chain the batch needs, ``deltas`` the current run's newest
delta of each batch, ``blobstate.model.chain.latest_deltas``):

- No marker (no copy, or one never brought to a record): restore.
- The empty-state marker (``checkpointId`` ``""``, the state before batch 0): usable only when the chain has no
  snapshot and every delta from batch 0 to the chain's end is held; then every batch is applied from 0.
- A marker naming a record: usable only when that record is exactly one of the chain's, the newest delta of its batch
  (``deltas[batch]``, so a delta a re-run of the batch superseded, or another run's, is not) or the chain's snapshot;
  and only when its batch is not past the chain's end (a copy ahead of the committed record holds writes the chain
  does not: a batch the engine runs again), and every delta after it up to the chain's end is held (no gap).
  Then the copy is caught up from the batch after the marker's.
- Anything else: restore (None). A wrong answer here is a partition state with a batch's writes lost or applied
  twice, which no later check sees: this is why the decision has one home.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blobstate.model.chain import Chain
from blobstate.model.records import Checkpoint


def first_batch_to_apply(marker: Mapping[str, Any] | None, chain: Chain,
                         deltas: Mapping[int, Checkpoint]) -> int | None:
    """The first batch whose committed delta must be applied to a local copy to bring it to the state after
    ``chain.upto``, or None when the copy must not be used (restore it from the repository instead).

    ``marker``: the copy's marker, ``{"checkpointId": str, "batchId": int | None}`` (``checkpointId`` ``""``: the
    empty state before batch 0; None: no usable copy). ``chain``: the committed chain the copy must reach
    (``blobstate.model.align.chain_to``; its ``upto`` the batch, -1 for the state before batch 0). ``deltas``:
    ``{batch id: its newest delta}`` of the current run (``blobstate.model.chain.latest_deltas``). The answer is a
    batch id ``b`` with ``0 <= b <= chain.upto + 1``: apply ``deltas[b] .. deltas[chain.upto]`` in order (none when
    ``b == chain.upto + 1``: the copy is at the record). Raises nothing: a marker of the wrong shape means restore.
    """
    if marker is None or chain.upto is None:
        return None
    upto = chain.upto
    cid = marker.get("checkpointId")
    if not isinstance(cid, str):
        return None
    if not cid:  # the empty state before batch 0
        whole = chain.snapshot is None and all(b in deltas for b in range(0, upto + 1))
        return 0 if whole else None
    batch = marker.get("batchId")
    if not isinstance(batch, int) or isinstance(batch, bool) or batch > upto:
        return None  # no batch, or ahead of the chain: writes the committed state does not hold
    held = deltas.get(batch)
    at_record = (held is not None and held.checkpoint_id == cid) or (
        chain.snapshot is not None and chain.snapshot.checkpoint_id == cid)
    if not at_record:
        return None  # a superseded attempt of its batch, another run's record, an unknown one
    if any(b not in deltas for b in range(batch + 1, upto + 1)):
        return None  # a gap: a delta the catch-up needs is not held
    return batch + 1


__all__ = ["first_batch_to_apply"]
