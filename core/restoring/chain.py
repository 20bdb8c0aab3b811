"""Restore a chain: the snapshot (``blobstate.restoring.snapshot``), then the deltas after it, replayed in order.

The restore half of changelog checkpointing (Spark's RocksDB state store: the newest snapshot below the wanted
version, then the changelog files after it; Flink's changelog backend likewise): ``plan`` picks the chain
(``blobstate.model.chain.plan_chain``), ``restore_chain`` restores its snapshot all or nothing, then fetches every
changelog (in parallel, each checked against its record's size and CRC32C before it is decoded) and applies them
to the RocksDB store one ``WriteBatch`` each, in batch order. A crash in the middle leaves a store the next restore
brings back to the snapshot and replays again. Deltas exist for ``rocksdb`` stores only.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace

from blobstate.errors import ConfigurationError, NothingToRestore
from blobstate.local.checksum import ChecksumCache
from blobstate.model import changelog
from blobstate.model.align import EngineLog, align
from blobstate.model.chain import Chain, has_deltas, partition_history, plan_chain
from blobstate.model.progress import Progress
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import LocalStore
from blobstate.repository.repo import Repository
from blobstate.repository.view import read_view
from blobstate.restoring.plan import DEFAULT_VERIFY_KEPT
from blobstate.restoring.snapshot import RestoreResult, restore_snapshot


def plan(repo: Repository, key: StoreKey, *, checkpoint: str | int | None = None,
         max_batch_id: int | None = None, partition: int | None = None, engine: EngineLog | None = None) -> Chain:
    """The chain a restore of ``key`` uses: the state after batch ``max_batch_id`` (None: the newest), or after the
    record ``checkpoint`` names (a snapshot alone; a delta: the state after its batch). A log without deltas gives
    exactly the snapshot ``Repository.choose`` picks (a latest snapshot without a batch id is not read further).
    ``partition``: partition ``partition`` of a partitioned store (its records in the group records). ``engine``
    (the query's own commit log, without ``checkpoint``/``max_batch_id``): exactly the state after the batch the
    engine committed, from one read of the records (the Align door, ``blobstate.model.align``).
    Raises ``NothingToRestore``, ``BrokenChainError``, ``StateNotHeld``, ``ConfigurationError``."""
    if engine is not None:
        if checkpoint not in (None, "latest") or max_batch_id is not None:
            raise ConfigurationError("a checkpoint location restores the state its query committed: not with a "
                                     "checkpoint or a max batch id")
        history = list(read_view(repo, key).history)
        if partition is not None:
            history = partition_history(history, partition)
        elif history and history[-1].is_group:
            raise NothingToRestore(f"{key} is a partitioned store: restore one partition of it (--partition, "
                                   "partition=)")
        if not history:
            raise NothingToRestore(f"no checkpoint of {key}" + (f" commits partition {partition}"
                                                                 if partition is not None else ""))
        chain = align(history, engine=engine, what=str(key) if partition is None else f"{key} partition "
                      f"{partition}").chain
        if not chain.records:
            raise NothingToRestore(f"{engine.where}: the engine committed no batch of {key} yet: nothing to restore")
        return chain
    if partition is not None:
        history = partition_history(repo.log.history(key), partition)
        if not history:
            raise NothingToRestore(f"no group checkpoint of {key} commits partition {partition}")
        return plan_chain(history, max_batch_id)
    latest = repo.log.latest(key)
    if latest is not None and latest.is_group:
        raise NothingToRestore(f"{key} is a partitioned store (group checkpoints of {latest.num_partitions} "
                               "partitions): restore one partition of it (--partition, partition=)")
    if checkpoint is not None and checkpoint != "latest":
        chosen = repo.choose(key, checkpoint=checkpoint)
        if chosen.is_delta:
            return plan_chain(repo.log.history(key), chosen.batch_id)
        return Chain(chosen, (), chosen.batch_id)
    if latest is None or (max_batch_id is None and not latest.is_delta and latest.batch_id is None):
        chosen = repo.choose(key, max_batch_id=max_batch_id)  # NothingToRestore names the stores there are
        return Chain(chosen, (), chosen.batch_id)
    history = repo.log.history(key)
    if not has_deltas(history):
        chosen = repo.choose(key, max_batch_id=max_batch_id)
        return Chain(chosen, (), chosen.batch_id)
    return plan_chain(history, max_batch_id)


def replay_deltas(repo: Repository, chain: Chain, dest: str) -> int:
    """Apply ``chain``'s deltas to the RocksDB store in ``dest`` (closed by everyone else); returns the number of
    ops. Raises ``BlobNotFound``, ``ChecksumMismatch``, ``CorruptIndexError`` (exit 3): the deltas before the
    failing one stay applied (restore again to start over)."""
    if not chain.deltas:
        return 0
    from rocksdict import Rdict

    blobs = repo.store.map_concurrent(repo.read_changelog, list(chain.deltas))
    ops = 0
    db = Rdict(dest)
    try:
        for delta, data in zip(chain.deltas, blobs, strict=True):
            ops += changelog.replay(db, data, source=delta.changelog_blob_id)
        db.flush(True)
    finally:
        db.close()
    return ops


def restore_chain(repo: Repository, chain: Chain, dest: str, *, local_store: LocalStore, store_type: str,
                  work_dir: str | None = None, cache: ChecksumCache | None = None, progress: Progress | None = None,
                  validate: bool = True, force: bool = False, dry_run: bool = False,
                  verify_kept: str = DEFAULT_VERIFY_KEPT) -> RestoreResult:
    """Restore ``chain`` into ``dest``: its snapshot (``restore_snapshot``: all or nothing; ``verify_kept``: how the
    files already there are checked, ``blobstate.restoring.plan``), then its deltas
    (``replay_deltas``; not on a dry run). A chain without a snapshot starts from an empty store, which needs
    ``force`` when ``dest`` is not empty. ``RestoreResult.checkpoint`` is the snapshot's record (the first delta's
    without one), ``deltas_applied`` and ``last_batch_id`` say how far it got.

    Raises what ``restore_snapshot`` and ``replay_deltas`` raise; ``ConfigurationError`` for deltas of a store that
    is not ``rocksdb``, ``RestoreRefused`` for a non-empty ``dest`` without ``force`` and without a snapshot.
    """
    t0 = time.perf_counter()
    if chain.deltas and store_type != "rocksdb":
        raise ConfigurationError(f"delta records hold RocksDB changelogs; the store type {store_type!r} has none")
    if chain.snapshot is not None:
        result = restore_snapshot(repo, chain.snapshot, dest, local_store=local_store, work_dir=work_dir,
                                  cache=cache, progress=progress, validate=validate, force=force, dry_run=dry_run,
                                  verify_kept=verify_kept)
    else:
        if not chain.deltas:
            raise ConfigurationError("an empty chain restores nothing")
        busy = os.path.isdir(dest) and bool(os.listdir(dest))
        result = RestoreResult(chain.deltas[0], 0, 0, 0, 0, 0, 0, 0, 0.0, dry_run=dry_run,
                               needs_force=dry_run and busy and not force)
        if not dry_run:
            _empty_destination(dest, force)
    if dry_run:
        return replace(result, partition=getattr(chain.records[0], "partition", None))
    replay_deltas(repo, chain, dest)
    return replace(result, deltas_applied=len(chain.deltas), last_batch_id=chain.upto,
                   partition=getattr(chain.records[0], "partition", None),
                   duration_ms=(time.perf_counter() - t0) * 1000)


def _empty_destination(dest: str, force: bool) -> None:
    """Make ``dest`` an empty directory (the state before the first batch)."""
    from blobstate.errors import RestoreRefused

    if os.path.isdir(dest) and os.listdir(dest):
        if not force:
            raise RestoreRefused(f"{dest} is not empty and the chain to restore starts from an empty store: pass "
                                 "--force to clear it, or choose an empty directory")
        shutil.rmtree(dest)
    os.makedirs(dest, exist_ok=True)
