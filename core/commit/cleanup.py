"""The journaled cleanup executor: everything that deletes or makes permanent on a store's behalf.

One executor serves the three verbs that clean up (Samza's post-commit and restore-time init steps):

- a commit of any kind after its commit point (``blobstate.commit.engine``): ``finish`` (REMOVE_TTL of the
  commit's uploads, the heal check of a late commit, deferred deletes by retention, pruning of local checkpoints,
  ``CommitCompleted``); before it: ``abort``;
- recover, replaying the journal: ``finish`` or ``abort`` per open commit;
- restore's init step on a host without the writer's journal: ``init_cleanup`` from the latest index alone (TTLs
  only; a writer's take-over applies retention too).

Every action is idempotent, so a crash in the middle is finished by running it again. Deletes never touch a blob
that a retained snapshot references: references are computed from the indexes, and an unreadable retained index
means no blob is deleted this time (the records leaving retention are still pruned, so a damaged index ages out
and never blocks a commit; their blobs become orphans for ``blobstate gc``). Every id a delete acts on is checked
to be an object of the store's own prefix (``layout.owned``), and a local path to lie in the store's own work
directory: ids and paths read back from a log or a journal are input like any other.

Retention follows ``blobstate.model.chain``: in a log with delta records it keeps the newest valid snapshots and every
delta after the oldest of them. It reads the log after the append and prunes by generation (records below the
oldest one kept), so a record appended meanwhile, by this process or another writer, is never pruned in its place;
a writer after whose append another writer appended leaves retention to that writer. A log with deltas is pruned
only by its writer (with the store's ``CommitPoint``); without it (gc, a restore on another host) the records stay.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING

from blobstate.commit.deferred import DeferredMarks
from blobstate.commit.healing import HealSources, drop_index_copy, heal_record, load_index_copy
from blobstate.commit.parts import heal_group, void_if_lost, void_lost
from blobstate.commit.session import StoreSession
from blobstate.config.options import redact
from blobstate.errors import BlobstateError, ForeignObjectError, IntegrityError, StorageError
from blobstate.journal import events as ev
from blobstate.journal.projection import CommitState
from blobstate.local import workdir
from blobstate.local.files import replace_file
from blobstate.model import references
from blobstate.model.chain import has_deltas, latest_snapshot
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import now_ms, owned
from blobstate.model.records import GROUP, SNAPSHOT, Checkpoint, StoreKey
from blobstate.model.retention import RetentionPolicy, plan_retention, recorded_policy
from blobstate.plugin.capabilities import after_append_history
from blobstate.repository.repo import Repository

if TYPE_CHECKING:
    from blobstate.commit.point import CommitPoint

log = logging.getLogger(__name__)

#: the oldest (monotonic s) a log's own read after an append may be for retention to act on it (Safety rule 15)
APPEND_VIEW_MAX_AGE_S = 1.0
LAST_COMPLETED = workdir.LAST_COMPLETED  # in a store's work dir: the checkpoint whose TTLs this host last removed
last_completed = workdir.last_completed


def apply_retention(repo: Repository, key: StoreKey, retain: int | RetentionPolicy, *,
                    commit_point: CommitPoint | None = None, committed: Checkpoint | None = None,
                    history: list[Checkpoint] | None = None) -> tuple[list[str], list[str]]:
    """Keep what ``retain`` keeps of ``key``'s checkpoints (a count: the newest N, ``chain.retention``; a
    ``RetentionPolicy``: restic's rules, ``retention.plan_retention``; with deltas or groups, the snapshots and the
    deltas they need); delete the blobs only the others reference, then their records.

    Acts on the log as read here (after the append of ``committed``, the record this process just committed) and
    prunes by generation (``CheckpointLog.prune(below=...)``; records inside the log a policy drops by
    ``CheckpointLog.forget``, each matched by generation and id), never by a count from a cached generation: a
    record appended meanwhile is never pruned in its place. A log that cannot forget a record inside it keeps that
    record and its blobs. When a record that this process did not append (``commit_point.written``) follows
    ``committed``, another writer took the store over after it: retention is that writer's, and nothing is
    deleted here. In append-only mode (the repository's settings' ``append_only``) nothing is pruned or deleted: that is
    ``blobstate gc``'s. Returns ``(deleted blob ids, pruned checkpoint ids)``. Blobs are deleted before the
    records, so a crash in between is finished by running it again. A log with deltas is left alone without
    ``commit_point`` (gc, a restore on another host: the writer prunes it). ``history``: the log as the caller
    read it after the append (``CleanupExecutor.finish`` reads it beside the TTL removal); read here when None.
    The indexes it needs are fetched concurrently (``Repository.prefetch_indexes``).
    """
    policy = RetentionPolicy.of(retain)
    if repo.settings.append_only:
        log.info("append-only: retention of %s (%s) is left to `blobstate gc`", key, policy.describe())
        return [], []
    if history is None:
        history = repo.log.history(key)
    if committed is not None and commit_point is not None:
        others = [cp.generation for cp in history
                  if cp.generation > committed.generation and cp.generation not in commit_point.written]
        if others:
            log.info("another writer appended to %s after checkpoint %s (generation %d; it appended %s): "
                     "retention is left to it", key, committed.checkpoint_id, committed.generation, others)
            return [], []
    deltas = has_deltas(history)
    if deltas and commit_point is None:
        return [], []
    expiring, retained = plan_retention(history, policy, now_ms=now_ms()).carried_out(repo.log.can_forget)
    if not expiring:
        return [], []
    with repo.reading_indexes_once():
        repo.prefetch_indexes(retained + expiring)
        return _retain(repo, key, expiring, retained, history)


def _retain(repo: Repository, key: StoreKey, expiring: list[Checkpoint], retained: list[Checkpoint],
            history: list[Checkpoint]) -> tuple[list[str], list[str]]:
    """``apply_retention``'s deletes: the blobs only ``expiring`` records reference, then those records."""
    try:
        keep = repo.retained_references(retained, history=history)
    except BlobstateError as exc:  # never delete on incomplete knowledge, never block a commit either
        log.warning("a retained snapshot index of %s is unreadable (%s): no blob is deleted by retention now; "
                    "the records leaving retention are pruned and `blobstate gc` reclaims their blobs once every "
                    "retained index reads again", key, redact(str(exc)))
        return [], _drop(repo, key, expiring, retained)
    def unreadable(cp: Checkpoint, exc: BlobstateError) -> None:
        log.warning("checkpoint %s leaves retention with an unreadable index (%s); the orphan sweep of "
                    "`blobstate gc` reclaims its blobs", cp.checkpoint_id, redact(str(exc)))

    doomed = repo.retained_references(expiring, on_unreadable=unreadable)
    to_delete = owned(key, sorted(doomed - keep), what="retention")
    repo.store.delete_permanent_many(to_delete)  # committed blobs: their TTLs went with their commits
    repo.discard_cached(to_delete)  # the object cache's entries of the deleted indexes (the log drops its records')
    return to_delete, _drop(repo, key, expiring, retained)


def _drop(repo: Repository, key: StoreKey, expiring: list[Checkpoint], retained: list[Checkpoint]) -> list[str]:
    """Remove the ``expiring`` records (``CheckpointLog.drop``: below the oldest one kept and inside the log, never
    one appended since the history was read); returns their checkpoint ids."""
    return [cp.checkpoint_id for cp in repo.log.drop(key, expiring, first_kept=retained[0].generation)]


def init_cleanup(repo: Repository, key: StoreKey, work_dir: str | None = None, *,
                 commit_point: CommitPoint | None = None) -> None:
    """Samza's restore-time init without a journal (a new host): remove the TTL of everything the latest checkpoint
    references (with deltas: the latest snapshot and every delta's changelog). A writer's take-over (with its
    ``commit_point``) then applies the retention the latest snapshot's writer recorded (the deferred deletes: with
    a retention of 1, exactly the blobs its ``filesRemoved`` lists), and only while no record it did not append
    follows that latest one (``apply_retention``'s ``committed``: a newer record's retention is its writer's). A
    reader (no ``commit_point``: a restore on another host) prunes nothing (Safety rule 15): the retention it read
    may be older than the log it would act on (a writer raised ``--retain`` meanwhile), and a reader pins no view;
    writers and ``blobstate gc`` apply retention. A snapshot that records no retention (an older writer) is not
    pruned. With ``work_dir`` the latest checkpoint is remembered there as cleaned up (``mark_completed``). A
    writer's take-over of a partitioned store first voids a latest group whose parts are gone
    (``parts.void_if_lost``)."""
    latest = repo.log.latest(key)
    if latest is None:
        return
    if latest.is_group:  # a partitioned store: everything its retained group records reference
        history = repo.log.history(key)
        if commit_point is not None and void_if_lost(commit_point.session, repo, history, commit_point=commit_point):
            history = repo.log.history(key)  # a writer never builds on a group whose parts are gone (case 7)
            latest = history[-1]
        refs = repo.retained_references(history, history=history)  # a voided part needs nothing
        repo.store.remove_ttl_many(owned(key, sorted(refs), what=f"the records of {key}"))
        if work_dir is not None:
            mark_completed(work_dir, latest.checkpoint_id)
        return
    history = repo.log.history(key) if latest.is_delta else [latest]
    snapshot = latest_snapshot(history)
    ids: set[str] = set()
    index = None
    for ref in references.walk_references([cp for cp in history if cp.is_delta or cp == snapshot], repo.read_index):
        if ref.error is not None:
            raise ref.error
        ids |= ref.objects
        index = ref.index or index
    repo.store.remove_ttl_many(owned(key, sorted(ids), what=f"the records of {key}"))
    policy = recorded_policy(index) if index is not None and commit_point is not None else None
    if policy is not None:
        apply_retention(repo, key, policy, commit_point=commit_point, committed=latest)
    if work_dir is not None:
        mark_completed(work_dir, latest.checkpoint_id)


def mark_completed(work_dir: str, checkpoint_id: str) -> None:
    """Remember (atomically) that ``checkpoint_id``'s TTLs were removed from this host."""
    replace_file(os.path.join(work_dir, LAST_COMPLETED), json.dumps({"checkpointId": checkpoint_id}))


def checked_local_path(work_dir: str, path: str) -> str:
    """``path`` when it is a local checkpoint directory of ``work_dir`` (directly under its checkpoints folder,
    no symlink on the way); ``ForeignObjectError`` otherwise: a journal never makes blobstate remove anything
    else."""
    base = os.path.realpath(workdir.checkpoints_dir(work_dir))
    if os.path.dirname(os.path.abspath(path)) != base and os.path.dirname(os.path.realpath(path)) != base:
        raise ForeignObjectError(f"the journal names {path[:300]!r} as a local checkpoint, which is not in "
                                 f"{base}: refused")
    if os.path.islink(path):
        raise ForeignObjectError(f"the local checkpoint {path[:300]!r} is a symlink: refused")
    return path


class CleanupExecutor:
    """Finishes and aborts commits of ``session``'s store in ``repo``, recording each step in the journal.

    ``retain``: checkpoints kept (a count or a ``RetentionPolicy``) when a commit does not record its own
    retention; ``commit_point``: the store's commit point in this process, held while retention prunes a log with
    deltas. In append-only mode (the repository's settings' ``append_only``) neither ``finish`` nor ``abort``
    deletes anything.
    """

    #: Completed delta commits between two compactions of the journal (a delta completes every batch).
    DELTA_COMPACT_EVERY = 32

    def __init__(self, session: StoreSession, repo: Repository, *, retain: int | RetentionPolicy,
                 commit_point: CommitPoint | None = None) -> None:
        self.session = session
        self.repo = repo
        self.key = session.key
        self.retain = retain
        self.commit_point = commit_point
        self._deltas_since_compact = 0
        self.deferred = DeferredMarks()  # committed deltas' lease marks, removed with a later removal
        #: commit id -> the void record of a group ``finish`` voided (issue 39 case 7; the group itself when another
        #: record voided it or another writer appended first): ``CommitEngine.commit`` fails that commit's batch
        self.voided: dict[str, Checkpoint] = {}

    def finish(self, state: CommitState, checkpoint: Checkpoint | None = None, *, heal: bool = False,
               sources: HealSources | None = None) -> int:
        """The post-commit steps of a committed commit of any kind; returns how many blobs retention deleted.
        Idempotent.

        1. the TTLs of the commit's uploads removed (before the heal check: a gc that decided to delete them
           re-checks their TTLs before deleting, ``gc.DeleteGuard``); when nothing is healed, retention's read of
           the log (after the append) goes beside it;
        2. with ``heal`` (the commit point landed late, or recovery): every object ``checkpoint`` references
           checked and a missing one put back (``healing.heal_record``) from ``sources`` and what the work
           directory keeps (``journal_sources``), for a snapshot, a delta and every part of a group alike; a group
           whose changelog part nobody here can put back is voided, one whose snapshot part is gone has that part
           overridden (``parts.void_lost``; a whole group's void noted in ``voided``);
        3. a snapshot, or a group that commits snapshots: retention (``apply_retention`` on the log re-read now,
           pruning by generation), its count the one the committed index records, else the journal's, else the
           executor's; a snapshot also prunes the older local checkpoints;
        4. ``CommitCompleted``.
        """
        commit_id = state.commit_id
        snapshot = not state.is_delta and state.kind != GROUP and (checkpoint is None or checkpoint.kind == SNAPSHOT)
        index = self._committed_index(state, checkpoint) if snapshot else None
        new_ids = owned(self.key, sorted(state.blob_ids - state.ttl_removed), what=f"the journal of {commit_id}")
        retains = snapshot or (checkpoint is not None and checkpoint.is_group
                               and any(e.kind == SNAPSHOT for e in checkpoint.partitions))
        changelogs = state.is_delta or (checkpoint is not None and checkpoint.is_group and not retains)
        defer = changelogs and not heal and self.repo.store.ttl_mode == "lease"  # ``blobstate.commit.deferred``
        history = self._remove_ttls(new_ids, defer=defer, ttl_ms=state.ttl_ms,
                                    read_log=retains and not heal and not self.repo.settings.append_only)
        if heal and checkpoint is not None:
            kept = self.journal_sources(state, checkpoint).merged(sources)
            if checkpoint.is_group:  # parts only executors hold: ``blobstate.commit.parts``
                unhealed, lost = heal_group(self.repo, checkpoint, kept)
                void = void_lost(self.session, self.repo, checkpoint, unhealed, lost, commit_point=self.commit_point,
                                 ttl_ms=state.ttl_ms)
                if void is not None:  # its batch counts for no partition: it must run again
                    self.voided[commit_id] = void
            else:
                unhealed = heal_record(self.repo, checkpoint, kept)
            if unhealed:
                log.error("committed %s %s of %s references %d objects that are lost and could not be put back "
                          "from this host (%s)%s", checkpoint.kind, commit_id, self.key, len(unhealed),
                          ", ".join(unhealed[:5]), "" if checkpoint.is_group else
                          "; the next snapshot uploads their files again")
        self.session.record(ev.TtlRemoved(commit_id, now_ms(), () if defer else tuple(new_ids)), sync=snapshot)
        if snapshot:
            mark_completed(self.session.work_dir, commit_id)
        deleted: list[str] = []
        if retains:
            recorded = recorded_policy(index) if index is not None else None
            policy = recorded if recorded is not None else RetentionPolicy.of(
                self.retain if isinstance(self.retain, RetentionPolicy) else state.retain or self.retain)
            deleted, pruned = apply_retention(self.repo, self.key, policy, commit_point=self.commit_point,
                                              committed=checkpoint, history=history)
            self.session.record(ev.BlobsDeleted(commit_id, now_ms(), tuple(deleted), tuple(pruned)), sync=True)
        if snapshot:
            removed = self.prune_local(keep=state.local_path)
            self.session.record(ev.LocalCheckpointsPruned(commit_id, now_ms(), tuple(removed)), sync=True)
        self.session.record(ev.CommitCompleted(commit_id, now_ms()), sync=snapshot)
        drop_index_copy(self.session.work_dir, commit_id, kind="index" if snapshot else "changelog")
        self._deltas_since_compact += 1
        if snapshot or self._deltas_since_compact >= self.DELTA_COMPACT_EVERY:
            self.session.compact()
            self._deltas_since_compact = 0
        return len(deleted)

    def finished(self, commit_id: str, deleted: int) -> str:
        """Recovery's words for a commit ``finish`` finished (``deleted``: blobs retention deleted), or voided."""
        void = self.voided.pop(commit_id, None)
        if void is not None:  # its changelogs are gone and nobody here holds them: the batch runs again
            return f"voided (record {void.checkpoint_id}): its lost parts cannot be put back; its batch runs again"
        return f"finished: blobs checked, TTL removed, {deleted} blobs deleted by retention"

    def _remove_ttls(self, ids: list[str], *, defer: bool, ttl_ms: int,
                     read_log: bool) -> list[Checkpoint] | None:
        """Step 1 of ``finish``: the TTLs of ``ids`` removed (``BlobStore.remove_own_ttl_many``) with the marks of
        earlier changelogs that wait (``blobstate.commit.deferred``), or, with ``defer`` (a delta or a group of
        changelog parts committed in time, in lease mode), left waiting with them; with ``read_log``, retention's
        read of the log (after the append) made beside it, concurrently, and returned."""
        ids = self.deferred.take(ids, defer=defer, ttl_ms=ttl_ms)
        jobs: list[Callable[[], object]] = [lambda: self.repo.store.remove_own_ttl_many(ids)] if ids else []
        if read_log:
            jobs.append(self._log_after_append)
        try:
            results = self.repo.store.map_concurrent(lambda job: job(), jobs)
        except BaseException:
            self.deferred.keep(ids)
            raise
        return results[-1] if read_log else None  # type: ignore[return-value]

    def flush_deferred(self) -> None:
        """Remove the marks of committed deltas that still wait (``blobstate.commit.deferred``); a failure is
        logged and they stay for the next committer's take-over or gc (a mark only protects its blob longer)."""
        waiting = len(self.deferred)
        try:
            self._remove_ttls([], defer=False, ttl_ms=0, read_log=False)  # gives them back on failure
        except Exception as exc:  # noqa: BLE001 - the commits stand; their marks go later
            log.warning("the TTL marks of %d committed delta blob(s) of %s stay until the next commit or gc: %s",
                        waiting, self.key, redact(str(exc)))

    def _log_after_append(self) -> list[Checkpoint]:
        """Retention's view of the log after the append (Safety rule 15): the log's own read right after the
        append when it offers it and it is at most ``APPEND_VIEW_MAX_AGE_S`` old (the file log's listing after its
        create: one request less per commit), else a read now. A writer paused for longer reads again, and so sees
        a writer that took the store over meanwhile."""
        recent = after_append_history(self.repo.log)
        history = recent(self.key, APPEND_VIEW_MAX_AGE_S) if recent is not None else None
        return history if history is not None else self.repo.log.history(self.key)

    def journal_sources(self, state: CommitState, checkpoint: Checkpoint) -> HealSources:
        """What this work directory keeps for ``state``'s commit: the copy of its index (or changelog) saved before
        its upload, and its local checkpoint directory (checked to be one of the work directory's own)."""
        work_dir = self.session.work_dir
        blobs: dict[str, bytes] = {}
        dirs: dict[str, str] = {}
        if checkpoint.is_inline:
            pass  # its changelog is in the record: nothing to heal
        elif checkpoint.is_delta:
            data = load_index_copy(work_dir, state.commit_id, checkpoint.changelog_crc32c, checkpoint.changelog_size,
                                   kind="changelog")
            if data is not None:
                blobs[checkpoint.changelog_blob_id] = data
        elif not checkpoint.is_group:
            data = load_index_copy(work_dir, state.commit_id, checkpoint.index_crc32c, checkpoint.index_size)
            if data is not None:
                blobs[checkpoint.index_blob_id] = data
            if state.local_path:
                dirs[checkpoint.index_blob_id] = checked_local_path(work_dir, state.local_path)
        return HealSources(blobs, dirs)

    def _committed_index(self, state: CommitState, checkpoint: Checkpoint | None) -> SnapshotIndex | None:
        """The commit's index: the kept copy when it matches the journal, else the repository's (None when
        neither reads: then there is nothing to heal from, and retention falls back to the journal's)."""
        data = load_index_copy(self.session.work_dir, state.commit_id, state.index_crc32c, state.index_size)
        try:
            if data is not None:
                return SnapshotIndex.from_bytes(data, source=f"the kept copy of {state.index_blob_id}")
            if checkpoint is not None:
                return self.repo.read_index(checkpoint)
        except BlobstateError as exc:
            log.warning("the index of committed snapshot %s does not read (%s)", state.commit_id, redact(str(exc)))
        return None

    def abort(self, state: CommitState, reason: str) -> list[str]:
        """Delete what an uncommitted commit created (never a blob a retained snapshot references); returns the
        deleted blob ids. While a retained index is unreadable nothing is deleted (the blobs keep their TTL for
        gc) but the abort completes: it never wedges recovery. Raises ``StorageError`` when the checkpoint log holds
        the commit. Idempotent."""
        candidates = frozenset(owned(self.key, state.blob_ids, what=f"the journal of {state.commit_id}"))
        if candidates and self.repo.settings.append_only:
            log.info("append-only: aborted commit %s of %s leaves its %d blob(s) to their TTL (`blobstate gc` "
                     "deletes them once expired)", state.commit_id, self.key, len(candidates))
            candidates = frozenset()
        if candidates:
            history = self.repo.log.history(self.key)
            if any(cp.checkpoint_id == state.commit_id for cp in history):
                raise StorageError(f"refusing to abort {state.commit_id}: the checkpoint log has it")
            try:
                candidates = candidates - self.repo.retained_references(history, history=history)
            except IntegrityError as exc:  # never delete on incomplete knowledge, never block the abort either
                log.warning("a retained snapshot index of %s is unreadable (%s): aborted commit %s deletes none of "
                            "its blobs now (healed blobs may share ids with retained snapshots); they keep their "
                            "TTL and `blobstate gc` reclaims them once every retained index reads again", self.key,
                            redact(str(exc)), state.commit_id)
                candidates = frozenset()
        to_delete = sorted(candidates)
        self.repo.store.delete_many(to_delete)
        self.session.record(ev.BlobsDeleted(state.commit_id, now_ms(), tuple(to_delete)), sync=True)
        removed = []
        if state.local_path and os.path.isdir(checked_local_path(self.session.work_dir, state.local_path)):
            shutil.rmtree(state.local_path, ignore_errors=True)
            removed.append(state.local_path)
        self.session.record(ev.LocalCheckpointsPruned(state.commit_id, now_ms(), tuple(removed)), sync=True)
        self.session.record(ev.CommitAborted(state.commit_id, now_ms(), reason[:500]), sync=True)
        drop_index_copy(self.session.work_dir, state.commit_id, kind="changelog" if state.is_delta else "index")
        self.session.compact()
        return to_delete

    def prune_local(self, keep: str | None) -> list[str]:
        """Remove every local checkpoint directory but ``keep`` (the newest, for host-affinity restores)."""
        removed = []
        for path in workdir.local_checkpoint_dirs(self.session.work_dir):
            if keep is not None and os.path.abspath(path) == os.path.abspath(keep):
                continue
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        return removed
