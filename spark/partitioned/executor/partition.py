"""A partition's copy on an executor's host: its directory, its lock, its RocksDB and the record it is at.

``LocalPartition`` is what every task of a partition (a batch's, ``blobstate.spark.partitioned.executor.batch_task``;
a snapshot's, ``blobstate.spark.partitioned.executor.snapshot_task``) holds while it runs: the lock file (one attempt
at a time on a host), the database kept open by this Python worker between tasks or taken over from the process
that has it (``blobstate.spark.executor.open_partitions``), and the copy brought to the state a batch needs
(``LocalPartition.ensure_at``: its own copy plus the changelogs this host kept, or a verified restore through
``blobstate.worker.restore_partition``). ``locate_task`` and ``release_task`` are the small tasks placement
runs on every executor (``blobstate.spark.placement.coordinator.SparkPlacement``): the copies a host has, and their
databases closed.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import CommitInProgressError
from blobstate.local.checksum import crc32c_bytes
from blobstate.local.files import try_lock
from blobstate.model import changelog
from blobstate.model.align import chain_to
from blobstate.model.chain import BrokenChainError, current_run, latest_deltas
from blobstate.model.local_copy import first_batch_to_apply
from blobstate.model.records import Checkpoint, PartitionEntry, StoreKey
from blobstate.spark.executor import open_partitions
from blobstate.spark.executor.identity import task_identity
from blobstate.spark.executor.leftovers import sweep
from blobstate.worker import Repository, restore_partition

SNAPSHOT_PREFIX = "snapshot-"  # a snapshot task's local checkpoint in the partition's directory (held while used)
LOCK_WAIT_S = 60.0  # how long an attempt waits for the previous one on this host to let go of the partition


@dataclass
class Fetched:
    """How a local copy was brought up to date."""

    record: str = ""
    snapshot: Checkpoint | None = None  # the newest snapshot record of the chain the copy is at
    restored: bool = False
    files: int = 0
    bytes: int = 0
    applied: list[str] = field(default_factory=list)


def partition_dir(local_dir: str, key: StoreKey, partition: int) -> str:
    """``<local_dir>/<job>/<task>/<store>/p<partition>``: partition ``partition``'s directory on a host."""
    return os.path.join(local_dir, key.job, key.task, key.store, f"p{partition:04d}")


class LocalPartition:
    """Partition ``partition``'s directory on this host: ``db/`` (RocksDB), ``applied.json`` (the record the copy is
    at), ``pending/`` (changelogs this host wrote, by checkpoint id), a lock file. A context manager: the lock is taken
    on enter (``CommitInProgressError`` after ``wait_s``, default ``LOCK_WAIT_S``), then the directory's ownership
    (``blobstate.spark.executor.open_partitions.take``: the database this process kept open, or taken over); on exit the
    database stays open for this process's next task (closed when ``keep_open`` is False, when the block raised, or when
    Spark does not reuse its Python workers) and the lock is let go."""

    def __init__(self, local_dir: str, key: StoreKey, partition: int, *, wait_s: float = LOCK_WAIT_S,
                 keep_open: bool = True) -> None:
        self.path = partition_dir(local_dir, key, partition)
        self.wait_s = wait_s
        self.keep_open = keep_open
        self.db_path = os.path.join(self.path, "db")
        self.pending = os.path.join(self.path, "pending")
        self._fd: int | None = None
        self._open: open_partitions.OpenPartition | None = None

    def __enter__(self) -> LocalPartition:
        os.makedirs(self.pending, exist_ok=True)
        deadline = time.monotonic() + self.wait_s
        while (fd := try_lock(os.path.join(self.path, "LOCK"), 0o644)) is None:
            if time.monotonic() >= deadline:
                raise CommitInProgressError(f"another task holds {self.path}")
            time.sleep(0.05)  # another task of this partition finishes first
        self._fd = fd
        try:
            sweep(self.path, f"{SNAPSHOT_PREFIX}*")  # local checkpoints of snapshot tasks that died
            self._open = open_partitions.take(self.path, deadline)
        except BaseException:
            self._let_go()
            raise
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            if self._open is not None:
                handle, self._open = self._open, None
                open_partitions.give_back(handle, close=exc_type is not None or not self.keep_open)
        finally:
            self._let_go()

    def _let_go(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def owned(self) -> open_partitions.OpenPartition:
        if self._open is None:
            raise RuntimeError(f"{self.path} is used outside its context")
        return self._open

    def open_db(self) -> Any:
        return self.owned.open_db()

    def close_db(self) -> None:
        self.owned.close_db()

    def marker(self) -> dict[str, Any] | None:
        return self.owned.marker if os.path.isdir(self.db_path) else None

    def _mark(self, record: Checkpoint | None) -> None:
        """The copy is at ``record`` (None: the empty state before the first batch), its writes durable."""
        self.owned.set_marker({"checkpointId": record.checkpoint_id if record else "",
                               "batchId": record.batch_id if record else None})

    def keep(self, entry: PartitionEntry, data: bytes) -> None:
        """Keep this task's changelog: the next batch applies it from here when the driver committed it."""
        with open(os.path.join(self.pending, f"{entry.checkpoint_id}.tmp"), "wb") as fh:
            fh.write(data)
        os.replace(os.path.join(self.pending, f"{entry.checkpoint_id}.tmp"),
                   os.path.join(self.pending, entry.checkpoint_id))

    def kept(self, record: Checkpoint) -> bytes | None:
        """The changelog of delta ``record`` this host kept, when it matches the record's size and CRC32C (None
        otherwise): what the next batch applies, and what ``heal_parts`` puts back."""
        try:
            with open(os.path.join(self.pending, record.checkpoint_id), "rb") as fh:
                data = fh.read(record.changelog_size + 1)
        except OSError:
            return None
        return data if len(data) == record.changelog_size and crc32c_bytes(data) == record.changelog_crc32c else None

    def _changelog(self, repo: Repository, record: Checkpoint, fetched: Fetched) -> bytes:
        """The changelog of delta ``record``: the kept copy when it matches the record, else downloaded."""
        data = self.kept(record)
        if data is not None:
            return data
        data = repo.read_changelog(record)  # size and CRC32C checked
        fetched.files += 1
        fetched.bytes += len(data)
        return data

    def ensure_at(self, repo: Repository, records: tuple[Checkpoint, ...], upto: int | None) -> Fetched:
        """Bring the copy to the state after batch ``upto`` of ``records`` (step 2 of the module docstring), then
        drop the kept changelogs (each is applied now or was never committed)."""
        fetched = self._bring(repo, records, upto, restore=True)
        if fetched is None:  # pragma: no cover - with restore=True there is always a way
            raise RuntimeError(f"{self.path}: no way to the state after batch {upto}")
        for name in os.listdir(self.pending):
            os.remove(os.path.join(self.pending, name))
        return fetched

    def advance_locally(self, repo: Repository, records: tuple[Checkpoint, ...], upto: int) -> Fetched | None:
        """The state after batch ``upto`` from the local copy and the changelogs this host kept alone (no
        download, the kept changelogs left for the next batch): None when the copy is missing, past ``upto`` or off
        the chain. For a snapshot task, which only snapshots where the state already is."""
        return self._bring(repo, records, upto, restore=False)

    def _bring(self, repo: Repository, records: tuple[Checkpoint, ...], upto: int | None, *,
               restore: bool) -> Fetched | None:
        fetched = Fetched()
        if upto is not None and not records:
            raise BrokenChainError(f"partition {self.path}: no committed record up to batch {upto}")
        # the Align door: the chain ends exactly at ``upto`` (a snapshot of an older batch never stands for it)
        chain = chain_to(records, upto, f"partition {self.path}") if upto is not None else None
        marker = self.marker()
        if chain is None:  # the state before the first batch
            if not restore:
                return None
            if marker is None or marker.get("checkpointId"):
                self._wipe()
                self._mark(None)
            return fetched
        deltas = latest_deltas(current_run(records))
        start = self._reusable(marker, chain, deltas)
        if start is None and not restore:
            return None
        if start is None:
            self._restore(repo, chain, fetched)
        else:
            todo = [deltas[b] for b in range(start, (chain.upto or 0) + 1)]
            if not restore and not all(self.owned.staged_ops(r.checkpoint_id) or self.kept(r) for r in todo):
                return None
            if todo:
                db = self.open_db()
                for record in todo:
                    ops = self.owned.staged_ops(record.checkpoint_id)  # this process staged it: no read, no decode
                    if ops is not None:
                        changelog.apply_ops(db, ops)
                    else:
                        changelog.replay(db, self._changelog(repo, record, fetched), source=record.changelog_blob_id)
                    fetched.applied.append(record.checkpoint_id)
                db.flush_wal(True)  # the database stays open: its WAL makes the writes durable before the marker
                self._mark(todo[-1])
        fetched.record = chain.records[-1].checkpoint_id
        fetched.snapshot = chain.snapshot
        return fetched

    @staticmethod
    def _reusable(marker: dict[str, Any] | None, chain: Any, deltas: dict[int, Checkpoint]) -> int | None:
        """The first batch to apply on the local copy, or None when it must be restored
        (``blobstate.model.local_copy.first_batch_to_apply``: a copy is used only at the committed record)."""
        return first_batch_to_apply(marker, chain, deltas)

    def _restore(self, repo: Repository, chain: Any, fetched: Fetched) -> None:
        if chain.snapshot is None:
            self._wipe()
        else:  # the snapshot restore keeps the files of the local copy that are already right
            self.close_db()
            self.owned.set_marker(None)
        result = restore_partition(repo, chain, self.db_path, work_dir=os.path.join(self.path, "restore-work"))
        fetched.restored = True
        fetched.files += result.files_downloaded + len(chain.deltas)
        fetched.bytes += result.bytes_downloaded + chain.changelog_bytes
        self._mark(chain.records[-1])

    def _wipe(self) -> None:
        self.close_db()
        self.owned.set_marker(None)
        shutil.rmtree(self.db_path, ignore_errors=True)


def local_markers(local_dir: str, key: StoreKey, num_partitions: int) -> dict[int, str]:
    """``{partition: checkpoint id}`` of the copies on this host whose marker names a record (read without the
    partition's lock: a marker is replaced whole)."""
    out = {}
    for p in range(num_partitions):
        try:
            with open(os.path.join(partition_dir(local_dir, key, p), open_partitions.MARKER), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("checkpointId"), str) and doc["checkpointId"]:
            out[p] = doc["checkpointId"]
    return out


def release_partition(local_dir: str, key: StoreKey, partition: int) -> bool:
    """Close partition ``partition``'s database on this host, wherever a process of it keeps it open (its owner is
    asked to let go, then this one closes it); False when the host has no copy. Raises ``CommitInProgressError``."""
    if not os.path.isdir(partition_dir(local_dir, key, partition)):
        return False
    with LocalPartition(local_dir, key, partition, keep_open=False):
        return True


def locate_task(local_dir: str, key: StoreKey, num_partitions: int, index: int,
                rows: Iterable[Any]) -> Iterator[tuple[str, dict[int, str]]]:
    """A task of placement's locate job: (its executor, ``{partition: the record its host's copy is at}``), from the
    markers on this host (``blobstate.spark.placement.coordinator.Placement.adopt``)."""
    for _ in rows:  # read to the end: Spark reuses only a Python worker that read its input
        pass
    yield task_identity().executor, local_markers(local_dir, key, num_partitions)


def release_task(local_dir: str, key: StoreKey, partition: int, rows: Iterable[Any]) -> Iterator[bool]:
    """Task ``partition`` of placement's release job: its host closes the partition's open database."""
    for _ in rows:  # read to the end: Spark reuses only a Python worker that read its input
        pass
    yield release_partition(local_dir, key, partition)


__all__ = ["LOCK_WAIT_S", "SNAPSHOT_PREFIX", "Fetched", "LocalPartition", "local_markers", "locate_task",
           "partition_dir", "release_partition", "release_task"]
