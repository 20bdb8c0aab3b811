"""State as data: a store's keys and values exactly as after batch N, and its changes batch by batch. Read only.

The read half of a chain (``blobstate.restoring.chain``), for looking at a state rather than running on it:

- ``plan_state`` picks, for a driver store or for each partition of a group, the chain (snapshot, then deltas) that
  makes the state after batch N (default: the newest the log holds; for a group, the newest group record's batch,
  so every partition is read at the same batch); ``restore_into`` restores one chain into a private directory the
  caller owns (a temporary one: nothing is restored into a user's directory, nothing is written to the repository:
  no journal, no init cleanup), and ``blobstate.restoring.entries.open_entries`` reads it key by key, decoded
  without running code. Spark's state data source reader reads a checkpoint's state store files the same way
  (the snapshot, then the changelog files after it), and Flink's State Processor API reads a savepoint.
- ``plan_changes`` picks the delta records of batches ``from_batch..to_batch`` (both included: Spark's change feed
  reader takes ``changeStartBatchId`` and ``changeEndBatchId`` the same way) and ``read_changes`` decodes their
  changelogs into ``Change`` rows in batch order, then op order: applied in that order to the state after
  ``from_batch - 1`` they give the state after ``to_batch``.

A batch that retention no longer keeps raises ``BatchNotRetained`` (exit 5) naming the oldest and newest readable
batch. Which records count follows ``blobstate.model.chain``: the current run only, the newest delta of a batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from blobstate.errors import BatchNotRetained, ConfigurationError, NothingToRestore
from blobstate.model import changelog
from blobstate.model.align import EngineLog, align, engine_batch
from blobstate.model.chain import (
    INITIAL_BATCH,
    Chain,
    current_run,
    has_deltas,
    latest_deltas,
    partition_history,
    plan_chain,
)
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository
from blobstate.repository.view import read_view
from blobstate.restoring.entries import Value, user_key


class Change(NamedTuple):
    """One write of a batch: ``op`` is ``put`` (``value`` the new value) or ``delete`` (``value`` None);
    ``partition`` None for a driver store."""

    batch_id: int
    partition: int | None
    op: str
    key: Value
    value: Value | None


@dataclass(frozen=True)
class StatePlan:
    """The state after batch ``batch_id`` (None: a store whose records name no batch) of ``key``: ``chains[p]``
    for each partition read (``{None: chain}`` for a driver store); ``num_partitions`` 0 for a driver store."""

    key: StoreKey
    batch_id: int | None
    chains: dict[int | None, Chain]
    num_partitions: int = 0
    confirmed: bool = False  # the engine's commit log says ``batch_id`` is committed (``blobstate.model.align``)
    key_groups: int = 0  # a key-grouped store's: its keys are read by the user's key (``entries.user_key``)

    @property
    def unconfirmed_engine_state(self) -> bool:
        """An engine's state (its records name a query) that no engine log confirmed: the newest may be a batch
        the engine re-runs (``blobstate.model.align.UNCONFIRMED``)."""
        return not self.confirmed and any(cp.query_id for c in self.chains.values() for cp in c.records)


def state_range(history: Sequence[Checkpoint]) -> tuple[int | None, int | None]:
    """``(oldest, newest)``: the batches whose state ``history`` (a driver store's records, or one partition's)
    can give, by ``plan_chain``; ``(None, None)`` when none."""
    run = current_run(history)
    batches = sorted({cp.batch_id for cp in run if cp.batch_id is not None})
    if not has_deltas(run):
        return (batches[0], batches[-1]) if batches else (None, None)
    readable = [b for b in batches if _plans(run, b)]
    return (readable[0], readable[-1]) if readable else (None, None)


def change_range(history: Sequence[Checkpoint]) -> tuple[int | None, int | None]:
    """``(oldest, newest)``: the batches whose changes ``history`` holds without a gap up to the newest one."""
    deltas = latest_deltas(current_run(history))
    if not deltas:
        return None, None
    newest = oldest = max(deltas)
    while oldest - 1 in deltas:
        oldest -= 1
    return oldest, newest


def _plans(history: Sequence[Checkpoint], batch: int) -> bool:
    try:
        plan_chain(history, batch)
    except NothingToRestore:
        return False
    return True


def chain_at(history: Sequence[Checkpoint], batch_id: int | None, what: str, engine: EngineLog | None = None) -> Chain:
    """The chain of the state after ``batch_id`` (None: the newest; with ``engine``, the engine's done batch) of
    ``history``, through the Align door (``blobstate.model.align.align``). A log without deltas gives a state only at
    the batches of its snapshots. Raises ``BatchNotRetained`` naming the readable batches, ``BatchNotCommitted``
    (a batch after the engine's), ``NothingToRestore`` when there is no state at all."""
    if engine is not None:
        batch_id = engine_batch(engine, batch_id, what)
        if batch_id == INITIAL_BATCH:
            return align(history, engine=engine, what=what).chain
    if batch_id is None:
        return align(history, what=what).chain
    oldest, newest = state_range(history)
    exact = has_deltas(current_run(history)) or any(cp.batch_id == batch_id for cp in current_run(history))
    if oldest is None or newest is None or not oldest <= batch_id <= newest or not exact:
        when = "does not hold yet" if newest is not None and batch_id > newest else "no longer holds"
        readable = "none" if oldest is None else f"the oldest readable batch is {oldest}, the newest {newest}"
        raise BatchNotRetained(f"the repository {when} the state of {what} after batch {batch_id}: {readable}",
                               oldest=oldest, newest=newest)
    return align(history, engine=engine, batch=batch_id, what=what).chain


def plan_state(repo: Repository, key: StoreKey, *, partitions: Iterable[int] | None = None,
               batch_id: int | None = None, checkpoint: str | int | None = None,
               engine: EngineLog | None = None) -> StatePlan:
    """The chains of ``key``'s state after ``batch_id`` (or after the batch of the record ``checkpoint`` names;
    default the newest, or with ``engine`` the engine's done batch: ``confirmed``), for a driver store or for
    ``partitions`` (default: every one) of a group; the records read once (``read_view``). Raises
    ``NothingToRestore`` (no record), ``BatchNotRetained``, ``BatchNotCommitted``, ``BrokenChainError``,
    ``ConfigurationError`` (a partition outside the group, or ``partitions`` of a driver store)."""
    from blobstate.restoring.chain import plan

    history = list(read_view(repo, key).history)
    if not history:
        raise NothingToRestore(f"no checkpoint for {key}")
    groups = [cp for cp in current_run(history) if cp.is_group]
    if checkpoint is not None and checkpoint != "latest":
        if not groups and engine is None:
            chain = plan(repo, key, checkpoint=checkpoint)
            return StatePlan(key, chain.upto if chain.upto is not None else chain.records[-1].batch_id,
                             {None: chain})
        batch_id = repo.choose(key, checkpoint=checkpoint).batch_id
    if not groups:
        if partitions is not None and list(partitions) != [0]:
            raise ConfigurationError(f"{key} is a driver store (no partitions): read it without a partition")
        chain = chain_at(history, batch_id, str(key), engine)
        batch = chain.upto if chain.upto is not None else chain.records[-1].batch_id if chain.records else None
        return StatePlan(key, batch, {None: chain}, confirmed=engine is not None)
    n = groups[-1].num_partitions
    wanted = list(range(n)) if partitions is None else list(partitions)
    outside = [p for p in wanted if not 0 <= p < n]
    if outside:
        raise ConfigurationError(f"{key} has partitions 0..{n - 1}, not {outside[0]}")
    batch = batch_id if batch_id is not None or engine is not None else max(
        cp.batch_id for cp in groups if cp.batch_id is not None)
    if engine is not None:
        batch = engine_batch(engine, batch, str(key))
    chains: dict[int | None, Chain] = {
        p: chain_at(partition_history(history, p), batch, f"{key} partition {p}", engine) for p in wanted}
    return StatePlan(key, batch, chains, n, confirmed=engine is not None, key_groups=key_groups_of(groups))


def restore_into(repo: Repository, chain: Chain, base: str) -> str | None:
    """Restore ``chain`` into ``<base>/db`` (``base``: a private directory the caller removes), its work files under
    ``<base>/work``; returns the RocksDB path, or None for the empty state (a chain of nothing). Raises what
    ``restore_chain`` raises (``IntegrityError`` for a damaged blob), ``ConfigurationError`` for a snapshot of a
    store that is not RocksDB (a directory store has files, not keys: restore it)."""
    from blobstate.repository.backends import open_local_store
    from blobstate.restoring.chain import restore_chain

    if chain.snapshot is None and not chain.deltas:
        return None
    if chain.snapshot is not None:
        index = repo.read_index(chain.snapshot)
        if (index.store_type or ("rocksdb" if "CURRENT" in index.files() else "dir")) != "rocksdb":
            raise ConfigurationError(f"{chain.snapshot.store_key} is a {index.store_type or 'dir'} store: it holds "
                                     "files, not keys and values; restore it with `blobstate restore`")
    dest = os.path.join(base, "db")
    restore_chain(repo, chain, dest, local_store=open_local_store("rocksdb"), store_type="rocksdb",
                  work_dir=os.path.join(base, "work"), force=True)
    return dest


def key_groups_of(history: Sequence[Checkpoint]) -> int:
    """The number of key groups the newest group record of ``history`` records (0: none, or a driver store): a
    reader of a key-grouped store gives each key back without its key-group prefix (``entries.user_key``)."""
    return next((cp.key_groups for cp in reversed(history) if cp.is_group and cp.partitions), 0)


class ChangePlans(dict[int | None, list[Checkpoint]]):
    """``change_plans``' answer: partition (None: a driver store) -> its delta records, and the store's
    ``key_groups`` (0: none), which ``read_changes`` takes to give the user's keys."""

    key_groups: int = 0


def plan_changes(history: Sequence[Checkpoint], *, from_batch: int | None, to_batch: int | None,
                 what: str) -> list[Checkpoint]:
    """The delta records of batches ``from_batch..to_batch`` (both included; None: the oldest, the newest held
    without a gap) of ``history`` (a driver store's records, or one partition's), in batch order. Raises
    ``BatchNotRetained`` naming the readable batches, ``ConfigurationError`` when ``from_batch > to_batch``."""
    oldest, newest = change_range(history)
    start = oldest if from_batch is None else from_batch
    end = newest if to_batch is None else to_batch
    if start is not None and end is not None and start > end:
        raise ConfigurationError(f"from_batch {start} is after to_batch {end}")
    if oldest is None or newest is None or start is None or end is None or start < oldest or end > newest:
        readable = "none" if oldest is None else f"the oldest readable batch is {oldest}, the newest {newest}"
        when = "does not hold yet" if newest is not None and end is not None and end > newest else "no longer holds"
        raise BatchNotRetained(f"the repository {when} the changes of {what} in batches {start}..{end}: {readable}",
                               oldest=oldest, newest=newest)
    deltas = latest_deltas(current_run(history))
    return [deltas[b] for b in range(start, end + 1)]


def change_plans(repo: Repository, key: StoreKey, *, from_batch: int | None, to_batch: int | None,
                 partitions: Iterable[int] | None = None,
                 engine: EngineLog | None = None) -> ChangePlans:
    """``plan_changes`` for a driver store (``{None: records}``) or for ``partitions`` (default every one) of a
    group, all over the same batches (the group's readable range when ``from_batch``/``to_batch`` are None; with
    ``engine``, up to the engine's done batch at most). Raises ``NothingToRestore``, ``BatchNotRetained``,
    ``BatchNotCommitted``, ``ConfigurationError``."""
    history = list(read_view(repo, key).history)
    groups = [cp for cp in current_run(history) if cp.is_group]
    if not history:
        raise NothingToRestore(f"no checkpoint for {key}")
    if engine is not None:
        to_batch = engine_batch(engine, to_batch, str(key))
        if to_batch == INITIAL_BATCH:
            raise NothingToRestore(f"{engine.where}: the engine committed no batch of {key} yet: no change to read")
    if not groups:
        return ChangePlans({None: plan_changes(history, from_batch=from_batch, to_batch=to_batch, what=str(key))})
    n = groups[-1].num_partitions
    wanted = list(range(n)) if partitions is None else list(partitions)
    if any(not 0 <= p < n for p in wanted):
        raise ConfigurationError(f"{key} has partitions 0..{n - 1}, not {wanted}")
    ranges = [change_range(partition_history(history, p)) for p in range(n)]
    if from_batch is None and all(r[0] is not None for r in ranges):
        from_batch = max(r[0] for r in ranges if r[0] is not None)
    if to_batch is None and all(r[1] is not None for r in ranges):
        to_batch = min(r[1] for r in ranges if r[1] is not None)
    plans = ChangePlans({p: plan_changes(partition_history(history, p), from_batch=from_batch, to_batch=to_batch,
                                         what=f"{key} partition {p}") for p in wanted})
    plans.key_groups = key_groups_of(groups)
    return plans


def read_changes(repo: Repository, records: Sequence[Checkpoint], partition: int | None,
                 key_groups: int = 0) -> Iterator[Change]:
    """The writes of the delta ``records`` (``plan_changes``), in order, by the user's key for a store of
    ``key_groups`` key groups (``entries.user_key``); each changelog is checked against its record's size and
    CRC32C before it is decoded. Raises ``BlobNotFound``, ``ChecksumMismatch``,
    ``CorruptIndexError``."""
    for record in records:
        ops = changelog.decode(repo.read_changelog(record), source=record.changelog_blob_id)
        assert record.batch_id is not None
        for op, key, value in ops:
            yield Change(record.batch_id, partition, "put" if op == changelog.PUT else "delete",
                         user_key(key, key_groups), value)


__all__ = ["BatchNotRetained", "Change", "ChangePlans", "StatePlan", "chain_at", "change_plans", "change_range",
           "key_groups_of", "plan_changes", "plan_state", "read_changes", "restore_into", "state_range"]


def entries(plan: StatePlan, open_repository: Callable[[], Repository],
            scratch_dir: str | None) -> Iterator[tuple[Value, Value]]:
    """The entries of ``plan``'s chains, one chain at a time restored into a temporary directory under
    ``scratch_dir`` and read (``blobstate.read_state``), through a repository ``open_repository()`` opens when the
    iteration starts (closed when it ends)."""
    import tempfile

    from blobstate.restoring.entries import open_entries

    with open_repository() as repository:
        for chain in plan.chains.values():
            with tempfile.TemporaryDirectory(prefix="blobstate-state-", dir=scratch_dir) as base:
                path = restore_into(repository, chain, base)
                if path is not None:
                    with open_entries(path, plan.key_groups) as found:
                        yield from found


def changes(plans: dict[int | None, list[Checkpoint]], open_repository: Callable[[], Repository],
            key_groups: int = 0) -> Iterator[Change]:
    """The changes of ``plans`` (``change_plans``), batch by batch and partition by partition
    (``blobstate.read_changes``), through a repository ``open_repository()`` opens when the iteration starts."""
    with open_repository() as repository:
        for batch in sorted({r.batch_id for records in plans.values() for r in records if r.batch_id is not None}):
            for p, records in plans.items():
                yield from read_changes(repository, [r for r in records if r.batch_id == batch], p, key_groups)
