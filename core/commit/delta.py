"""Delta commits: one batch's changelog, uploaded as one blob and committed as a delta record, every step journaled.

The per-batch half of changelog checkpointing (Spark's RocksDB state store changelog, Flink's changelog state
backend, Samza's changelog + blob store): inside the batch, before it is acknowledged, its writes become durable as
one small blob and one append; the snapshot of the whole store follows in the background
(``blobstate.commit.backup``) and retention drops the deltas it supersedes (``blobstate.model.chain``). A delta commit
shares its store's session (lock and journal), cleanup executor and ``CommitPoint`` with the store's snapshot
commits, so both kinds are ordered in one generation sequence and obey the same safety rules
(``blobstate.commit.backup``'s docstring):

1. ``CommitStarted`` (kind ``delta``), ``UploadsPlanned``  the changelog blob id, durable before the upload
2. the changelog bytes kept in the work directory (healing), the blob put with a TTL, ``BlobUploaded``; a
   changelog of at most ``MAX_INLINE_CHANGELOG_BYTES`` is not uploaded at all: the record carries it
   (``changelogInline``; Flink keeps state below ``state.storage.fs.memory-threshold`` inside its checkpoint
   metadata file the same way), so it becomes durable with the commit point itself and plans no upload: nothing to
   keep, heal, remove a TTL from or orphan. Its ``CheckpointAppending`` journals the record, payload included, so
   recovery re-appends it like any other
3.-4. the commit engine (``blobstate.commit.engine.CommitEngine.commit``, the same for every record kind): the
   TTL budget, ``CommitPoint.append`` of the delta record (an unknown outcome is resolved by re-appending, and
   otherwise left open for recovery), then ``CleanupExecutor.finish``: the blob made permanent (healed first when
   the commit landed late), ``CommitCompleted``

A failure before the append aborts the commit (``CleanupExecutor.abort``: the blob deleted at once); a fenced append
too. ``stage`` and ``commit`` are separate so that a group of partitions can upload their changelogs in parallel
and commit them together (the group checkpoint builds on the same steps).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from blobstate.commit import healing
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.context import StoreCommitContext
from blobstate.commit.healing import HealSources
from blobstate.journal import events as ev
from blobstate.local.checksum import crc32c_bytes
from blobstate.model.layout import new_blob_id, new_checkpoint_id, now_ms
from blobstate.model.records import DELTA, MAX_INLINE_CHANGELOG_BYTES, Checkpoint
from blobstate.plugin.interfaces import PutRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedDelta:
    """A changelog uploaded with its TTL, not committed yet: commit ``commit_id``, blob ``blob_id`` of ``size``
    bytes with CRC32C ``crc32c``, for batch ``batch_id`` of query ``query_id``; ``created_ms`` when it began.
    ``blob_id`` is ``""`` when the changelog goes inline in the record (``inline``): nothing was uploaded."""

    commit_id: str
    batch_id: int
    query_id: str
    blob_id: str
    crc32c: int
    size: int
    created_ms: int
    data: bytes

    @property
    def inline(self) -> bool:
        return not self.blob_id


@dataclass(frozen=True)
class DeltaResult:
    """A committed delta: its record, its size (bytes) and what it cost (ms: upload, append, whole commit)."""

    checkpoint: Checkpoint
    bytes_uploaded: int
    upload_ms: float
    append_ms: float
    duration_ms: float

    def to_json(self) -> dict[str, Any]:
        return {**self.checkpoint.summary_json(), "bytesUploaded": self.bytes_uploaded,
                "uploadMs": round(self.upload_ms, 3), "appendMs": round(self.append_ms, 3),
                "durationMs": round(self.duration_ms, 3)}


class DeltaCommitter:
    """Delta commits of ``committer``'s store, composed from its ``StoreCommitContext`` (the same repository,
    session, cleanup, commit point and engine as its snapshot commits). A changelog of
    at most ``inline_max_bytes`` (bytes; at most and by default ``MAX_INLINE_CHANGELOG_BYTES``, 0: never) goes
    inline in its record, a larger one in a blob of its own.

    Usage::

        with StoreCommitter(StoreKey("job", "0", "counts"), "file:///backups") as committer:
            deltas = DeltaCommitter(committer)
            deltas.commit_changelog(changelog.encode(ops), batch_id=7, query_id="q-1")

    Thread-safe against the store's snapshot commits running in another thread; one delta commit at a time.
    """

    def __init__(self, committer: StoreCommitter, *, inline_max_bytes: int = MAX_INLINE_CHANGELOG_BYTES) -> None:
        self.context: StoreCommitContext = committer.context
        self.inline_max_bytes = max(0, min(inline_max_bytes, MAX_INLINE_CHANGELOG_BYTES))
        self.key = committer.key

    def stage(self, data: bytes, *, batch_id: int, query_id: str = "") -> StagedDelta:
        """Steps 1-2: upload ``data`` (an encoded changelog) as one blob with a TTL, or nothing when it is at most
        ``inline_max_bytes`` (the record carries it). Raises ``StorageError`` (the commit is aborted and
        the blob deleted)."""
        c = self.context
        c.take_over()
        commit_id = new_checkpoint_id()
        blob_id = "" if len(data) <= self.inline_max_bytes else new_blob_id(self.key)
        created = now_ms()
        record = c.session.record
        c.start(commit_id, batch_id, kind=DELTA, created_ms=created)
        record(ev.UploadsPlanned(commit_id, now_ms(), (blob_id,) if blob_id else (), "", len(data)), sync=True)
        if not blob_id:
            return StagedDelta(commit_id, batch_id, query_id, "", crc32c_bytes(data), len(data), created, data)
        try:
            healing.save_index_copy(c.work_dir, commit_id, data, kind="changelog", sync=False)
            c.repo.store.put(PutRequest(blob_id, data, c.ttl_ms, c.repo.metadata_codec))
            record(ev.BlobUploaded(commit_id, now_ms(), blob_id, len(data)))
        except BaseException as exc:
            c.engine.abort(commit_id, exc)
            raise
        return StagedDelta(commit_id, batch_id, query_id, blob_id, crc32c_bytes(data), len(data), created, data)

    def commit(self, staged: StagedDelta) -> Checkpoint:
        """Steps 3-4: the commit point, then the cleanup. Raises ``FencedError`` or ``StorageError`` (aborted),
        ``AppendOutcomeUnknown`` (left open: recovery resolves it before the store's next snapshot)."""
        record = Checkpoint(self.key, staged.commit_id, 0, "", 0, 0, staged.created_ms, staged.batch_id,
                            self.context.writer_id, kind=DELTA, changelog_blob_id=staged.blob_id,
                            changelog_crc32c=staged.crc32c, changelog_size=staged.size, query_id=staged.query_id,
                            changelog_inline=staged.data if staged.inline else None)
        return self.context.engine.commit(record, sources=HealSources({} if staged.inline
                                                                        else {staged.blob_id: staged.data}))

    def commit_changelog(self, data: bytes, *, batch_id: int, query_id: str = "") -> DeltaResult:
        """``stage`` then ``commit``; returns what it cost."""
        t0 = time.perf_counter()
        staged = self.stage(data, batch_id=batch_id, query_id=query_id)
        t1 = time.perf_counter()
        checkpoint = self.commit(staged)
        t2 = time.perf_counter()
        return DeltaResult(checkpoint, staged.size, (t1 - t0) * 1000, (t2 - t1) * 1000, (t2 - t0) * 1000)
