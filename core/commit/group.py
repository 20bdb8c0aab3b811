"""Group checkpoints: one commit point for a micro-batch across the N partitions of a partitioned store.

The partitions' writers (Spark tasks on executors) stage their parts on their own: each uploads its partition's
changelog (or snapshot) with a TTL under the group's store key and hands back a small prepare record, never
touching the checkpoint log. The one process that owns the group (the Spark driver) then commits exactly one part
per partition as **one** group record (``Checkpoint`` of kind ``group``, a manifest of ``PartitionEntry``),
appended with the expected generation: the batch is committed for every partition at once or for none. This is a
two-phase commit with the checkpoint log as the coordinator's decision record (Flink's checkpoint coordinator acks
its tasks' state handles and completes one checkpoint the same way; Kafka Streams' EOS commits a task's offsets and
state in one transaction). A part that is not in a committed group record (a retried, speculative or stale task
attempt) is never referenced: its blobs expire by their TTL and ``blobstate gc`` deletes them.

The steps reuse a delta commit's (``blobstate.commit.delta``), in the group's own session, journal and
``CommitPoint`` on the owning host:

1. ``CommitStarted`` (kind ``group``), ``UploadsPlanned`` with every part's blob id: from here an abort or recovery
   deletes the parts (never a blob a retained record references);
2. the TTL budget, counted from the oldest part's upload, then ``CommitEngine.append`` of the group record: the
   commit point (an unknown outcome is resolved by re-appending, else left open for recovery; a second owner of
   the group is fenced, ``FencedError``);
3. ``CleanupExecutor.finish`` (the commit engine's, ``blobstate.commit.engine``, the same for every record kind):
   every part's TTL removed; a group that landed late has every part checked and a lost one put back from what
   the owner holds (``sources``); after a group that commits snapshots, retention (``blobstate.model.chain``: each
   partition keeps its newest snapshots and the deltas after them); ``CommitCompleted``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from blobstate.commit import healing, planner
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.commit.healing import HealSources
from blobstate.config.options import display_url, redact
from blobstate.errors import BlobstateError, ConfigurationError, IntegrityError, PartitionCountError
from blobstate.journal import events as ev
from blobstate.local.checksum import ChecksumCache, crc32c_bytes
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import DEFAULT_CHUNK_SIZE, new_blob_id, new_checkpoint_id, new_index_id, now_ms
from blobstate.model.records import DELTA, GROUP, MAX_PARTITIONS, SNAPSHOT, Checkpoint, PartitionEntry, StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)


def check_partition_count(history: Sequence[Checkpoint], num_partitions: int, what: str) -> None:
    """``PartitionCountError`` when a group record of ``history`` holds another number of partitions than
    ``num_partitions``; ``ConfigurationError`` for a count outside 1..``MAX_PARTITIONS``."""
    if not 1 <= num_partitions <= MAX_PARTITIONS:
        raise ConfigurationError(f"num_partitions must be 1..{MAX_PARTITIONS}, got {num_partitions}")
    counts = sorted({cp.num_partitions for cp in history if cp.is_group})
    if counts and counts != [num_partitions]:
        raise PartitionCountError(
            f"{what} holds group checkpoints of {', '.join(map(str, counts))} partitions, but it was opened with "
            f"num_partitions={num_partitions}: Spark's hash would send keys to partitions whose state does not hold "
            f"them. Open it with num_partitions={counts[-1]}, or re-partition the state offline first; nothing was "
            "changed")


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
    None or an unreadable index: everything uploaded; a reused blob the store lost uploaded again,
    ``healing.plan_heal``), the new blobs and the index put with a TTL of ``ttl_ms``.
    Samza's blob-store backup steps 3-5 (``blobstate.commit.backup``) without a journal or an append: the group
    commit is the commit point. Raises ``StorageError``; what it left behind expires by its TTL."""
    local_store = open_local_store("rocksdb")
    scanned = planner.scan_directory(checkpoint_dir, ChecksumCache(), is_mutable=local_store.is_mutable)
    prev_index = None
    if previous is not None:
        try:
            prev_index = repo.read_index(previous)
        except IntegrityError as exc:
            log.warning("the previous snapshot of partition %s is unreadable (%s): uploading every file", partition,
                        redact(str(exc)))
    plan = planner.diff(scanned, prev_index, key=key, chunk_size=chunk_size, ttl_ms=ttl_ms,
                        codec_of=repo.choose_codec)
    if prev_index is not None:  # rule 7, as every snapshot: a reused blob the store lost is uploaded again
        plan.puts += healing.plan_heal(plan.files, {f.relpath: f.path for f in scanned},
                                       healing.present_blobs(repo, key), {r.blob_id for r in plan.puts}, ttl_ms)
    commit_id, index_id = new_checkpoint_id(), new_index_id(key)
    index = SnapshotIndex(checkpoint_id=commit_id, created_time_ms=now_ms(), job_name=key.job,
                          job_instance=writer_id or f"partition-{partition}", task_name=key.task,
                          store_name=key.store, dir_index=plan.dir_index(),
                          prev_snapshot_index_blob_id=previous.index_blob_id if previous else None,
                          batch_id=batch_id, store_type="rocksdb")
    data = index.to_bytes()
    repo.store.put_many([PutRequest(index_id, data, ttl_ms), *plan.puts])  # the index beside the blobs (rule 12)
    entry = PartitionEntry(partition, SNAPSHOT, commit_id, batch_id, index_id, crc32c_bytes(data), len(data),
                           attempt, base)
    return StagedSnapshot(entry, tuple(r.blob_id for r in plan.puts), sum(r.size for r in plan.puts) + len(data))


class GroupCommitter(DeltaCommitter):
    """Group commits of ``committer``'s store (its repository, session, cleanup and commit point), one at a time.

    Usage (the owner of the group, once every partition's part is staged)::

        with StoreCommitter(StoreKey("flights", "group", "routes"), repo) as committer:
            groups = GroupCommitter(committer, num_partitions=4)
            groups.commit(entries, batch_id=7, query_id="q-1", created_ms=oldest_upload_ms)
    """

    def __init__(self, committer: StoreCommitter, *, num_partitions: int) -> None:
        super().__init__(committer)
        self.num_partitions = num_partitions

    def commit(self, entries: Sequence[PartitionEntry], *, batch_id: int,  # type: ignore[override]
               query_id: str = "", created_ms: int | None = None, new_blob_ids: Sequence[str] = (),
               sources: HealSources | None = None) -> Checkpoint:
        """Commit ``entries`` (at most one delta and one snapshot per partition) as one group record for
        ``batch_id`` of ``query_id``; ``new_blob_ids``: the blobs the snapshot entries uploaded (their TTLs are
        removed with the entries'). ``sources``: what this host can put a lost part back from (a part's bytes,
        a snapshot part's local checkpoint directory), used when the group lands late (``engine.CommitEngine``).

        ``created_ms``: when the oldest part was uploaded (the TTL budget counts from it; default now). Raises
        ``ConfigurationError`` for a malformed manifest (nothing written), ``FencedError`` (another owner appended:
        the parts are deleted), ``StorageError``, ``AppendOutcomeUnknown`` (left open: recovery resolves it).
        """
        c = self.committer
        c.take_over()
        commit_id = new_checkpoint_id()
        created = now_ms() if created_ms is None else created_ms
        record = Checkpoint(self.key, commit_id, 0, "", 0, 0, created, batch_id, c.writer_id, kind=GROUP,
                            query_id=query_id, num_partitions=self.num_partitions,
                            partitions=tuple(sorted(entries, key=lambda e: (e.partition, e.kind != SNAPSHOT))))
        try:
            Checkpoint.from_bytes(record.with_generation(1).to_bytes(), source=f"group {commit_id}")
        except BlobstateError as exc:
            raise ConfigurationError(f"refusing to commit a malformed group checkpoint: {exc}") from None
        blob_ids = [e.blob_id for e in record.partitions] + list(new_blob_ids)
        session = self.session
        session.record(ev.CommitStarted(commit_id, now_ms(), str(self.key), c.commit_point.generation(), batch_id,
                                        c.retain, display_url(self.repo.url),
                                        display_url(self.repo.log.url or self.repo.url), kind=GROUP,
                                        ttl_ms=self.ttl_ms))
        session.record(ev.UploadsPlanned(commit_id, now_ms(), tuple(blob_ids), "",
                                         sum(e.size for e in record.partitions)), sync=True)
        return c.engine.commit(record, sources=sources)
