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

Initial state (``blobstate.spark.write_state(initial_state=True)``: the state before batch 0, of no query yet,
``blobstate.model.chain.is_initial``). A query that Spark starts at batch 0 (no committed batch) on a store holding
one, and no record of another query, adopts it: it restores it before its batch 0 and begins a run from it (its
lineage id ``adopting_lineage`` of the initial record's), so its deltas chain onto it and every restart restores it
with them. Its records name its query id: from its first commit on, the store is that query's, and another query
is refused as above. Two queries that both start on a never-adopted initial state both restore it, and the first
to commit fences the other (the commit point's generation, pinned before the records are read). A query with
committed batches ignores an initial record its run did not begin from, and one that has no record of its own next
to an initial state is refused: an initial state is the state before a new query's batch 0, not after batch ``C``.

Runs. Spark names a query by its ``metadata`` id, kept across restarts and across a partial reset of the checkpoint
location (``offsets/`` and ``commits/`` deleted, ``metadata`` kept: batch ids start at 0 again). Spark's own ``runId``
changes at every restart, so it cannot tie a restart to the records it continues. What identifies a run of the state is
the lineage of the offsets log: it begins when Spark plans a batch with no earlier offsets (a new query, or a reset) and
continues through every restart that finds offsets. blobstate names that lineage when it begins (``lineage_id``, a new
random id: nothing in Spark's location survives its purge of old offsets to derive one from) and every record of the run
carries it (``stamp_records``); a restart that finds offsets continues the lineage of the records its chain is made of.
The chain rules (``blobstate.model.chain.current_run``) use the newest run's records only, so an abandoned run's deltas
never chain onto the new run's state. What Spark re-runs decides the state restored: the batch after ``C``
(``commits/``), or, when ``offsets/`` is ahead of ``commits/`` (commits lost), the newest planned batch ``O``, with ``O
- 1`` taken as done (Spark's ``MicroBatchExecution`` does the same).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from blobstate.config.options import redact
from blobstate.errors import NothingToRestore
from blobstate.model.align import EngineLog, align, chain_to, spark_done
from blobstate.model.chain import INITIAL_BATCH, Chain, adopting_lineage, current_run, is_initial
from blobstate.model.layout import new_token
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.spark.errors import SparkAlignmentError

if TYPE_CHECKING:
    from blobstate.commit.backup import StoreCommitter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlignmentPlan:
    """What a (re)start restores: ``chain`` (None: an empty store) for Spark's newest commit ``last_committed``
    of query ``query_id`` (None: the query never started here); ``lineage_id``: the run the records this start
    writes belong to (see the module docstring); ``abandoned``: records of an abandoned run (a reset) left in the
    log, which no state of this run uses."""

    key: StoreKey
    last_committed: int | None
    query_id: str | None
    chain: Chain | None
    lineage_id: str = ""
    abandoned: int = 0

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

    @property
    def adopted(self) -> bool:
        """True when this start begins a run from an initial state (the state before batch 0)."""
        return self.last_committed is None and self.chain is not None

    def describe(self) -> str:
        what = self.chain.describe() if self.chain is not None else "an empty store"
        if self.adopted:
            return f"Spark starts at batch 0: restoring the initial state, {what}"
        reset = (f" (a new run of the query: {self.abandoned} records of its abandoned run are ignored)"
                 if self.abandoned else "")
        return f"Spark committed batch {self.last_committed}: restoring {what}{reset}"


def plan_alignment(history: Sequence[Checkpoint], key: StoreKey, *, last_committed: int | None,
                   query_id: str | None, location: str, repo_url: str,
                   last_planned: int | None = None) -> AlignmentPlan:
    """The plan for ``key``'s records ``history`` against Spark's newest commit ``last_committed`` (and newest
    planned batch ``last_planned``, ``offsets/``) of query ``query_id`` in ``location`` (see the module docstring).
    Raises ``SparkAlignmentError``."""
    last_committed = spark_done(last_committed, last_planned)
    where = f"{key} in {redact(repo_url)}"
    foreign = sorted({cp.query_id or "(none: not written by a streaming query)" for cp in history
                      if cp.query_id != query_id and not is_initial(cp)})
    if foreign:
        ours = f"query {query_id}" if query_id else "a query that has not started yet"
        raise SparkAlignmentError(
            f"{where} holds the state of another query ({', '.join(foreign[:3])}), but {location} belongs to {ours}: "
            "restoring it would mix two queries' state, so nothing was changed. Give this query its own store key "
            "(job=/task=/store=) or repository, or restart the query that owns the state with its own checkpoint "
            "location.")
    initial = [cp for cp in history if is_initial(cp)]
    if last_committed is None:  # Spark starts at batch 0: a new lineage of its offsets log, a new run
        abandoned = len(history) - len(initial)
        start = "the initial state" if initial else "an empty store"
        if abandoned:
            log.warning("%s: Spark's checkpoint %s has no offsets but %d records of query %s are in %s: a reset of "
                        "Spark's checkpoint. Starting a new run from %s; the abandoned run's records are never "
                        "used again and retention expires them", key, location, abandoned, query_id, where, start)
        if initial:  # adopt it: the new run begins from the state before batch 0
            chain = chain_to(initial, INITIAL_BATCH)
            assert chain.snapshot is not None
            return AlignmentPlan(key, None, query_id, chain, adopting_lineage(chain.snapshot, new_token()),
                                 abandoned)
        return AlignmentPlan(key, None, query_id, None, new_token(), abandoned)
    if len(initial) == len(history):
        held, start = (" but an initial state (the state before a new query's batch 0)", "from it") if initial \
            else ("", "empty")
        raise SparkAlignmentError(
            f"Spark committed batches up to {last_committed} in {location} (query {query_id}), but {where} holds "
            f"no state of it{held}: starting {start} would lose the state of every committed batch, so nothing "
            "was changed. Point repo= (and log=, job=/task=/store=) at the repository that holds its state, or "
            "start the query afresh with a new checkpoint location.")
    try:  # the Align door: a chain that ends exactly at Spark's batch, never a snapshot of an older one
        chain = align(history, engine=EngineLog(last_committed, f"Spark's checkpoint location {location}", query_id),
                      what=where).chain
    except NothingToRestore as exc:
        raise SparkAlignmentError(
            f"Spark committed batch {last_committed} in {location}, but {where} cannot restore the state after it: "
            f"{exc}. Nothing was changed; restore the repository's missing objects, or start the query afresh with "
            "a new checkpoint location.") from exc
    lineage = chain.records[-1].lineage_id if chain.records else current_run(history)[-1].lineage_id
    return AlignmentPlan(key, last_committed, query_id, chain, lineage)


def stamp_records(committer: StoreCommitter, **fields: Any) -> None:
    """Every record ``committer`` appends from now on (snapshot, delta or group) carries ``fields`` (the run of the
    query: ``lineage_id``; a group's ``key_columns``): ``blobstate.commit.point:CommitPoint.fields``, set on the
    record at the commit point before ``CheckpointAppending`` journals it, so recovery re-appends the same record.
    A later call adds to (or replaces) the fields of an earlier one."""
    committer.commit_point.fields.update(fields)


__all__ = ["AlignmentPlan", "SparkAlignmentError", "plan_alignment", "spark_done", "stamp_records"]
