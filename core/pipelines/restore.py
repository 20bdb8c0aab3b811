"""``blobstate restore``: bring a directory to exactly the files of a snapshot, downloading only what it lacks.

Samza's bulk restore, with Flink's write-to-temp-then-rename and checksums verified on every read, and Ozone's
reuse of files already present: a file already in the destination, or in a local checkpoint directory of the same
store (host affinity), with the index's size and CRC32C is kept or hard-linked, never downloaded. Everything else
is downloaded in parallel into a staging directory beside the destination, verified (size, CRC32C), fsynced, and
only when every file is good is the destination changed: files renamed into place, extra files removed, directories
fsynced. A corrupt or missing blob leaves the destination as it was.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass
from typing import Any

from blobstate import workdir
from blobstate.checksum import ChecksumCache, Crc32cSink
from blobstate.errors import BlobNotFound, ChecksumMismatch
from blobstate.index import FileIndex, SnapshotIndex
from blobstate.interfaces import LocalStore
from blobstate.model import Checkpoint
from blobstate.paths import fsync_dir, safe_join
from blobstate.progress import NoProgress, Progress
from blobstate.repository import Repository


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: the checkpoint restored, files kept / linked / downloaded, bytes downloaded, ms."""

    checkpoint: Checkpoint
    files_total: int
    files_kept: int
    files_reused: int
    files_downloaded: int
    files_removed: int
    bytes_total: int
    bytes_downloaded: int
    duration_ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            **self.checkpoint.summary_json(),
            "filesTotal": self.files_total,
            "filesKept": self.files_kept,
            "filesReused": self.files_reused,
            "filesDownloaded": self.files_downloaded,
            "filesRemoved": self.files_removed,
            "bytesTotal": self.bytes_total,
            "bytesDownloaded": self.bytes_downloaded,
            "durationMs": round(self.duration_ms, 3),
        }


def _matches(path: str, f: FileIndex, cache: ChecksumCache, *, mutable: bool) -> bool:
    """True when ``path`` is a regular file with ``f``'s size and CRC32C (the cache is not trusted for files that
    change in place)."""
    try:
        if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) != f.size_in_bytes:
            return False
        return cache.crc32c(path, trust_cache=not mutable)[1] == f.crc32c
    except OSError:
        return False


def _staging_prefix(dest: str) -> str:
    return os.path.join(os.path.dirname(dest), f".{os.path.basename(dest)}.restore-")


def _sweep_stale_staging(dest: str) -> None:
    """Remove staging directories a crashed restore of ``dest`` left behind."""
    prefix = _staging_prefix(dest)
    parent = os.path.dirname(dest)
    for name in os.listdir(parent):
        path = os.path.join(parent, name)
        if path.startswith(prefix) and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)


def restore_snapshot(repo: Repository, checkpoint: Checkpoint, dest: str, *, local_store: LocalStore,
                     work_dir: str | None = None, cache: ChecksumCache | None = None,
                     progress: Progress | None = None, validate: bool = True) -> RestoreResult:
    """Make ``dest`` hold exactly the files of ``checkpoint``'s snapshot.

    Raises ``ChecksumMismatch``/``BlobNotFound``/``CorruptIndexError``/``UnsafePathError`` (all
    ``IntegrityError``, exit code 3) before the destination is touched.
    """
    t0 = time.perf_counter()
    progress = progress or NoProgress()
    cache = cache or ChecksumCache(os.path.join(work_dir, workdir.CRC_CACHE) if work_dir else None)
    index: SnapshotIndex = repo.read_index(checkpoint)
    os.makedirs(os.path.abspath(dest), exist_ok=True)
    dest = os.path.realpath(dest)  # one path form throughout: targets, extras and staging all resolve symlinks
    _sweep_stale_staging(dest)
    files = index.files()
    targets = {rel: safe_join(dest, rel) for rel in files}  # every name validated before any disk write
    sources = workdir.local_checkpoint_dirs(work_dir) if work_dir else []
    sources.sort(key=lambda p: os.path.basename(p) != checkpoint.checkpoint_id)  # same checkpoint id first

    keep: list[str] = []
    reuse: dict[str, str] = {}
    download: list[str] = []
    for rel, f in files.items():
        mutable = local_store.is_mutable(rel)
        if _matches(targets[rel], f, cache, mutable=mutable):
            keep.append(rel)
            continue
        for src_dir in sources:
            candidate = os.path.join(src_dir, *rel.split("/"))
            if _matches(candidate, f, cache, mutable=mutable):
                reuse[rel] = candidate
                break
        else:
            download.append(rel)

    staging = _staging_prefix(dest) + uuid.uuid4().hex[:8]
    os.makedirs(staging)
    try:
        staged = {rel: os.path.join(staging, *rel.split("/")) for rel in [*reuse, *download]}
        for path in staged.values():
            os.makedirs(os.path.dirname(path), exist_ok=True)
        for rel, src in reuse.items():
            if local_store.is_mutable(rel):
                shutil.copyfile(src, staged[rel])
            else:
                try:
                    os.link(src, staged[rel])
                except OSError:
                    shutil.copyfile(src, staged[rel])
        bytes_down = sum(files[rel].size_in_bytes for rel in download)
        _download(repo, {rel: files[rel] for rel in download}, staged, progress, bytes_down)
        # Every file is good: now, and only now, change the destination.
        for rel in [*reuse, *download]:
            target = targets[rel]
            parent = os.path.dirname(target)
            if os.path.isfile(parent) or os.path.islink(parent):
                os.unlink(parent)
            os.makedirs(parent, exist_ok=True)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            os.replace(staged[rel], target)
        removed = _remove_extras(dest, set(targets.values()))
        for d in {os.path.dirname(t) for t in targets.values()} | {dest}:
            fsync_dir(d)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for rel in download:
        cache.remember(targets[rel], files[rel].crc32c)
    cache.save()
    if validate:
        local_store.validate(dest)
    return RestoreResult(
        checkpoint=checkpoint, files_total=len(files), files_kept=len(keep), files_reused=len(reuse),
        files_downloaded=len(download), files_removed=removed, bytes_total=index.total_bytes(),
        bytes_downloaded=bytes_down, duration_ms=(time.perf_counter() - t0) * 1000,
    )


def _download(repo: Repository, files: dict[str, FileIndex], staged: dict[str, str], progress: Progress,
              total: int) -> None:
    """Download ``files`` into their staged paths, files in parallel, each file's chunks in order, verifying size
    and CRC32C as the bytes stream past (one pass, no re-read), then fsync each file."""
    progress.start("download", total, len(files))

    def one(rel: str) -> None:
        f = files[rel]
        with open(staged[rel], "wb") as fh:
            sink = Crc32cSink(fh)
            for blob, length in f.chunk_ranges():
                sink.mark()
                try:
                    got = repo.store.get(blob.blob_id, sink)  # type: ignore[arg-type]
                except BlobNotFound:
                    raise BlobNotFound(blob.blob_id, f"chunk at offset {blob.offset} of file {rel!r}") from None
                if got != length:
                    raise ChecksumMismatch(
                        f"blob {blob.blob_id} of file {rel!r} holds {got} bytes, the index says {length}")
                progress.advance(length)
            fh.truncate()
            if sink.size != f.size_in_bytes or sink.crc32c != f.crc32c:
                raise ChecksumMismatch(
                    f"file {rel!r} does not match the snapshot index after download (size {sink.size} vs "
                    f"{f.size_in_bytes}, CRC32C {sink.crc32c:#010x} vs {f.crc32c:#010x}): a blob is damaged"
                )
            fh.flush()
            os.fsync(fh.fileno())
        progress.advance(0, 1)

    try:
        repo.store.map_concurrent(one, sorted(files, key=lambda rel: -files[rel].size_in_bytes))
    finally:
        progress.finish()


def _remove_extras(dest: str, wanted: set[str]) -> int:
    """Delete files (and then empty directories) under ``dest`` that the snapshot does not have."""
    removed = 0
    wanted_dirs = {os.path.dirname(p) for p in wanted}
    for dirpath, dirnames, filenames in os.walk(dest, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if path not in wanted:
                os.unlink(path)
                removed += 1
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                os.unlink(path)
                removed += 1
            elif not any(w == path or w.startswith(path + os.sep) for w in wanted_dirs):
                shutil.rmtree(path, ignore_errors=True)
    return removed
