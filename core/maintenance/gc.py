"""``blobstate gc``: expired TTL blobs and orphans, over every store of a repository.

Rules (docs/architecture.md, "Safety"), each keeping a snapshot from ever being lost while several gc runs and
paused writers overlap:

- Candidates are listed *before* the checkpoint log and the indexes are read: a commit that landed before the
  listing is always seen as a reference.
- A blob is protected by the expiry its *writer* recorded (a lease, a tag), never by this gc's idea of the TTL: a
  blob whose TTL expired is deleted, unless a retained snapshot references it (then its TTL is removed: a commit
  whose cleanup never ran is healed, never broken); a blob that still carries a TTL is never an orphan.
- An orphan (no TTL, no retained index references it, no open commit in this host's journal planned it) is
  deleted only once it is older than ``ttl_ms`` (staged cleanup) and past the expiry its writer recorded on it,
  where the store records one instead of a mark (``past_recorded_expiry``: S3 native mode's data blobs).
- Nothing is deleted on incomplete knowledge: an unreadable retained index, or a log with no checkpoint of a store
  whose indexes exist (the wrong ``--log``), makes gc skip the store and say why (but for the missing index of a
  snapshot part a later delta overrides, which nothing needs: ``Repository.retained_references`` with the
  history).
- Every id is checked to be an object of the store's own prefix before it is deleted; a lease that names another
  store's object is reported (``foreign``), never acted on.
- Retention follows ``blobstate.model.retention`` (a count or restic's rules; snapshots and the deltas they need,
  ``blobstate.model.chain``): explicit, or the policy the store's latest snapshot records (its writer's). The
  records of a store with delta records are never pruned here (deltas land meanwhile: the writer prunes them,
  ``cleanup.apply_retention``). Each report lists the checkpoints kept and the rule that keeps each.
- A decision is re-checked right before it is acted on (``DeleteGuard``): gc re-reads the log (the references of
  every record that landed since it decided, snapshot and delta kinds) and the TTLs, and deletes only what is
  still unreferenced and still expired (an orphan: still without TTL). A decision older than ``RECHECK_AFTER_S``
  (monotonic clock, which runs on while the process is stopped) is re-checked again before each delete batch.
  Data blobs go before indexes, in batches of at most ``DELETE_BATCH``. What remains is a pause inside the final
  delete call itself: docs/architecture.md, "Safety", rule 13.
- Temp files of interrupted exclusive creates (the file log's ``checkpoints/**.tmp-*``) are removed once older
  than ``ttl_ms``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from blobstate.errors import StorageError
from blobstate.journal.file import Journal
from blobstate.journal.projection import project
from blobstate.local import workdir
from blobstate.model import layout
from blobstate.model.chain import has_deltas, latest_snapshot
from blobstate.model.layout import FAR_FUTURE_MS, monotonic
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.retention import GROUP_RETENTION, RetentionPolicy, plan_retention, recorded_policy
from blobstate.plugin.capabilities import expired_delete, recorded_expiry
from blobstate.plugin.interfaces import BlobInfo
from blobstate.repository import host
from blobstate.repository.repo import Repository
from blobstate.repository.retry import call_with_retry

if TYPE_CHECKING:
    from blobstate.maintenance.repository_view import RepositoryView

RECHECK_AFTER_S = 5.0  # a decision re-checked longer ago than this (monotonic seconds) is re-checked again
DELETE_BATCH = 1000  # ids per delete call (S3's DeleteObjects takes at most 1,000)
MAX_RECHECKS = 5  # re-checks in a row that may each come out stale before gc gives up on the store
_DATA = (layout.ObjectKind.BLOB, layout.ObjectKind.INDEX)  # what gc deletes
_STORE_OBJECTS = (*_DATA, layout.ObjectKind.LEASE)  # what makes a prefix a store's


@dataclass
class GcReport:
    """What gc found and did for one store key (or, with ``key`` None, for the repository's temp files)."""

    key: StoreKey | None
    expired_deleted: list[str] = field(default_factory=list)
    expired_healed: list[str] = field(default_factory=list)
    orphans_deleted: list[str] = field(default_factory=list)
    checkpoints_pruned: list[str] = field(default_factory=list)
    temporaries_deleted: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    spared: list[str] = field(default_factory=list)
    kept: list[dict[str, Any]] = field(default_factory=list)  # RetentionPlan.to_json: each kept record and why
    policy: str | None = None  # the retention applied (RetentionPolicy.describe), None: everything kept
    skipped: str | None = None
    partitions: int = 0  # a partitioned store's partition count (its newest group record's), 0 otherwise
    retention_note: str | None = None  # without a policy: whose retention applies instead, and its default

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key) if self.key else None, "expiredDeleted": self.expired_deleted,
                "expiredHealed": self.expired_healed, "orphansDeleted": self.orphans_deleted,
                "checkpointsPruned": self.checkpoints_pruned, "temporariesDeleted": self.temporaries_deleted,
                "foreign": self.foreign, "spared": self.spared, "checkpointsKept": self.kept,
                "retention": self.policy, "skipped": self.skipped, "partitions": self.partitions,
                "retentionNote": self.retention_note}


def discover_keys(repo: Repository) -> list[StoreKey]:
    """Store keys with checkpoints in the log, plus any store prefix holding blobs or indexes."""
    keys = set(repo.log.keys())
    for info in repo.store.list(""):
        name = layout.parse(info.blob_id)
        if name is not None and name.kind in _STORE_OBJECTS and name.key is not None:
            keys.add(name.key)
    return sorted(keys)


def _indexes_listed(history: list[Checkpoint], listing: list[BlobInfo]) -> bool:
    """Whether every snapshot index ``history`` names is in ``listing``. Only then may gc take them from the object
    cache: an index gone from the store (or landed after the listing) is read from it, so that a missing one still
    makes gc skip the store (nothing deleted on incomplete knowledge)."""
    listed = {info.blob_id for info in listing}
    return all(part.index_blob_id in listed for cp in history for part in cp.expand() if not part.is_delta)


def in_flight_ids(work_base: str | None, repo: Repository, key: StoreKey) -> set[str]:
    """Blob ids planned by commits still open in this host's journals of ``key`` (its work directory keyed by the
    repository's id, and one from before keyed by the URL that is not moved yet: ``host.work_dirs``)."""
    ids: set[str] = set()
    for work_dir in host.work_dirs(repo, key, work_base):
        states = project(Journal(os.path.join(work_dir, workdir.JOURNAL)).read().events)
        ids |= {b for s in states.values() if s.is_open for b in s.blob_ids}
    return ids


def collect(repo: Repository, key: StoreKey, *, now_ms: int, ttl_ms: int,
            retain: int | RetentionPolicy | None = None, dry_run: bool = False,
            work_base: str | None = None, view: RepositoryView | None = None) -> GcReport:
    """Garbage-collect one store key (see the module docstring). ``now_ms``, ``ttl_ms`` in milliseconds.

    ``retain``: checkpoints kept (a count or a ``RetentionPolicy``); default: the retention the latest snapshot's
    writer recorded (every checkpoint when it recorded none). ``view``: a repository-wide gc's one listing of every
    store, taken (at ``now_ms``) before it read the log (``blobstate.maintenance.stores``), instead of this store's
    own listings and log read.
    """
    report = GcReport(key)
    # 1. List first: anything committed before this point is in the log read below.
    if view is not None:
        with_ttl, expired, listing = view.with_ttl(key), view.expired(key), view.listing(key)
    else:
        with_ttl = set(repo.store.expired(key.prefix, FAR_FUTURE_MS))
        expired = set(repo.store.expired(key.prefix, now_ms))
        listing = list(repo.store.list(key.prefix))
    # 2. Then read what the retained snapshots reference.
    history = view.history(key) if view is not None else repo.log.history(key)
    if not history and any(layout.kind_of(i.blob_id) is layout.ObjectKind.INDEX for i in listing):
        report.skipped = (f"the checkpoint log {repo.log.url or repo.url} has no checkpoint of {key}, but the "
                          "repository has snapshot indexes: is --log right? nothing deleted")
        return report
    if repo.object_cache is not None and not _indexes_listed(history, listing):
        repo = replace(repo, object_cache=None)  # a retained index missing from the listing is asked of the store
    deltas = has_deltas(history)
    try:
        newest = latest_snapshot(history)
        policy = RetentionPolicy.of(retain) if retain is not None else None
        if policy is None and newest is not None:
            policy = recorded_policy(repo.read_index(newest))
        plan = plan_retention(history, policy, now_ms=now_ms) if policy is not None else None
        expiring, retained = plan.carried_out(repo.log.can_forget) if plan is not None else ([], history)
        report.kept = plan.to_json() if plan is not None else []
        report.policy = policy.describe() if policy is not None else None
        groups = [cp for cp in history if cp.is_group]
        report.partitions = groups[-1].num_partitions if groups else 0
        if policy is None and groups:
            report.retention_note = GROUP_RETENTION.format(partitions=report.partitions)
        referenced = repo.retained_references(retained, history=history)
    except Exception as exc:  # noqa: BLE001 - never delete on incomplete knowledge
        report.skipped = f"a retained snapshot index is unreadable, nothing deleted: {exc}"
        return report
    referenced |= in_flight_ids(work_base, repo, key)
    # 3. Decide, by the writers' recorded expiries.
    for blob_id in sorted(expired):
        if not (key.owns_blob(blob_id) or key.owns_index(blob_id)):
            report.foreign.append(blob_id)
        elif blob_id in referenced:
            report.expired_healed.append(blob_id)
        else:
            report.expired_deleted.append(blob_id)
    for info in listing:
        if layout.kind_of(info.blob_id) not in _DATA or info.blob_id in referenced or info.blob_id in with_ttl:
            continue
        if not (key.owns_blob(info.blob_id) or key.owns_index(info.blob_id)):
            report.foreign.append(info.blob_id)
        elif info.modified_ms is not None and now_ms - info.modified_ms >= ttl_ms:
            report.orphans_deleted.append(info.blob_id)
    report.orphans_deleted = past_recorded_expiry(repo, report.orphans_deleted, now_ms)
    if expiring and not deltas:
        report.checkpoints_pruned = [cp.checkpoint_id for cp in expiring]
    if not dry_run:
        repo.store.remove_ttl_many(report.expired_healed)
        guard = DeleteGuard(repo, key, history, now_ms=now_ms, work_base=work_base)
        if guard.delete(report) and report.checkpoints_pruned:
            # their blobs become orphans, reclaimed once older than the TTL
            repo.log.drop(key, expiring, first_kept=retained[0].generation)
    return report


def past_recorded_expiry(repo: Repository, orphans: list[str], now_ms: int) -> list[str]:
    """The ``orphans`` whose writer's recorded expiry (``capabilities.recorded_expiry``: S3 native mode records a
    data blob's expiry on the object instead of marking it) has passed by ``now_ms``, or that record none. A blob
    still inside its writer's TTL is an upload whose commit may yet land (Safety rule 2), however old it is by
    this gc's TTL. All of them when the store records no expiry on its blobs."""
    fn = recorded_expiry(repo.store)
    answer = fn(orphans) if fn is not None and orphans else None
    if answer is None:
        return orphans
    return [b for b in orphans if (expiry := answer.get(b)) is None or expiry <= now_ms]


class DeleteGuard:
    """Acts on a gc decision for one store key only as far as it still holds when each delete batch is sent.

    A decision is a view: the listing, the log and the indexes as they were read. A commit can land after it (a
    writer resumed after a pause, a recovery re-appending a record whose append had an unknown outcome), find every
    blob present in its post-append heal check, remove its TTLs and complete; deleting on the old view would then
    leave the latest snapshot referencing deleted blobs. So right before the first delete batch, and again before
    any batch sent more than ``RECHECK_AFTER_S`` (``time.monotonic``, which runs on while the process is stopped)
    after the last re-check's log read (and again after a re-check paused past that bound), the guard re-reads:

    - the checkpoint log: the references of every record not in the decision's ``history`` (records are never
      overwritten, so only new ones can add references; a delta record references its changelog) and this host's
      open commits; an unreadable new index stops the deletes (nothing deleted on incomplete knowledge);
    - the TTLs: an expired blob is deleted only while its TTL is still expired (a landed commit's writer removes
      its TTLs before its heal check, so this holds even when a log read lags); an orphan only while it still
      carries no TTL.

    Data blobs are deleted before indexes, so a pause inside a data batch's delete call (the window no re-check
    closes: Safety rule 13) re-checks before the index batch, and the late commit's index survives for the next
    backup to heal its blobs under.
    """

    def __init__(self, repo: Repository, key: StoreKey, history: list[Checkpoint], *, now_ms: int,
                 work_base: str | None) -> None:
        self.repo, self.key, self.now_ms, self.work_base = repo, key, now_ms, work_base
        self.seen = {(cp.checkpoint_id, cp.generation) for cp in history}
        self.checked_at: float | None = None  # monotonic() when the last re-check began reading

    def delete(self, report: GcReport) -> bool:
        """Delete ``report``'s decided blobs, re-checked; move the ones a re-check spares to ``report.spared``.
        Returns False when a re-check could not complete (``report.skipped`` says why; the rest is left)."""
        expired, orphans = set(report.expired_deleted), set(report.orphans_deleted)
        indexes = sorted(b for b in expired | orphans if self.key.owns_index(b))
        data = sorted((expired | orphans) - set(indexes))
        batches = [group[i:i + DELETE_BATCH] for group in (data, indexes) for i in range(0, len(group), DELETE_BATCH)]
        done: list[str] = []
        for batch in batches:  # data blobs first: see the class docstring
            try:
                expired, orphans = self.fresh(expired, orphans)
            except Exception as exc:  # noqa: BLE001 - never delete on incomplete knowledge
                report.skipped = f"a re-check before deleting failed, the rest is left: {exc}"
                break
            report.spared += [b for b in batch if b not in expired and b not in orphans]
            batch = [b for b in batch if b in expired or b in orphans]
            refused = self.send(batch, expired)
            report.spared += refused
            done += [b for b in batch if b not in refused]
        deleted = set(done)
        self.repo.discard_cached(done)  # this host's cached copies of the deleted indexes
        report.expired_deleted = [b for b in report.expired_deleted if b in deleted]
        report.orphans_deleted = [b for b in report.orphans_deleted if b in deleted]
        return report.skipped is None

    def send(self, batch: list[str], expired: set[str]) -> list[str]:
        """Delete ``batch``; returns the ids the store refused. Its expired blobs go through the store's conditional
        delete where it offers one (``capabilities.expired_delete``: deleted only while their TTL mark is still
        expired, atomically, which closes rule 13's window for them), everything else through ``delete_many``."""
        conditional = expired_delete(self.repo.store)
        marked = [b for b in batch if b in expired]
        refused = call_with_retry(lambda: conditional(marked, self.now_ms), f"conditional delete of {len(marked)} "
                                  "blobs", attempts=self.repo.settings.retry_attempts) \
            if conditional is not None and marked else None
        self.repo.store.delete_many([b for b in batch if refused is None or b not in marked])
        return refused or []

    def fresh(self, expired: set[str], orphans: set[str]) -> tuple[set[str], set[str]]:
        """``expired`` and ``orphans`` as of a re-check whose log read began at most ``RECHECK_AFTER_S`` ago,
        re-checking until one is (at most ``MAX_RECHECKS`` in a row: a process paused again and again, or a log or
        store slower than the bound, deletes nothing more: ``StorageError``)."""
        for _ in range(MAX_RECHECKS):
            if self.checked_at is not None and monotonic() - self.checked_at <= RECHECK_AFTER_S:
                return expired, orphans
            keep = self.recheck(expired, orphans)
            expired, orphans = expired & keep, orphans & keep
        raise StorageError(f"{MAX_RECHECKS} re-checks in a row took longer than {RECHECK_AFTER_S} s after their "
                           "log read (the gc host is paused or the log slow)")

    def recheck(self, expired: set[str], orphans: set[str]) -> set[str]:
        """The ids of ``expired`` (still expired) and ``orphans`` (still without TTL and past any expiry recorded on
        them: a blob written again meanwhile records a new one) that nothing references now.
        The TTLs are listed first, the log read last: the re-check's age is counted from its log read."""
        with_ttl = set(self.repo.store.expired(self.key.prefix, FAR_FUTURE_MS))
        still_expired = set(self.repo.store.expired(self.key.prefix, self.now_ms))
        started = monotonic()
        history = self.repo.log.history(self.key)
        new = [cp for cp in history if (cp.checkpoint_id, cp.generation) not in self.seen]
        referenced = (self.repo.retained_references(new, history=history)
                      | in_flight_ids(self.work_base, self.repo, self.key))
        self.seen |= {(cp.checkpoint_id, cp.generation) for cp in new}
        self.checked_at = started
        untagged = sorted(b for b in orphans if b not in with_ttl)
        keep = {b for b in expired if b in still_expired} | set(past_recorded_expiry(self.repo, untagged, self.now_ms))
        return keep - referenced


def collect_temporaries(repo: Repository, *, now_ms: int, ttl_ms: int, dry_run: bool = False) -> GcReport:
    """Remove temp files of interrupted exclusive creates under ``checkpoints/`` older than ``ttl_ms``."""
    report = GcReport(None)
    report.temporaries_deleted = [t.blob_id for t in repo.store.temporaries(layout.RECORDS)
                                  if t.modified_ms is not None and now_ms - t.modified_ms >= ttl_ms]
    if not dry_run:
        for blob_id in report.temporaries_deleted:
            repo.store.delete(blob_id)
    return report
