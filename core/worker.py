"""The executors' one door into the core: everything a worker process on a Spark executor (a partitioned batch's
task, a snapshot task, a state-as-data task) calls in ``blobstate``, beyond the model, local files and errors that
every room uses. Nothing on an executor imports another module of ``commit``, ``restoring`` or ``repository``:
``blobstate.commit.group`` (the group commit) is the driver's alone, and ``tests/project/test_spark_rooms.py``
checks both. A door over two verbs' rooms (``commit`` and ``restoring``), it stands on the floor of ``api``, above
them both (``tests/project/test_architecture.py``'s ``FLOORS``).

- **Open the worker's repository**: ``worker_repository`` (once per Python worker, kept for its next tasks),
  ``open_repository`` (one task's, closed by it); ``Repository`` is the type they return.
- **Stage a part** of a group record, with a TTL, never touching the checkpoint log (the driver's group commit is
  the commit point): ``stage_changelog`` (a batch's changelog), ``stage_snapshot`` (a partition's RocksDB local
  checkpoint, diffed against its previous snapshot), after ``local_checkpoint`` took it.
- **Heal parts** (rule 5): ``heal_parts`` (``blobstate.commit.parts``) puts back the committed changelogs this host
  keeps that gc may have taken.
- **Restore a partition's chain**: ``restore_partition`` (a partition's RocksDB brought to a chain's state,
  verified), and for state as data ``restore_into`` (a chain into a scratch directory), ``read_changes`` (a
  partition's committed writes) and ``entries`` (the RocksDB entry encoding, read without unpickling).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from blobstate.commit import staging
from blobstate.commit.healing import HealWalks
from blobstate.commit.parts import heal_parts
from blobstate.commit.staging import SnapshotSpec
from blobstate.config.options import redact
from blobstate.config.settings import Settings
from blobstate.errors import IntegrityError
from blobstate.local.checksum import ChecksumCache, crc32c_bytes
from blobstate.model.chain import Chain
from blobstate.model.layout import DEFAULT_CHUNK_SIZE, new_blob_id, new_checkpoint_id, now_ms
from blobstate.model.records import DELTA, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.restoring import entries
from blobstate.restoring.chain import restore_chain
from blobstate.restoring.snapshot import RestoreResult
from blobstate.restoring.state import read_changes, restore_into

log = logging.getLogger(__name__)

_REPOS: dict[tuple[str, str | None, str], Repository] = {}


def open_repository(url: str, *, log_url: str | None = None, storage_options: dict[str, Any] | None = None,
                    log_options: dict[str, Any] | None = None, create: bool = False,
                    settings: Settings | None = None) -> Repository:
    """The repository at ``url`` (its log at ``log_url``), for one task, with ``settings`` (the driver's as the
    caller hands them: on an executor, ``Settings.on_executor``): the caller closes it. An empty location becomes one
    only with ``create`` (``Repository.open``; raises ``RepositoryNotFound`` otherwise)."""
    return Repository.open(url, log=log_url, storage_options=storage_options, log_options=log_options,
                           create=create, settings=settings)


def worker_repository(url: str, log_url: str | None, storage_options: dict[str, Any] | None,
                      settings: Settings) -> Repository:
    """The repository at ``url`` (its log at ``log_url``), opened once per Python worker and kept for its next
    tasks (Spark reuses its Python workers), with ``settings`` (the driver's, as an executor runs with them:
    ``Settings.on_executor``); opened again when the settings differ."""
    cache_key = (url, log_url, json.dumps(storage_options or {}, sort_keys=True, default=str))
    settings = settings.on_executor()
    repo = _REPOS.get(cache_key)
    if repo is None or repo.settings != settings:
        repo = Repository.open(url, log=log_url, storage_options=storage_options, settings=settings)
        _REPOS[cache_key] = repo
    return repo


def local_checkpoint(db: Any, dest: str, *, settings: Settings | None = None) -> None:
    """A RocksDB local checkpoint of the open ``db`` (a ``rocksdict.Rdict``) at ``dest`` (hard links, milliseconds;
    ``dest`` must not exist): what ``stage_snapshot`` uploads."""
    open_local_store("rocksdb", settings=settings).create_checkpoint(db, dest)


def restore_partition(repo: Repository, chain: Chain, dest: str, *, work_dir: str) -> RestoreResult:
    """A partition's RocksDB at ``dest`` brought to the state ``chain`` ends at (its snapshot, verified, keeping the
    files of ``dest`` that are already right; then its deltas; a chain without a snapshot starts from an empty
    ``dest``), its work files under ``work_dir``. Raises what ``blobstate.restoring.chain.restore_chain`` raises
    (``IntegrityError``, ``BrokenChainError``, ``StorageError``)."""
    return restore_chain(repo, chain, dest, local_store=open_local_store("rocksdb", settings=repo.settings),
                         store_type="rocksdb",
                         work_dir=work_dir, force=True)


def stage_changelog(repo: Repository, key: StoreKey, *, partition: int, batch_id: int, data: bytes, ttl_ms: int,
                    attempt: int = 0, base: int = 0) -> PartitionEntry:
    """A partition writer's half (no journal, no log): upload ``data`` (an encoded changelog) as a new blob of
    ``key`` with a TTL of ``ttl_ms`` and return its entry for the group record. Raises ``StorageError``; a blob left
    behind by a failure, or never committed, expires by its TTL (``blobstate gc``)."""
    entry = PartitionEntry(partition, DELTA, new_checkpoint_id(), batch_id, new_blob_id(key), crc32c_bytes(data),
                           len(data), attempt, base)
    repo.store.put(PutRequest(entry.blob_id, data, ttl_ms, repo.metadata_codec))
    return entry


@dataclass(frozen=True)
class StagedSnapshot:
    """A partition snapshot uploaded with TTLs, not committed: its group ``entry`` (the index), the ids of the blobs
    it uploaded (``new_blob_ids``: their TTLs are removed when a group commits it), bytes uploaded."""

    entry: PartitionEntry
    new_blob_ids: tuple[str, ...]
    bytes_uploaded: int


def stage_snapshot(repo: Repository, key: StoreKey, *, partition: int, batch_id: int, checkpoint_dir: str,
                   previous: Checkpoint | None, ttl_ms: int, attempt: int = 0, base: int = 0,
                   chunk_size: int = DEFAULT_CHUNK_SIZE, writer_id: str = "") -> StagedSnapshot:
    """A partition writer's snapshot: the RocksDB local checkpoint ``checkpoint_dir`` (the state after
    ``batch_id``) diffed against the partition's ``previous`` snapshot record (its unchanged files' blobs reused;
    None or an unreadable index: everything uploaded; a reused blob the store lost uploaded again), the new blobs
    and the index put with a TTL of ``ttl_ms``: ``blobstate.commit.staging.stage_snapshot``, as a store's snapshot
    commit stages its own, without a journal or an append: the group commit is the commit point. Raises
    ``StorageError``; what it left behind expires by its TTL."""
    prev_index = None
    if previous is not None:
        try:
            prev_index = repo.read_index(previous)
        except IntegrityError as exc:
            log.warning("the previous snapshot of partition %s is unreadable (%s): uploading every file", partition,
                        redact(str(exc)))
    spec = SnapshotSpec(new_checkpoint_id(), now_ms(), batch_id, writer_id or f"partition-{partition}", "rocksdb",
                        ttl_ms, chunk_size)
    staged = staging.stage_snapshot(repo, key, checkpoint_dir, spec, previous=previous, previous_index=prev_index,
                                    walks=HealWalks(repo, key), cache=ChecksumCache(),
                                    is_mutable=open_local_store("rocksdb", settings=repo.settings).is_mutable)
    entry = PartitionEntry(partition, SNAPSHOT, spec.commit_id, batch_id, staged.index_id, staged.crc32c,
                           len(staged.data), attempt, base)
    return StagedSnapshot(entry, tuple(r.blob_id for r in staged.puts), staged.bytes_planned + len(staged.data))


__all__ = ["Repository", "RestoreResult", "StagedSnapshot", "entries", "heal_parts", "local_checkpoint",
           "open_repository", "read_changes", "restore_into", "restore_partition", "stage_changelog",
           "stage_snapshot", "worker_repository"]
