"""Read-only views of a repository for people: checkpoint summaries (``list``), a snapshot's files (``ls``), the
difference between two snapshots (``diff``) and a store's space use and deduplication (``stats``).

Everything here is read from the checkpoint records and the snapshot indexes (verified against their records by
``Repository.read_index``) and, for ``stats``, one listing of the store's prefix; nothing is written. Sizes in
bytes, times in ms since the epoch (JSON adds ISO 8601 UTC forms).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import BlobstateError
from blobstate.model.chain import expand_all
from blobstate.model.index import FileIndex, SnapshotIndex
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.units import iso_time
from blobstate.repository.options import redact
from blobstate.repository.repo import Repository


def writer_host(writer_id: str) -> str:
    """The host part of a writer id (``host:pid:nonce``, what ``StoreCommitter`` records); the id itself else."""
    return writer_id.split(":", 1)[0] if writer_id else ""


@dataclass(frozen=True)
class CheckpointSummary:
    """One checkpoint as ``blobstate list`` shows it: the record, and the file count and data size (bytes) its
    index holds (``None`` with ``error`` set when the index cannot be read)."""

    checkpoint: Checkpoint
    files_total: int | None
    bytes_total: int | None
    store_type: str | None = None
    error: str | None = None

    @property
    def host(self) -> str:
        return writer_host(self.checkpoint.writer_id)

    def to_json(self) -> dict[str, Any]:
        cp = self.checkpoint
        return {"store": str(cp.store_key), **cp.summary_json(), "createdTime": iso_time(cp.created_time_ms),
                "createdTimeMs": cp.created_time_ms, "host": self.host, "writerId": cp.writer_id,
                "filesTotal": self.files_total, "bytesTotal": self.bytes_total, "storeType": self.store_type,
                "indexBlobId": cp.index_blob_id, "indexSizeInBytes": cp.index_size, "error": self.error}


def summarize(repo: Repository, checkpoint: Checkpoint) -> tuple[CheckpointSummary, SnapshotIndex | None]:
    """The summary of ``checkpoint`` and its index (``None`` when unreadable: the summary carries the error; a
    delta record: its changelog's size, no index)."""
    if checkpoint.is_delta:
        return CheckpointSummary(checkpoint, None, checkpoint.changelog_size), None
    if checkpoint.is_group:
        return CheckpointSummary(checkpoint, None, sum(e.size for e in checkpoint.partitions)), None
    try:
        index = repo.read_index(checkpoint)
    except BlobstateError as exc:
        return CheckpointSummary(checkpoint, None, None, error=f"{type(exc).__name__}: {redact(str(exc))}"), None
    files = index.files()
    return CheckpointSummary(checkpoint, len(files), sum(f.size_in_bytes for f in files.values()),
                             index.store_type), index


@dataclass(frozen=True)
class Listing:
    """The files of one snapshot (``blobstate ls``), sorted by path."""

    summary: CheckpointSummary
    files: list[tuple[str, FileIndex]]

    def to_json(self) -> dict[str, Any]:
        return {**self.summary.to_json(),
                "files": [{"path": path, "sizeInBytes": f.size_in_bytes, "crc32c": f.crc32c, "blobs": len(f.blobs),
                           "mtime": f.mtime} for path, f in self.files]}


def list_files(repo: Repository, checkpoint: Checkpoint, prefix: str = "") -> Listing:
    """The files of ``checkpoint``'s snapshot whose path starts with ``prefix``. Raises the index's
    ``IntegrityError`` when it cannot be read."""
    index = repo.read_index(checkpoint)
    files = sorted((p, f) for p, f in index.files().items() if p.startswith(prefix))
    summary = CheckpointSummary(checkpoint, len(files), sum(f.size_in_bytes for _, f in files), index.store_type)
    return Listing(summary, files)


@dataclass
class SnapshotDiff:
    """What changed from snapshot ``base`` to ``target`` of one store: files added, removed and changed (by size
    and CRC32C), how many stayed, and how many of ``target``'s blobs ``base`` already held (shared, not
    uploaded again)."""

    base: CheckpointSummary
    target: CheckpointSummary
    added: list[tuple[str, int]] = field(default_factory=list)
    removed: list[tuple[str, int]] = field(default_factory=list)
    changed: list[tuple[str, int, int]] = field(default_factory=list)
    unchanged: int = 0
    blobs_shared: int = 0
    blobs_new: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.target.checkpoint.store_key), "from": self.base.to_json(),
                "to": self.target.to_json(),
                "added": [{"path": p, "sizeInBytes": s} for p, s in self.added],
                "removed": [{"path": p, "sizeInBytes": s} for p, s in self.removed],
                "changed": [{"path": p, "sizeBefore": a, "sizeAfter": b} for p, a, b in self.changed],
                "unchanged": self.unchanged, "blobsShared": self.blobs_shared, "blobsNew": self.blobs_new}


def diff_snapshots(repo: Repository, base: Checkpoint, target: Checkpoint) -> SnapshotDiff:
    """Compare two snapshots file by file. Raises an index's ``IntegrityError`` when it cannot be read."""
    old, new = repo.read_index(base), repo.read_index(target)
    old_files, new_files = old.files(), new.files()
    result = SnapshotDiff(
        CheckpointSummary(base, len(old_files), old.total_bytes(), old.store_type),
        CheckpointSummary(target, len(new_files), new.total_bytes(), new.store_type))
    for path in sorted(old_files.keys() | new_files.keys()):
        a, b = old_files.get(path), new_files.get(path)
        if a is None and b is not None:
            result.added.append((path, b.size_in_bytes))
        elif b is None and a is not None:
            result.removed.append((path, a.size_in_bytes))
        elif a is not None and b is not None:
            if a.same_content(b.size_in_bytes, b.crc32c):
                result.unchanged += 1
            else:
                result.changed.append((path, a.size_in_bytes, b.size_in_bytes))
    old_blobs = old.referenced_blob_ids()
    new_blobs = new.referenced_blob_ids()
    result.blobs_shared = len(new_blobs & old_blobs)
    result.blobs_new = len(new_blobs - old_blobs)
    return result


@dataclass
class StoreStats:
    """Space use of one store: retained checkpoints, the latest one's summary, the logical bytes of every retained
    snapshot added up, the blobs they reference (stored bytes), everything stored under the store's prefix, and
    the deduplication ratio (logical bytes / referenced data bytes: how much incremental backups save)."""

    key: StoreKey
    checkpoints: int = 0
    latest: CheckpointSummary | None = None
    logical_bytes: int = 0
    referenced_blobs: int = 0
    referenced_bytes: int = 0
    stored_blobs: int = 0
    stored_bytes: int = 0
    index_bytes: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def unreferenced_bytes(self) -> int:
        return max(0, self.stored_bytes - self.referenced_bytes - self.index_bytes)

    @property
    def dedup_ratio(self) -> float | None:
        return round(self.logical_bytes / self.referenced_bytes, 3) if self.referenced_bytes else None

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "checkpoints": self.checkpoints,
                "latest": self.latest.to_json() if self.latest else None, "logicalBytes": self.logical_bytes,
                "referencedBlobs": self.referenced_blobs, "referencedBytes": self.referenced_bytes,
                "storedBlobs": self.stored_blobs, "storedBytes": self.stored_bytes, "indexBytes": self.index_bytes,
                "unreferencedBytes": self.unreferenced_bytes, "dedupRatio": self.dedup_ratio,
                "problems": self.problems}


def store_stats(repo: Repository, key: StoreKey) -> StoreStats:
    """Sizes, file counts and deduplication of ``key`` (one listing of its prefix, one read per retained index)."""
    stats = StoreStats(key)
    sizes: dict[str, int] = {}
    for info in repo.store.list(key.prefix):
        kind = posixpath.basename(posixpath.dirname(info.blob_id))
        if kind in ("blobs", "indexes"):
            sizes[info.blob_id] = info.size
            stats.stored_blobs += 1
            stats.stored_bytes += info.size
    referenced: set[str] = set()
    history = repo.log.history(key)
    stats.checkpoints = len(history)
    for cp in expand_all(history):
        if cp.is_delta:
            referenced.add(cp.changelog_blob_id)
            continue
        summary, index = summarize(repo, cp)
        stats.latest = summary
        stats.index_bytes += sizes.get(cp.index_blob_id, 0)
        if index is None:
            stats.problems.append(f"{cp.checkpoint_id}: {summary.error}")
            continue
        stats.logical_bytes += summary.bytes_total or 0
        referenced |= index.referenced_blob_ids()
    stats.referenced_blobs = len(referenced)
    stats.referenced_bytes = sum(sizes.get(b, 0) for b in referenced)
    missing = [b for b in referenced if b not in sizes]
    if missing:
        stats.problems.append(f"{len(missing)} referenced blob(s) missing from the store (run blobstate verify)")
    return stats
