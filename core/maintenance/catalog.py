"""Read-only views of a repository for people: checkpoint summaries (``list``), a snapshot's files (``ls``), the
difference between two snapshots (``diff``) and a store's space use and deduplication (``stats``).

Everything here is read from the checkpoint records and the snapshot indexes (verified against their records by
``Repository.read_index``) and, for ``stats``, one listing of the store's prefix; nothing is written. Sizes in
bytes, times in ms since the epoch (JSON adds ISO 8601 UTC forms).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from blobstate.config.options import redact
from blobstate.config.units import iso_time
from blobstate.errors import BlobstateError
from blobstate.model import layout, references
from blobstate.model.chain import has_groups, partition_history, partitions_of, plan_chain
from blobstate.model.index import DirIndex, FileIndex, SnapshotIndex, SymlinkIndex
from blobstate.model.records import Checkpoint, PartitionRecord, StoreKey
from blobstate.plugin.interfaces import BlobInfo
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
    partitions_committed: int | None = None  # a group record: how many of its ``num_partitions`` it commits
    #: a key-grouped group record that is the first of a rescale at restart: the number of partitions before it
    regrouped_from: int | None = None

    @property
    def host(self) -> str:
        return writer_host(self.checkpoint.writer_id)

    def to_json(self) -> dict[str, Any]:
        cp = self.checkpoint
        return {"store": str(cp.store_key), **cp.summary_json(), "createdTime": iso_time(cp.created_time_ms),
                "createdTimeMs": cp.created_time_ms, "host": self.host, "writerId": cp.writer_id,
                "filesTotal": self.files_total, "bytesTotal": self.bytes_total, "storeType": self.store_type,
                "indexBlobId": cp.index_blob_id, "indexSizeInBytes": cp.index_size, "error": self.error,
                **({"partitions": cp.num_partitions, "partitionsCommitted": self.partitions_committed}
                   if cp.is_group else {}),
                **({"keyGroups": cp.key_groups} if cp.is_group and cp.key_groups else {}),
                **({"regroupedFrom": self.regrouped_from} if self.regrouped_from else {}),
                **({"replicas": [msgspec.to_builtins(r) for r in cp.replicas]} if cp.replicas else {}),
                **({"partition": cp.partition} if isinstance(cp, PartitionRecord) else {})}


def summarize(repo: Repository, checkpoint: Checkpoint) -> tuple[CheckpointSummary, SnapshotIndex | None]:
    """The summary of ``checkpoint`` and its index (``None`` when unreadable: the summary carries the error; a
    delta record: its changelog's size, no index)."""
    if checkpoint.is_delta:
        return CheckpointSummary(checkpoint, None, checkpoint.changelog_size), None
    if checkpoint.is_group:
        return _summarize_group(repo, checkpoint), None
    [ref] = references.walk_references([checkpoint], repo.read_index)
    return summary_of(ref), ref.index


def summary_of(ref: references.Reference) -> CheckpointSummary:
    """The summary of a snapshot record whose index was read (or not: the summary carries the error)."""
    if ref.index is None:
        return CheckpointSummary(ref.record, None, None, error=f"{type(ref.error).__name__}: {redact(str(ref.error))}")
    files = ref.index.files()
    return CheckpointSummary(ref.record, len(files), sum(f.size_in_bytes for f in files.values()),
                             ref.index.store_type)


def _summarize_group(repo: Repository, group: Checkpoint) -> CheckpointSummary:
    """A group record's summary: the files and data bytes of the partition snapshots it commits (files ``None``
    when it commits deltas only), plus the bytes of its changelogs; ``partitions_committed`` of ``num_partitions``."""
    files: int | None = None
    size, errors = 0, []
    for ref in references.walk_references([group], repo.read_index):
        part = ref.record
        if part.is_delta:
            size += part.changelog_size
            continue
        summary = summary_of(ref)
        if summary.error is not None:
            errors.append(f"partition {getattr(part, 'partition', '?')}: {summary.error}")
            continue
        files = (files or 0) + (summary.files_total or 0)
        size += summary.bytes_total or 0
    return CheckpointSummary(group, files, size, "rocksdb", "; ".join(errors) or None,
                             len({e.partition for e in group.partitions}))


def mark_regroups(summaries: list[CheckpointSummary]) -> list[CheckpointSummary]:
    """``summaries`` of one store's records (by generation) with ``regrouped_from`` set on each group record whose
    number of partitions differs from the group record before it (a key-grouped store's rescale at restart)."""
    out, before = [], 0
    for s in summaries:
        cp = s.checkpoint
        if cp.is_group and cp.partitions:
            if before and cp.num_partitions != before:
                s = replace(s, regrouped_from=before)
            before = cp.num_partitions
        out.append(s)
    return out


@dataclass(frozen=True)
class Listing:
    """The files of one snapshot (``blobstate ls``), sorted by path."""

    summary: CheckpointSummary
    files: list[tuple[str, FileIndex]]
    deltas_after: int = 0  # a partition's snapshot: the deltas its latest state replays on top (``--partition``)

    def to_json(self) -> dict[str, Any]:
        return {**self.summary.to_json(), "deltasAfter": self.deltas_after,
                "files": [{"path": path, "sizeInBytes": f.size_in_bytes, "crc32c": f.crc32c, "blobs": len(f.blobs),
                           "mtime": f.mtime} for path, f in self.files]}


def list_files(repo: Repository, checkpoint: Checkpoint, prefix: str = "", deltas_after: int = 0) -> Listing:
    """The files of ``checkpoint``'s snapshot whose path starts with ``prefix``. Raises the index's
    ``IntegrityError`` when it cannot be read."""
    index = repo.read_index(checkpoint)
    files = sorted((p, f) for p, f in index.files().items() if p.startswith(prefix))
    summary = CheckpointSummary(checkpoint, len(files), sum(f.size_in_bytes for _, f in files), index.store_type)
    return Listing(summary, files, deltas_after)


@dataclass
class SnapshotDiff:
    """What changed from snapshot ``base`` to ``target`` of one store: files and links added, removed and changed
    (``same_entry``: content, mode, mtime, link target; never ctime), how many stayed, and how many of
    ``target``'s blobs ``base`` already held (shared, not uploaded again)."""

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
    old_entries, new_entries = _leaves(old), _leaves(new)
    for path in sorted(old_entries.keys() | new_entries.keys()):
        a, b = old_entries.get(path), new_entries.get(path)
        if a is None and b is not None:
            result.added.append((path, _size(b)))
        elif b is None and a is not None:
            result.removed.append((path, _size(a)))
        elif a is not None and b is not None:
            if same_entry(a, b):
                result.unchanged += 1
            else:
                result.changed.append((path, _size(a), _size(b)))
    old_blobs = old.referenced_blob_ids()
    new_blobs = new.referenced_blob_ids()
    result.blobs_shared = len(new_blobs & old_blobs)
    result.blobs_new = len(new_blobs - old_blobs)
    return result


def _leaves(index: SnapshotIndex) -> dict[str, FileIndex | SymlinkIndex]:
    """The files and links of ``index`` by path (directories are not compared: their files are)."""
    return {p: e for p, e in index.entries().items() if not isinstance(e, DirIndex)}


def _size(entry: FileIndex | SymlinkIndex) -> int:
    return entry.size_in_bytes if isinstance(entry, FileIndex) else 0


def _same_mtime(a: FileIndex | SymlinkIndex, b: FileIndex | SymlinkIndex) -> bool:
    """The finest mtime both entries record: ns (index version 2), else ms (a file of version 1)."""
    if a.mtime_ns is not None and b.mtime_ns is not None:
        return a.mtime_ns == b.mtime_ns
    return getattr(a, "mtime", None) == getattr(b, "mtime", None)


def same_entry(a: FileIndex | SymlinkIndex, b: FileIndex | SymlinkIndex) -> bool:
    """True when two snapshots hold the same entry: a file with the same size, CRC32C, content hash, permission
    bits and mtime, or a link with the same target and mtime. Never ctime: it moves on any metadata touch (a
    chmod to the same mode, a hard link) and belongs only in the local checksum cache's key."""
    if isinstance(a, FileIndex) and isinstance(b, FileIndex):
        return a.same_content(b.size_in_bytes, b.crc32c, b.content_hash) and a.mode == b.mode and _same_mtime(a, b)
    if isinstance(a, SymlinkIndex) and isinstance(b, SymlinkIndex):
        return a.target == b.target and _same_mtime(a, b)
    return False


@dataclass
class StoreStats:
    """Space use of one store: retained checkpoints, the latest one's summary (a partitioned store: its latest
    state, every partition's newest snapshot added up), the logical bytes of every retained snapshot added up, the
    blobs they reference (stored bytes; ``changelog_bytes`` of them delta changelogs), everything stored under the
    store's prefix, and the deduplication ratio (logical bytes / referenced snapshot data bytes: how much
    incremental backups save; changelogs are not snapshot data and do not count)."""

    key: StoreKey
    checkpoints: int = 0
    latest: CheckpointSummary | None = None
    partitions: int = 0  # a partitioned store's number of partitions (0: not one)
    changelog_bytes: int = 0
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
        data = self.referenced_bytes - self.changelog_bytes
        return round(self.logical_bytes / data, 3) if data > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "checkpoints": self.checkpoints,
                "latest": self.latest.to_json() if self.latest else None, "logicalBytes": self.logical_bytes,
                "partitions": self.partitions, "changelogBytes": self.changelog_bytes,
                "referencedBlobs": self.referenced_blobs, "referencedBytes": self.referenced_bytes,
                "storedBlobs": self.stored_blobs, "storedBytes": self.stored_bytes, "indexBytes": self.index_bytes,
                "unreferencedBytes": self.unreferenced_bytes, "dedupRatio": self.dedup_ratio,
                "problems": self.problems}


def store_stats(repo: Repository, key: StoreKey, *, listing: Iterable[BlobInfo] | None = None,
                history: list[Checkpoint] | None = None) -> StoreStats:
    """Sizes, file counts and deduplication of ``key`` (one listing of its prefix, one read per retained index;
    ``listing`` and ``history``: its objects and records as a repository-wide view already read them)."""
    stats = StoreStats(key)
    sizes: dict[str, int] = {}
    for info in listing if listing is not None else repo.store.list(key.prefix):
        if layout.kind_of(info.blob_id) in (layout.ObjectKind.BLOB, layout.ObjectKind.INDEX):
            sizes[info.blob_id] = info.size
            stats.stored_blobs += 1
            stats.stored_bytes += info.size
    referenced: set[str] = set()
    changelogs: set[str] = set()
    history = history if history is not None else repo.log.history(key)
    stats.checkpoints = len(history)
    for ref in references.walk_references(history, repo.read_index):
        if ref.record.is_delta:
            changelogs |= ref.objects  # none for a changelog carried in its record
            continue
        stats.latest = summary_of(ref)
        stats.index_bytes += sizes.get(ref.own, 0)
        if ref.index is None:
            stats.problems.append(f"{ref.record.checkpoint_id}: {stats.latest.error}")
            continue
        stats.logical_bytes += stats.latest.bytes_total or 0
        referenced |= ref.index.referenced_blob_ids()
    stats.changelog_bytes = sum(sizes.get(b, 0) for b in changelogs)
    referenced |= changelogs
    if has_groups(history):
        stats.partitions = history[-1].num_partitions
        stats.latest = _latest_partitioned(repo, history)
    stats.referenced_blobs = len(referenced)
    stats.referenced_bytes = sum(sizes.get(b, 0) for b in referenced)
    missing = [b for b in referenced if b not in sizes]
    if missing:
        stats.problems.append(f"{len(missing)} referenced blob(s) missing from the store (run blobstate verify)")
    return stats


def _latest_partitioned(repo: Repository, history: list[Checkpoint]) -> CheckpointSummary:
    """A partitioned store's latest state as one summary: every partition's newest snapshot (the one its latest
    chain starts from) added up, files and data bytes, and the changelogs replayed on top (bytes)."""
    files, size, errors = 0, 0, []
    for p in partitions_of(history):
        try:
            chain = plan_chain(partition_history(history, p))
        except BlobstateError as exc:
            errors.append(f"partition {p}: {type(exc).__name__}: {exc}")
            continue
        size += chain.changelog_bytes
        if chain.snapshot is not None:
            summary, _ = summarize(repo, chain.snapshot)
            if summary.error is not None:
                errors.append(f"partition {p}: {summary.error}")
            files += summary.files_total or 0
            size += summary.bytes_total or 0
    latest = history[-1]
    return CheckpointSummary(latest, files, size, "rocksdb", "; ".join(errors) or None,
                             len(partitions_of(history)))
