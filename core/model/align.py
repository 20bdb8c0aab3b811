"""Which state a batch or a reader sees: the Align door, for every writer, restart, reader, rescale and restore. Pure.

Given a store's records (a driver store's, or one partition's) and, when there is one, what the engine's own commit
log says (Spark's ``commits/`` and ``offsets/``: ``EngineLog``), ``align`` returns the chain that provably ends at
the batch asked for, or refuses naming what the log holds and what is needed. Nothing else decides it: the
driver binding's and the partitioned driver's (re)start (``blobstate.spark.committed.alignment``), a partition
task bringing its copy to a batch (``blobstate.spark.partitioned.executor.partition``), ``read_state`` and
``read_changes`` (``blobstate state``), a rescale's source and ``blobstate restore`` all ask here.

Rules:

- A chain ends at the batch of its last record: its last delta's, else its snapshot's (``ends_at``). A snapshot of
  batch ``s`` never stands for a later batch ``t``: the batches ``s + 1 .. t`` may have written anything (a
  ``write_state`` or a rescale at ``s`` while the query ran on its old store). ``chain_to`` refuses such a chain
  (``StateNotHeld``), naming the snapshots and deltas the log holds.
- With an engine log, a batch is the one the engine takes as done (``EngineLog.done``: what a restart continues
  after) unless an older one is asked for; a newer one is refused (``BatchNotCommitted``): its record may be of an
  attempt the engine never committed and re-runs with other data (a sink that raised after the commit point). An
  engine that committed nothing sees the state before batch 0: an initial state's record if the log holds one
  (``blobstate.model.chain.INITIAL_BATCH``), else the empty state.
- Without one, the batch asked for, else the newest the log holds; such a sight is not ``confirmed``, and a reader
  whose records an engine wrote (they name a query) says so (``UNCONFIRMED``): the newest may be a batch the
  engine re-runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from blobstate.errors import BatchNotCommitted, StateNotHeld
from blobstate.model.chain import (
    INITIAL_BATCH,
    Chain,
    batch_ranges,
    current_run,
    latest_deltas,
    plan_chain,
    valid_snapshots,
)
from blobstate.model.records import Checkpoint

#: what a reader without the engine's commit log says about the newest state it read
UNCONFIRMED = ("the newest state in the repository may be a batch the engine re-runs (a batch whose commit point "
               "passed but which the engine never committed, e.g. a sink failed after it): give the query's "
               "checkpoint location (checkpoint_location=, --checkpoint-location) to read what the engine committed")


@dataclass(frozen=True)
class EngineLog:
    """What the engine's own commit log says: ``done`` the newest batch a restart takes as done (None: none yet;
    Spark: ``spark_done`` of ``commits/`` and ``offsets/``), ``query_id`` the query it belongs to (None: unknown),
    ``where`` its name in messages (``Spark's checkpoint location /ck/q1``)."""

    done: int | None
    where: str
    query_id: str | None = None


@dataclass(frozen=True)
class Sight:
    """A state: ``chain`` ends at ``batch`` (None: records that name no batch, a plain backup); ``confirmed`` when
    the engine's commit log says that batch is committed."""

    chain: Chain
    batch: int | None
    confirmed: bool

    @property
    def unconfirmed_engine_state(self) -> bool:
        """True when the state is an engine's (its records name a query) and no engine log confirmed it: a reader
        says ``UNCONFIRMED``."""
        return not self.confirmed and any(cp.query_id for cp in self.chain.records)


def spark_done(last_committed: int | None, last_planned: int | None) -> int | None:
    """The batch Spark's restart takes as done: ``commits/``'s newest, or the one before ``offsets/``'s newest when
    the offsets are ahead (Spark re-runs that planned batch); None: Spark starts at batch 0."""
    done = max(-1 if last_committed is None else last_committed, -1 if last_planned is None else last_planned - 1)
    return None if done < 0 else done


def ends_at(chain: Chain) -> int | None:
    """The batch ``chain``'s state is after: its last delta's, else its snapshot's (None: no batch id), -1 for the
    empty state."""
    if chain.deltas:
        return chain.deltas[-1].batch_id
    if chain.snapshot is not None:
        return chain.snapshot.batch_id
    return INITIAL_BATCH


def holdings(history: Sequence[Checkpoint]) -> str:
    """What ``history`` can give, for a refusal: its current run's valid snapshots and deltas, by batch."""
    snaps = [s.batch_id for s in valid_snapshots(history)]
    deltas = sorted(latest_deltas(current_run(history)))
    held = f"snapshots of batches {snaps}" if snaps else "no snapshot"
    return f"{held}, deltas of batches {batch_ranges(deltas)}" if deltas else held


def chain_to(history: Sequence[Checkpoint], batch: int, what: str = "the store") -> Chain:
    """The chain of ``history`` that ends exactly at ``batch`` (-1: the state before batch 0: an initial state, or
    the empty state). Raises ``StateNotHeld`` (a chain that would end at an older batch), ``BrokenChainError`` (a
    delta it needs is missing), ``NothingToRestore`` (no record of a batch at or below it)."""
    if batch == INITIAL_BATCH and not any(cp.batch_id == INITIAL_BATCH for cp in current_run(history)):
        return Chain(None, (), INITIAL_BATCH)
    chain = plan_chain(history, batch)
    reached = ends_at(chain)
    if reached != batch:
        held = holdings(history)
        raise StateNotHeld(f"the state after batch {batch} is needed, but {what} holds the state after batch "
                           f"{reached} at most ({held}): a snapshot of an older batch never stands for a later one",
                           needed=batch, holds=held)
    return chain


def engine_batch(engine: EngineLog, batch: int | None, what: str = "the store") -> int:
    """The batch a reader given ``engine`` reads: ``batch``, or the engine's done batch (-1: it committed none).
    Raises ``BatchNotCommitted`` for a batch after the engine's done batch."""
    done = INITIAL_BATCH if engine.done is None else engine.done
    if batch is not None and batch > done:
        raise BatchNotCommitted(
            f"the state of {what} after batch {batch} was asked for, but {engine.where} says the engine committed "
            f"batches up to {engine.done if engine.done is not None else 'none'} only: a record of batch {batch} may "
            "be of an attempt the engine re-runs (with other data)")
    return done if batch is None else batch


def align(history: Sequence[Checkpoint], *, engine: EngineLog | None = None, batch: int | None = None,
          what: str = "the store") -> Sight:
    """The state of ``history`` a batch or a reader sees (see the module docstring): after ``batch`` (None: the
    engine's done batch, else the newest the log holds). Raises ``BatchNotCommitted``, ``StateNotHeld``,
    ``BrokenChainError``, ``NothingToRestore``."""
    if engine is not None:
        target = engine_batch(engine, batch, what)
        chain = chain_to(history, target, what)
        other = sorted({cp.query_id for cp in chain.records if cp.query_id and cp.query_id != engine.query_id})
        if engine.query_id and other:
            raise StateNotHeld(f"{what} holds the state of query {other[0]}, but {engine.where} belongs to query "
                               f"{engine.query_id}: its batches are not this store's", needed=target,
                               holds=f"records of query {other[0]}")
        return Sight(chain, target, True)
    if batch is not None:
        return Sight(chain_to(history, batch, what), batch, False)
    chain = plan_chain(history)
    return Sight(chain, ends_at(chain), False)


__all__ = ["UNCONFIRMED", "BatchNotCommitted", "EngineLog", "Sight", "StateNotHeld", "align", "chain_to", "ends_at",
           "engine_batch", "holdings", "spark_done"]
