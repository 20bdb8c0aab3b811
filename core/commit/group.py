"""Group checkpoints: one commit point for a micro-batch across the N partitions of a partitioned store.

The partitions' writers (Spark tasks on executors) stage their parts on their own, through
``blobstate.worker`` (the executors' one door into the core): each uploads its partition's changelog (or
snapshot) with a TTL under the group's store key and hands back a small prepare record, never touching the
checkpoint log. This module is the other half, the driver's (no executor imports it): the one process that owns
the group commits exactly one part per partition as **one** group record (``Checkpoint`` of kind ``group``, a
manifest of ``PartitionEntry``), appended with the expected generation: the batch is committed for every partition
at once or for none. This is a two-phase commit with the checkpoint log as the coordinator's decision record
(Flink's checkpoint coordinator acks its tasks' state handles and completes one checkpoint the same way; Kafka
Streams' EOS commits a task's offsets and state in one transaction). A part that is not in a committed group
record (a retried, speculative or stale task attempt) is never referenced: its blobs expire by their TTL and
``blobstate gc`` deletes them.

The steps are a delta commit's (``blobstate.commit.delta``), taken through the group store's one
``StoreCommitContext`` (``blobstate.commit.context``: its session, journal, ``CommitPoint`` and engine on the owning
host), which ``GroupCommitter`` holds, as every committer of a store does:

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

from collections.abc import Sequence
from dataclasses import replace

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.context import StoreCommitContext
from blobstate.commit.healing import HealSources
from blobstate.errors import ConfigurationError, PartitionCountError
from blobstate.journal import events as ev
from blobstate.model.layout import new_checkpoint_id, now_ms
from blobstate.model.records import (
    GROUP,
    MAX_PARTITIONS,
    MAX_RECORD_BYTES,
    SNAPSHOT,
    Checkpoint,
    PartitionEntry,
    Replica,
)


def recorded_key_groups(history: Sequence[Checkpoint]) -> int:
    """The number of key groups the newest group record of ``history`` records (0: a store without key groups, or
    none written yet). Fixed for a store's life (``check_key_groups``)."""
    return next((cp.key_groups for cp in reversed(history) if cp.is_group and cp.partitions), 0)


def check_key_groups(history: Sequence[Checkpoint], key_groups: int | None, what: str) -> int:
    """The number of key groups the store ``what`` (its records ``history``) is written with from now on: the
    recorded one, or ``key_groups`` for a store with no group yet (None: 0, no key groups). ``ConfigurationError``
    when ``key_groups`` is given and differs from what the store's groups record (its keys are prefixed by their
    key group, or not at all, for the store's life): nothing changed."""
    groups = [cp for cp in history if cp.is_group and cp.partitions]
    recorded = recorded_key_groups(groups)
    if key_groups is None or not groups:
        return recorded if groups else (key_groups or 0)
    if key_groups != recorded:
        had = f"{recorded} key groups" if recorded else "no key groups (it was written without them)"
        raise ConfigurationError(
            f"{what} has {had}, but it was opened with key_groups={key_groups}: a store's keys are placed by its "
            f"number of key groups for its life. Open it with key_groups={recorded or None}"
            f"{'' if recorded else ', or re-partition it offline into a new store (blobstate spark rescale)'}; "
            "nothing was changed")
    return recorded


def check_partition_count(history: Sequence[Checkpoint], num_partitions: int, what: str, *,
                          rescale: bool = False) -> None:
    """``PartitionCountError`` when the newest group record of ``history`` holds another number of partitions than
    ``num_partitions``, unless the store has key groups (``recorded_key_groups``) and ``rescale`` (a restart that
    reassigns their ranges, ``blobstate.model.keygroups.plan_rescale``) is allowed; a store without key groups
    must hold only groups of ``num_partitions`` (its rescale is offline: ``blobstate spark rescale``).
    ``ConfigurationError`` for a count outside 1..``MAX_PARTITIONS`` or above the store's key groups."""
    if not 1 <= num_partitions <= MAX_PARTITIONS:
        raise ConfigurationError(f"num_partitions must be 1..{MAX_PARTITIONS}, got {num_partitions}")
    groups = [cp for cp in history if cp.is_group and cp.partitions]
    key_groups = recorded_key_groups(groups)
    if key_groups:
        if num_partitions > key_groups:
            raise ConfigurationError(f"{what} has {key_groups} key groups: num_partitions must be 1..{key_groups}, "
                                     f"got {num_partitions}")
        newest = groups[-1].num_partitions
        if newest != num_partitions and not rescale:
            raise PartitionCountError(
                f"{what} holds {newest} partitions of {key_groups} key groups, but it was opened with "
                f"num_partitions={num_partitions}, and this entry point does not reassign key-group ranges. Open it "
                f"with num_partitions={newest}; nothing was changed")
        return
    counts = sorted({cp.num_partitions for cp in history if cp.is_group})
    if counts and counts != [num_partitions]:
        raise PartitionCountError(
            f"{what} holds group checkpoints of {', '.join(map(str, counts))} partitions, but it was opened with "
            f"num_partitions={num_partitions}: Spark's hash would send keys to partitions whose state does not hold "
            f"them. Open it with num_partitions={counts[-1]}; this store has no key groups (it was written before "
            "them or without key_groups=), so its rescale is offline: re-partition it into a new store first "
            "(blobstate spark rescale); nothing was changed")


class GroupCommitter:
    """Group commits of ``committer``'s store, one at a time, composed from its ``StoreCommitContext`` (its
    repository, session, cleanup, commit point and engine: the same as its snapshot and delta commits); each record
    names ``num_partitions`` and, for a key-grouped store, its ``key_groups``.

    Usage (the owner of the group, once every partition's part is staged)::

        with StoreCommitter(StoreKey("flights", "group", "routes"), repo) as committer:
            groups = GroupCommitter(committer, num_partitions=4)
            groups.commit(entries, batch_id=7, query_id="q-1", created_ms=oldest_upload_ms)
    """

    def __init__(self, committer: StoreCommitter, *, num_partitions: int, key_groups: int = 0) -> None:
        self.context: StoreCommitContext = committer.context
        self.key = committer.key
        self.num_partitions = num_partitions
        self.key_groups = key_groups  # recorded with every group record: ``blobstate.model.keygroups`` (0: none)

    def commit(self, entries: Sequence[PartitionEntry], *, batch_id: int, query_id: str = "",
               created_ms: int | None = None, new_blob_ids: Sequence[str] = (),
               sources: HealSources | None = None, replicas: Sequence[Replica] = ()) -> Checkpoint:
        """Commit ``entries`` (at most one delta and one snapshot per partition) as one group record for
        ``batch_id`` of ``query_id``; ``new_blob_ids``: the blobs the snapshot entries uploaded (their TTLs are
        removed with the entries'). ``sources``: what this host can put a lost part back from (a part's bytes,
        a snapshot part's local checkpoint directory), used when the group lands late (``engine.CommitEngine``).
        ``replicas``: where each partition's copies are (``Replica``, metadata only): left out of a record it would
        make larger than ``MAX_RECORD_BYTES``, never at the cost of the commit.

        ``created_ms``: when the oldest part was uploaded (the TTL budget counts from it; default now). Raises
        ``InvalidRecordError`` (a ``ConfigurationError``, exit 2) naming the field of a malformed manifest (nothing
        written: ``Checkpoint.validate``), ``FencedError`` (another owner appended:
        the parts are deleted), ``StorageError``, ``AppendOutcomeUnknown`` (left open: recovery resolves it).
        """
        c = self.context
        c.take_over()
        commit_id = new_checkpoint_id()
        created = now_ms() if created_ms is None else created_ms
        record = Checkpoint(self.key, commit_id, 0, "", 0, 0, created, batch_id, c.writer_id, kind=GROUP,
                            query_id=query_id, num_partitions=self.num_partitions, key_groups=self.key_groups,
                            partitions=tuple(sorted(entries, key=lambda e: (e.partition, e.kind != SNAPSHOT))),
                            replicas=tuple(replicas))
        if replicas and len(record.to_bytes()) > MAX_RECORD_BYTES:  # metadata: the commit goes on without it
            record = replace(record, replicas=())
        record.validate()  # against its schema, before anything is journaled: InvalidRecordError naming the field
        blob_ids = [e.blob_id for e in record.partitions] + list(new_blob_ids)
        c.start(commit_id, batch_id, kind=GROUP)
        c.session.record(ev.UploadsPlanned(commit_id, now_ms(), tuple(blob_ids), "",
                                           sum(e.size for e in record.partitions)), sync=True)
        return c.engine.commit(record, sources=sources)
