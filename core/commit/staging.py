"""Snapshot staging: the one function that turns a local checkpoint into blobs and an index in the store.

Samza's blob-store backup steps 3-5 (``blobstate.commit.backup``), written once for every place a snapshot is
taken: a store's snapshot commit (``StoreCommitter.upload``, which journals each step through ``StageSteps``) and a
partition's snapshot part staged on an executor (``blobstate.worker.stage_snapshot``, no journal: the group commit
is the commit point). ``stage_snapshot``:

1. scans the local checkpoint (a hard-linked copy the local store plugin took) and hashes its files (CRC32C, through
   a ``ChecksumCache``);
2. diffs it against the previous snapshot's index (``planner.diff``: unchanged only if name, size and CRC32C match;
   no previous index: everything is uploaded);
3. puts back a reused blob the store lost (rule 7, ``healing.HealWalks.plan``);
4. builds the new ``SnapshotIndex`` and uploads it beside the new blobs, every one with a TTL (rule 12: the commit
   point waits for both).

Nothing here appends to the checkpoint log: the caller's commit point decides whether the staged snapshot counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from blobstate.commit import planner
from blobstate.commit.healing import HealWalks
from blobstate.local.checksum import ChecksumCache, crc32c_bytes
from blobstate.model.index import FileIndex, SnapshotIndex
from blobstate.model.layout import new_index_id
from blobstate.model.progress import NoProgress, Progress
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.retention import RetentionPolicy, recorded_fields
from blobstate.plugin.interfaces import FileRange, PutRequest
from blobstate.repository.repo import Repository


class StageSteps:
    """What a caller of ``stage_snapshot`` records at each step (the store committer: its journal); every method
    does nothing here."""

    def planned(self, index_id: str, puts: list[PutRequest], bytes_planned: int, index_data: bytes) -> None:
        """The uploads are planned (``puts``, ``bytes_planned`` bytes) and the index built (``index_data``), before
        anything is uploaded."""

    def uploaded(self, request: PutRequest) -> None:
        """The blob of ``request`` is stored (called from the upload threads; never for the index)."""

    def indexed(self, index_id: str, crc32c: int, size: int) -> None:
        """Every blob and the index (``size`` bytes, CRC32C ``crc32c``) are stored."""


NO_STEPS = StageSteps()


@dataclass(frozen=True)
class SnapshotSpec:
    """What the staged snapshot is and records: commit ``commit_id`` created at ``created_ms`` (ms) for
    ``batch_id``, written by ``writer_id``, of a ``store_type`` store; its blobs ``chunk_size`` bytes at most, put
    with a TTL of ``ttl_ms`` (ms); ``policy``: the retention its index records (None: none)."""

    commit_id: str
    created_ms: int
    batch_id: int | None
    writer_id: str
    store_type: str
    ttl_ms: int
    chunk_size: int
    policy: RetentionPolicy | None = None


@dataclass(frozen=True)
class StagedIndex:
    """A staged snapshot: its index (``index``, stored as blob ``index_id``: ``data``, CRC32C ``crc32c``), the
    uploads it made (``puts``, ``bytes_planned`` bytes, the index left out), the files it lists (``files``, of which
    ``files_uploaded`` went up) and whether it walked the store's prefix to heal (``walked``)."""

    index_id: str
    index: SnapshotIndex
    data: bytes
    crc32c: int
    puts: list[PutRequest]
    bytes_planned: int
    files: Mapping[str, FileIndex]
    files_uploaded: int
    walked: bool


def stage_snapshot(repo: Repository, key: StoreKey, checkpoint_dir: str, spec: SnapshotSpec, *,
                   previous: Checkpoint | None, previous_index: SnapshotIndex | None, walks: HealWalks,
                   cache: ChecksumCache, is_mutable: Callable[[str], bool], steps: StageSteps = NO_STEPS,
                   progress: Progress | None = None) -> StagedIndex:
    """Stage the local checkpoint ``checkpoint_dir`` of ``key`` as a snapshot in ``repo`` (module docstring), diffed
    against ``previous`` (the snapshot record it follows; None: the first) whose index is ``previous_index`` (None
    when there is none or it is unreadable: every file is uploaded). ``walks``: when to walk the store's prefix for
    lost reused blobs (a fresh ``HealWalks`` walks whenever a blob is reused); ``cache``: the files' checksums
    (``is_mutable(relpath)``: a file the local store may still change, never reused); ``steps``: what the caller
    records at each step; ``progress``: bytes and files uploaded. Raises ``StorageError`` (what was uploaded
    expires by its TTL unless the caller deletes it first)."""
    scanned = planner.scan_directory(checkpoint_dir, cache, is_mutable=is_mutable)
    plan = planner.diff(scanned, previous_index, key=key, chunk_size=spec.chunk_size, ttl_ms=spec.ttl_ms,
                        codec_of=repo.choose_codec)
    heal, walked = walks.plan(previous.checkpoint_id if previous is not None else None, plan.files,
                              {f.relpath: f.path for f in scanned}, {r.blob_id for r in plan.puts}, spec.ttl_ms)
    plan.puts += heal
    healed = {r.source.path for r in heal if isinstance(r.source, FileRange)}
    plan.uploaded += [f.relpath for f in scanned if f.path in healed]
    retain, retention = recorded_fields(spec.policy) if spec.policy is not None else (None, None)
    index_id = new_index_id(key)
    index = SnapshotIndex(
        checkpoint_id=spec.commit_id, created_time_ms=spec.created_ms, job_name=key.job, job_instance=spec.writer_id,
        task_name=key.task, store_name=key.store, dir_index=plan.dir_index(),
        prev_snapshot_index_blob_id=previous.index_blob_id if previous is not None else None,
        batch_id=spec.batch_id, store_type=spec.store_type, retain=retain, retention_policy=retention,
    )
    data = index.to_bytes()
    bytes_planned = sum(r.size for r in plan.puts)
    steps.planned(index_id, plan.puts, bytes_planned, data)
    # the index goes beside the blobs (it names them, and the scan already knows their checksums): the commit
    # point waits for both, so nothing it references is missing (rule 12), one round trip less
    _upload(repo, key, plan.puts, bytes_planned, PutRequest(index_id, data, spec.ttl_ms), steps,
            progress or NoProgress())
    crc = crc32c_bytes(data)
    steps.indexed(index_id, crc, len(data))
    return StagedIndex(index_id, index, data, crc, plan.puts, bytes_planned, plan.files, plan.files_uploaded, walked)


def _upload(repo: Repository, key: StoreKey, puts: list[PutRequest], total: int, index: PutRequest,
            steps: StageSteps, progress: Progress) -> None:
    """Put ``index`` and ``puts`` (largest first), ``max_concurrency`` at a time. Progress counts files, not chunks:
    a file is done when its last chunk is."""
    chunks_left = Counter(_source_name(r) for r in puts)
    lock = threading.Lock()
    progress.start(f"upload {key}", total, len(chunks_left))

    def one(request: PutRequest) -> None:
        repo.store.put(request)
        if request is index:
            return
        steps.uploaded(request)
        with lock:
            chunks_left[_source_name(request)] -= 1
            file_done = chunks_left[_source_name(request)] == 0
        progress.advance(request.size, 1 if file_done else 0)

    try:
        repo.store.map_concurrent(one, [index, *sorted(puts, key=lambda r: -r.size)])
    finally:
        progress.finish()


def _source_name(request: PutRequest) -> str:
    """The local file a blob's bytes come from (the blob id for in-memory bytes)."""
    return request.source.path if isinstance(request.source, FileRange) else request.blob_id
