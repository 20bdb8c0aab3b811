"""Alignment of a store with a Spark query's own checkpoint location: which state a restart restores. Read only.

Spark re-runs, on restart, the batches after the newest one in ``commits/`` (``C``): a batch with offsets and no
commit is planned again with the same offsets. Every batch Spark committed had its delta committed before
``foreachBatch`` returned, so the state after ``C`` is always in the repository: the newest valid snapshot at or
below ``C``, then the deltas after it up to ``C`` (``blobstate.model.chain.plan_chain``). A delta of a batch above ``C``
(a crash after its commit point, before Spark's commit) is ignored: Spark re-runs that batch, and its new delta
supersedes it. Nothing is ever written into Spark's checkpoint location.

Every record names its query (the ``metadata`` id). Refused, with nothing changed (``SparkAlignmentError``):

- records of another query (or of none: plain backups) under the store key: another query's state would be
  restored into this one;
- Spark committed batches but the repository holds no record of the store: the state of those batches is gone;
- a chain that lacks a delta it needs (``BrokenChainError``, retention or a deleted repository object).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from blobstate.errors import NothingToRestore
from blobstate.model.chain import Chain, plan_chain
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.options import redact

log = logging.getLogger(__name__)


class SparkAlignmentError(NothingToRestore):
    """The repository's records cannot be aligned with Spark's checkpoint location (exit code 5); nothing changed."""


@dataclass(frozen=True)
class AlignmentPlan:
    """What a (re)start restores: ``chain`` (None: an empty store) for Spark's newest commit ``last_committed``
    of query ``query_id`` (None: the query never started here)."""

    key: StoreKey
    last_committed: int | None
    query_id: str | None
    chain: Chain | None

    @property
    def restored_batch(self) -> int | None:
        """The batch the restored state is after (None: before the first batch)."""
        return self.chain.upto if self.chain is not None else None

    @property
    def snapshot_batch(self) -> int | None:
        snapshot = self.chain.snapshot if self.chain is not None else None
        return snapshot.batch_id if snapshot is not None else None

    @property
    def deltas(self) -> int:
        return len(self.chain.deltas) if self.chain is not None else 0

    def describe(self) -> str:
        what = self.chain.describe() if self.chain is not None else "an empty store"
        return f"Spark committed batch {self.last_committed}: restoring {what}"


def plan_alignment(history: Sequence[Checkpoint], key: StoreKey, *, last_committed: int | None,
                   query_id: str | None, location: str, repo_url: str) -> AlignmentPlan:
    """The plan for ``key``'s records ``history`` against Spark's newest commit ``last_committed`` of query
    ``query_id`` in ``location`` (see the module docstring). Raises ``SparkAlignmentError``."""
    where = f"{key} in {redact(repo_url)}"
    foreign = sorted({cp.query_id or "(none: not written by a streaming query)" for cp in history
                      if cp.query_id != query_id})
    if foreign:
        ours = f"query {query_id}" if query_id else "a query that has not started yet"
        raise SparkAlignmentError(
            f"{where} holds the state of another query ({', '.join(foreign[:3])}), but {location} belongs to {ours}: "
            "restoring it would mix two queries' state, so nothing was changed. Give this query its own store key "
            "(job=/task=/store=) or repository, or restart the query that owns the state with its own checkpoint "
            "location.")
    if last_committed is None:
        return AlignmentPlan(key, None, query_id, None)
    if not history:
        raise SparkAlignmentError(
            f"Spark committed batches up to {last_committed} in {location} (query {query_id}), but {where} holds "
            "no state of it: starting empty would lose the state of every committed batch, so nothing was "
            "changed. Point repo= (and log=, job=/task=/store=) at the repository that holds its state, or start "
            "the query afresh with a new checkpoint location.")
    try:
        chain = plan_chain(history, last_committed)
    except NothingToRestore as exc:
        raise SparkAlignmentError(
            f"Spark committed batch {last_committed} in {location}, but {where} cannot restore the state after it: "
            f"{exc}. Nothing was changed; restore the repository's missing objects, or start the query afresh with "
            "a new checkpoint location.") from exc
    return AlignmentPlan(key, last_committed, query_id, chain)
