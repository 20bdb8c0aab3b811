"""Rule 5 for the parts of a group record that only executors hold (issue 27 case 2, issue 39 case 7).

A group record's parts are uploaded by partition tasks on executors, with a TTL, and committed by the group's owner
(the Spark driver) in one append. When that append lands late (the owner paused between its TTL check and the
append longer than the TTL), gc may already have deleted the expired parts; the owner's heal check
(``healing.heal_record``) finds them missing and holds no copy. The owner never leaves a committed batch it cannot
restore:

- **a delta part** (a partition's changelog of the batch) may still be on the executor that wrote it, which keeps
  it until the next batch's task on that host has applied it (``pending/`` of a partition's copy,
  ``spark/partitioned/executor/partition.py``), or may not: that executor can be lost too (the double fault),
  and the owner cannot ask. So the owner voids the whole group (``void_group``, run by ``CleanupExecutor.finish``
  right after its heal check): one void record names it,
  no partition's records include it from then on (``model.chain.partition_history``), and the group's commit
  raises ``GroupVoidedError`` so that the batch fails and the engine runs it again (Spark re-runs a batch whose
  ``commits/b`` is missing; the re-run's group of that batch is the one that counts). Keeping the parts protected
  until an executor confirms its copy was the other way, and it fails exactly here: a protection that outlives an
  owner paused without bound is a lease nobody renews (it lapses: the same loss) or no expiry at all (every
  killed or speculative attempt's parts stay for good), and the executor that would confirm is the one lost. A
  task still runs ``heal_parts`` first: every committed part it keeps a copy of, in a group old enough for gc to
  have taken it (more than TTL/2 since the group's oldest part: ``engine.landed_late``'s test, evaluated on the
  task), is checked and put back under the same id (a group whose void did not land: fenced, or recovery's to
  finish);
- **a snapshot part** (taken off the batch's path and uploaded by a snapshot task that keeps nothing once it is
  staged) cannot be put back by anyone. When the group's changelogs are all there, the owner voids the snapshot
  alone (``void_lost_snapshots``, right after its heal check, before retention): it commits one more group record
  that re-commits, for each such partition, the delta of the snapshot's own batch (the same changelog blob, a new
  part id). A delta of a batch a snapshot covers, appended after it, overrides the snapshot
  (``model.chain.valid_snapshots``), so no restore and no retention counts the lost snapshot: the partition's
  state is the previous snapshot and its deltas, which retention then keeps. It is skipped when the snapshot is
  already overridden (idempotent) or no delta of its batch is retained (a rescale's snapshot-only group: it stays
  lost and ``verify`` names it).

Either void is a commit like any other (journaled, fenced by generation, recovered). A voided part's objects are
gone, and an unreadable retained index stops gc and retention from deleting (rule 8); but nothing needs an
overridden snapshot or a voided group's part (``model.chain.overridden_parts``), so
``Repository.retained_references(..., history=)`` lets gc and retention read the references of a history while
treating a *missing* index of such a part as referencing nothing (its surviving blobs become orphans gc removes once
old); any other unreadable index still stops the deletes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from blobstate.commit.healing import HealSources, heal_record, present_blobs
from blobstate.commit.point import AppendAttempt, CommitPoint
from blobstate.commit.session import StoreSession
from blobstate.config.options import display_url
from blobstate.errors import FencedError
from blobstate.journal import events as ev
from blobstate.model.chain import current_run, latest_deltas, partition_history, valid_snapshots, voided
from blobstate.model.layout import DEFAULT_TTL_MS, new_checkpoint_id, now_ms
from blobstate.model.records import DELTA, GROUP, Checkpoint, PartitionEntry
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)

#: seconds a void's unknown append outcome is resolved by re-appending (then recovery takes over)
VOID_RESOLVE_S = 5.0


def heal_parts(repo: Repository, records: Sequence[Checkpoint], kept: Callable[[Checkpoint], bytes | None], *,
               ttl_ms: int) -> list[str]:
    """The executor's half of rule 5: put back every committed delta part of ``records`` (one partition's records,
    group records expanded) that gc may have taken and of which this host keeps the changelog (``kept(record)``:
    its bytes, checked against the record's size and CRC32C, or None). Only parts whose group is older than half
    the TTL ``ttl_ms`` (ms; 0: the default TTL) are checked, so a healthy batch costs no request. Returns the ids
    put back. Raises ``StorageError``."""
    ttl_ms = ttl_ms or DEFAULT_TTL_MS
    now = now_ms()
    candidates = []
    for record in records:
        if record.is_delta and now - record.created_time_ms > ttl_ms // 2:
            data = kept(record)
            if data is not None:
                candidates.append((record, data))
    if not candidates:
        return []
    present = present_blobs(repo, candidates[0][0].store_key)
    healed = []
    for record, data in candidates:
        if record.changelog_blob_id not in present:
            log.warning("the committed changelog %s of %s partition %s (batch %s) was lost (its group landed after "
                        "gc took it); putting it back from this executor's copy", record.changelog_blob_id,
                        record.store_key, getattr(record, "partition", "?"), record.batch_id)
            repo.store.put(PutRequest(record.changelog_blob_id, data, codec=repo.metadata_codec))
            healed.append(record.changelog_blob_id)
    return healed


def heal_group(repo: Repository, group: Checkpoint, sources: HealSources) -> tuple[list[str], list[Checkpoint]]:
    """``heal_record`` of ``group`` part by part: ``(ids still missing, the snapshot parts among them)`` (a part
    whose index or any blob could not be put back)."""
    missing: list[str] = []
    lost: list[Checkpoint] = []
    for part in group.expand():
        ids = heal_record(repo, part, sources)
        missing += ids
        if ids and not part.is_delta:
            lost.append(part)
    return missing, lost


def void_lost_snapshots(session: StoreSession, repo: Repository, group: Checkpoint, lost: Sequence[Checkpoint], *,
                        commit_point: CommitPoint | None = None, ttl_ms: int = 0) -> Checkpoint | None:
    """Commit one group record that re-commits, for each lost snapshot part of ``group`` (``heal_group``), the
    retained delta of the snapshot's batch, so that the snapshot is overridden (module docstring). Journaled as a
    commit of its own in ``session``, appended through ``commit_point`` (the owner's; recovery: a new one on the
    log's latest generation). Returns the landed record, or None when nothing needed voiding or another writer
    appended first (``FencedError``: that writer's records decide). Raises ``AppendOutcomeUnknown`` (left open for
    recovery), ``StorageError``."""
    key = group.store_key
    history = repo.log.history(key)
    entries = []
    for part in lost:
        p = getattr(part, "partition", 0)
        records = partition_history(history, p)
        if part.checkpoint_id not in {s.checkpoint_id for s in valid_snapshots(records)}:
            continue  # already overridden
        delta = latest_deltas(current_run(records)).get(part.batch_id) if part.batch_id is not None else None
        if delta is None:
            log.error("the snapshot of %s partition %s (batch %s) is lost and no delta of its batch is retained to "
                      "override it: `verify` names it", key, p, part.batch_id)
            continue
        entries.append(PartitionEntry(p, DELTA, new_checkpoint_id(), delta.batch_id or 0, delta.changelog_blob_id,
                                      delta.changelog_crc32c, delta.changelog_size, 0, history[-1].generation))
    if not entries:
        return None
    record = replace(group, checkpoint_id=new_checkpoint_id(), generation=0, created_time_ms=now_ms(),
                     partitions=tuple(sorted(entries, key=lambda e: e.partition)))
    log.warning("group %s of %s landed after gc took snapshot parts nobody can put back (partitions %s): "
                "committing the deltas of their batches again so that no restore uses them", group.checkpoint_id,
                key, [e.partition for e in entries])
    return _append_void(session, repo, record, history, commit_point=commit_point, ttl_ms=ttl_ms)


def void_lost(session: StoreSession, repo: Repository, group: Checkpoint, unhealed: Sequence[str],
              lost: Sequence[Checkpoint], *, commit_point: CommitPoint | None = None,
              ttl_ms: int = 0) -> Checkpoint | None:
    """The owner's door after its heal check of ``group`` (``heal_group``: ``unhealed`` ids, ``lost`` snapshot
    parts): a changelog part gone makes the whole group voided (``void_group``; returned: the void record, or
    ``group`` itself when another record voided it or another writer appended first); a snapshot part gone alone is
    overridden (``void_lost_snapshots``; None returned: the batch stands)."""
    if any(p.is_delta and p.changelog_blob_id in unhealed for p in group.expand()):
        return void_group(session, repo, group, unhealed, commit_point=commit_point, ttl_ms=ttl_ms) or group
    if lost:
        void_lost_snapshots(session, repo, group, lost, commit_point=commit_point, ttl_ms=ttl_ms)
    return None


def void_if_lost(session: StoreSession, repo: Repository, history: Sequence[Checkpoint], *,
                 commit_point: CommitPoint | None = None) -> Checkpoint | None:
    """A new owner's take-over check of the latest group of ``history`` (issue 39 case 7 when the owner that landed
    it late died before its heal check, its journal lost with its host): from one walk of the store's prefix, a
    part whose changelog or snapshot index (or a blob that index names) is gone makes the group voided
    (``void_group``; a snapshot part alone: ``void_lost_snapshots``). Returns the void record, or None (nothing
    lost, already voided, or fenced). Raises ``StorageError``, ``AppendOutcomeUnknown``."""
    latest = history[-1] if history else None
    if latest is None or not latest.is_group or latest.checkpoint_id in voided(history):
        return None
    present = present_blobs(repo, latest.store_key)
    gone: list[str] = []
    lost: list[Checkpoint] = []
    for part in latest.expand():
        own = part.changelog_blob_id if part.is_delta else part.index_blob_id
        missing = [own] if own not in present else [] if part.is_delta else \
            sorted(repo.read_index(part).referenced_blob_ids() - present)
        gone += missing
        lost += [part] if missing else []
    if any(p.is_delta for p in lost):
        return void_group(session, repo, latest, gone, commit_point=commit_point)
    return void_lost_snapshots(session, repo, latest, lost, commit_point=commit_point) if lost else None


def void_group(session: StoreSession, repo: Repository, group: Checkpoint, lost: Sequence[str], *,
               commit_point: CommitPoint | None = None, ttl_ms: int = 0) -> Checkpoint | None:
    """Void committed ``group`` (issue 39 case 7): some of its ``lost`` parts are changelogs that gc took after the
    group landed late and that nobody on this host holds (``heal_group``). The executors that staged them may
    have lost their copies too (the double fault), so the owner never leaves the group standing: it appends one
    void record (a group record of no partition naming ``group`` in ``voids``), after which no partition's
    records include the group (``model.chain.partition_history``): the batch counts for no partition, as if its
    group had never landed, and the engine runs it again (its next group of the same batch is the one that counts).
    Journaled and appended as ``void_lost_snapshots``' record is. Returns the void record, or None when another
    record already voids ``group`` or another writer appended first (``FencedError``: that writer's records
    decide). Raises ``AppendOutcomeUnknown`` (left open for recovery), ``StorageError``."""
    key = group.store_key
    history = repo.log.history(key)
    if group.checkpoint_id in voided(history):
        return None
    record = replace(group, checkpoint_id=new_checkpoint_id(), generation=0, created_time_ms=now_ms(),
                     partitions=(), voids=(group.checkpoint_id,))
    log.error("group %s of %s (batch %s) landed after gc took %d of its parts, and nobody here can put them back "
              "(%s): voiding it, so that the batch counts for no partition and runs again", group.checkpoint_id, key,
              group.batch_id, len(lost), ", ".join(lost[:3]))
    return _append_void(session, repo, record, history, commit_point=commit_point, ttl_ms=ttl_ms)


def _append_void(session: StoreSession, repo: Repository, record: Checkpoint, history: Sequence[Checkpoint], *,
                 commit_point: CommitPoint | None, ttl_ms: int) -> Checkpoint | None:
    """Commit ``record`` (a void: it uploads nothing) as a commit of its own in ``session``, through
    ``commit_point`` (the owner's; recovery: a new one on the latest generation of ``history``). None when
    fenced."""
    commit_id = record.checkpoint_id
    point = commit_point or CommitPoint(session, repo, append_resolve_s=VOID_RESOLVE_S,
                                        generation=history[-1].generation)
    session.record(ev.CommitStarted(commit_id, now_ms(), str(record.store_key), point.generation(), record.batch_id,
                                    0, display_url(repo.url), display_url(repo.log.url or repo.url), kind=GROUP,
                                    ttl_ms=ttl_ms), sync=True)
    session.record(ev.UploadsPlanned(commit_id, now_ms(), (), "", 0), sync=True)
    try:
        landed = point.append(commit_id, record, attempt=AppendAttempt())
    except FencedError as exc:
        session.record(ev.CommitAborted(commit_id, now_ms(), f"another writer appended first: {exc}"[:500]),
                       sync=True)
        return None
    session.record(ev.TtlRemoved(commit_id, now_ms(), ()))
    session.record(ev.CommitCompleted(commit_id, now_ms()), sync=True)
    return landed
