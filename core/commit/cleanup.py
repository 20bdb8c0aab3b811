"""The journaled cleanup executor: everything that deletes or makes permanent on a store's behalf.

One executor serves the three verbs that clean up (Samza's post-commit and restore-time init steps):

- backup, after its commit point: ``finish`` (REMOVE_TTL of the commit's new blobs and index, deferred deletes by
  retention, pruning of local checkpoints, ``CommitCompleted``); before it: ``abort``; a delta commit (its
  changelog blob made permanent, nothing else: ``finish_delta``) likewise;
- recover, replaying the journal: ``finish`` or ``abort`` per open commit;
- restore's init step on a host without the writer's journal: ``init_cleanup`` from the latest index alone.

Every action is idempotent, so a crash in the middle is finished by running it again. Deletes never touch a blob
that a retained snapshot references: references are computed from the indexes, and an unreadable retained index
means no blob is deleted this time (the records leaving retention are still pruned, so a damaged index ages out
and never blocks a commit; their blobs become orphans for ``blobstate gc``). Every id a delete acts on is checked
to be an object of the store's own prefix (``layout.owned``), and a local path to lie in the store's own work
directory: ids and paths read back from a log or a journal are input like any other.

Retention follows ``blobstate.model.chain``: in a log with delta records it keeps the newest valid snapshots and every
delta after the oldest of them. Deltas land while retention runs, so such a log is pruned only while holding the
store's ``CommitPoint`` (the writer's own cleanup); without it (gc, a restore on another host) the records stay
for the writer to prune.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import TYPE_CHECKING

from blobstate.commit.healing import drop_index_copy, heal_blob, heal_committed, load_index_copy
from blobstate.commit.session import StoreSession
from blobstate.errors import BlobstateError, ForeignObjectError, IntegrityError, StorageError
from blobstate.journal import events as ev
from blobstate.journal.projection import CommitState
from blobstate.local import workdir
from blobstate.model.chain import expand_all, has_deltas, latest_snapshot, retention
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import now_ms, owned
from blobstate.model.records import GROUP, Checkpoint, StoreKey
from blobstate.repository.options import redact
from blobstate.repository.repo import Repository

if TYPE_CHECKING:
    from blobstate.commit.point import CommitPoint

log = logging.getLogger(__name__)

LAST_COMPLETED = "last-completed.json"  # in a store's work dir: the checkpoint whose TTLs this host last removed


def apply_retention(repo: Repository, key: StoreKey, retain: int, *,
                    commit_point: CommitPoint | None = None) -> tuple[list[str], list[str]]:
    """Keep the newest ``retain`` (>= 1) checkpoints of ``key`` (with deltas: snapshots, and the deltas they need,
    ``chain.retention``); delete the blobs only older ones reference, then their records.

    Returns ``(deleted blob ids, pruned checkpoint ids)``. Blobs are deleted before the records, so a crash in
    between is finished by running it again. A log with deltas is left alone without ``commit_point``.
    """
    retain = max(1, retain)
    history = repo.log.history(key)
    deltas = has_deltas(history)
    if deltas and commit_point is None:
        return [], []
    expiring, retained = retention(history, retain)
    if not expiring:
        return [], []
    try:
        keep = repo.retained_references(retained)
    except BlobstateError as exc:  # never delete on incomplete knowledge, never block a commit either
        log.warning("a retained snapshot index of %s is unreadable (%s): no blob is deleted by retention now; "
                    "the records leaving retention are pruned and `blobstate gc` reclaims their blobs once every "
                    "retained index reads again", key, redact(str(exc)))
        return [], _prune(repo, key, retained[0].generation if deltas else None, retain, commit_point)
    doomed: set[str] = set()
    for cp in expand_all(expiring):
        if cp.is_delta:
            doomed.add(cp.changelog_blob_id)
            continue
        doomed.add(cp.index_blob_id)
        try:
            doomed |= repo.read_index(cp).referenced_blob_ids()
        except BlobstateError as exc:
            log.warning("checkpoint %s leaves retention with an unreadable index (%s); the orphan sweep of "
                        "`blobstate gc` reclaims its blobs", cp.checkpoint_id, redact(str(exc)))
    to_delete = owned(key, sorted(doomed - keep), what="retention")
    repo.store.delete_many(to_delete)
    return to_delete, _prune(repo, key, retained[0].generation if deltas else None, retain, commit_point)


def _prune(repo: Repository, key: StoreKey, first_kept: int | None, retain: int,
           commit_point: CommitPoint | None) -> list[str]:
    """Prune the records below generation ``first_kept`` (None: all but the newest ``retain``), counting them while
    no append of this process can land."""
    if first_kept is None or commit_point is None:
        return [cp.checkpoint_id for cp in repo.log.prune(key, retain)]
    with commit_point.held() as generation:
        return [cp.checkpoint_id for cp in repo.log.prune(key, generation - first_kept + 1)]


def init_cleanup(repo: Repository, key: StoreKey, work_dir: str | None = None, *,
                 commit_point: CommitPoint | None = None) -> None:
    """Samza's restore-time init without a journal (a new host): remove the TTL of everything the latest checkpoint
    references (with deltas: the latest snapshot and every delta's changelog) and apply the retention its writer
    recorded (the deferred deletes: with a retention of 1, exactly the blobs its ``filesRemoved`` lists). A snapshot
    that records no retention (an older writer) is not pruned. With ``work_dir`` the latest checkpoint is
    remembered there as cleaned up (``mark_completed``)."""
    latest = repo.log.latest(key)
    if latest is None:
        return
    if latest.is_group:  # a partitioned store: everything its retained group records reference
        history = repo.log.history(key)
        repo.store.remove_ttl_many(owned(key, sorted(repo.retained_references(history)), what=f"the records of {key}"))
        if work_dir is not None:
            mark_completed(work_dir, latest.checkpoint_id)
        return
    history = repo.log.history(key) if latest.is_delta else [latest]
    snapshot = latest_snapshot(history)
    ids = {cp.changelog_blob_id for cp in history if cp.is_delta}
    index = repo.read_index(snapshot) if snapshot is not None else None
    if snapshot is not None and index is not None:
        ids |= index.referenced_blob_ids() | {snapshot.index_blob_id}
    repo.store.remove_ttl_many(owned(key, sorted(ids), what=f"the records of {key}"))
    if index is not None and index.retain is not None:
        apply_retention(repo, key, index.retain, commit_point=commit_point)
    if work_dir is not None:
        mark_completed(work_dir, latest.checkpoint_id)


def last_completed(work_dir: str) -> str | None:
    """The checkpoint id whose post-commit cleanup last completed from ``work_dir`` (this host), if any."""
    try:
        with open(os.path.join(work_dir, LAST_COMPLETED), encoding="utf-8") as fh:
            return str(json.load(fh)["checkpointId"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark_completed(work_dir: str, checkpoint_id: str) -> None:
    """Remember (atomically) that ``checkpoint_id``'s TTLs were removed from this host."""
    path = os.path.join(work_dir, LAST_COMPLETED)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump({"checkpointId": checkpoint_id}, fh)
    os.replace(tmp, path)


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

    ``retain``: checkpoints kept when a commit does not record its own retention; ``commit_point``: the store's
    commit point in this process, held while retention prunes a log with deltas.
    """

    #: Completed delta commits between two compactions of the journal (a delta completes every batch).
    DELTA_COMPACT_EVERY = 32

    def __init__(self, session: StoreSession, repo: Repository, *, retain: int,
                 commit_point: CommitPoint | None = None) -> None:
        self.session = session
        self.repo = repo
        self.key = session.key
        self.retain = retain
        self.commit_point = commit_point
        self._deltas_since_compact = 0

    def finish(self, state: CommitState, checkpoint: Checkpoint | None = None, *, heal: bool = False) -> int:
        """The post-commit steps of a committed commit; returns how many blobs retention deleted. Idempotent.

        With ``heal`` (its blobs may have been lost before the commit point landed: a late append, recovery), the
        commit's index and every blob it references are checked and a missing one put back from the kept index
        copy and the local checkpoint (``healing.heal_committed``), right after the TTLs are removed (a gc that
        decided to delete them re-checks their TTLs before deleting: ``gc.DeleteGuard``). Retention is the
        one the committed index records (``checkpoint``'s), else the journal's, else the executor's. A delta
        commit: ``finish_delta``.
        """
        if state.is_delta or state.kind == GROUP:
            return self.finish_delta(state.commit_id, sorted(state.blob_ids - state.ttl_removed), heal=heal,
                                     checkpoint=checkpoint)
        commit_id = state.commit_id
        index = self._committed_index(state, checkpoint)
        new_ids = owned(self.key, sorted(state.blob_ids - state.ttl_removed), what=f"the journal of {commit_id}")
        if new_ids:  # before the heal check: a gc re-checking its decision after this spares them (gc.DeleteGuard)
            self.repo.store.remove_ttl_many(new_ids)
        if heal and index is not None and state.index_blob_id:
            local = checked_local_path(self.session.work_dir, state.local_path) if state.local_path else None
            data = load_index_copy(self.session.work_dir, commit_id, state.index_crc32c, state.index_size)
            unhealed = heal_committed(self.repo, index, state.index_blob_id, data, local)
            if unhealed:
                log.error("committed snapshot %s of %s references %d objects that are lost and could not be "
                          "put back from this host; the next backup uploads those files again",
                          commit_id, self.key, len(unhealed))
        self.session.record(ev.TtlRemoved(commit_id, now_ms(), tuple(new_ids)), sync=True)
        mark_completed(self.session.work_dir, commit_id)
        retain = (index.retain if index is not None else None) or state.retain or self.retain
        deleted, pruned = apply_retention(self.repo, self.key, retain, commit_point=self.commit_point)
        self.session.record(ev.BlobsDeleted(commit_id, now_ms(), tuple(deleted), tuple(pruned)), sync=True)
        removed = self.prune_local(keep=state.local_path)
        self.session.record(ev.LocalCheckpointsPruned(commit_id, now_ms(), tuple(removed)), sync=True)
        self.session.record(ev.CommitCompleted(commit_id, now_ms()), sync=True)
        drop_index_copy(self.session.work_dir, commit_id)
        self.session.compact()
        return len(deleted)

    def finish_delta(self, commit_id: str, blob_ids: list[str], *, heal: bool = False,
                     checkpoint: Checkpoint | None = None, data: bytes | None = None) -> int:
        """The post-commit steps of a committed delta commit: with ``heal``, put its changelog back when it was lost
        (from ``data`` or the kept copy, checked against ``checkpoint``'s size and CRC32C), then make it permanent
        and record ``CommitCompleted``. Returns 0 (retention runs with snapshots). Idempotent."""
        ids = owned(self.key, blob_ids, what=f"the journal of {commit_id}")
        if ids:  # before the heal check, as ``finish``
            self.repo.store.remove_ttl_many(ids)
        if heal and checkpoint is not None and checkpoint.is_delta:
            kept = data if data is not None else load_index_copy(
                self.session.work_dir, commit_id, checkpoint.changelog_crc32c, checkpoint.changelog_size,
                kind="changelog")
            if not heal_blob(self.repo, self.key, checkpoint.changelog_blob_id, kept):
                log.error("the changelog %s of committed delta %s of %s is lost and this host has no copy; a restore "
                          "needs a snapshot after batch %s", checkpoint.changelog_blob_id, commit_id, self.key,
                          checkpoint.batch_id)
        self.session.record(ev.TtlRemoved(commit_id, now_ms(), tuple(ids)))
        self.session.record(ev.CommitCompleted(commit_id, now_ms()))
        drop_index_copy(self.session.work_dir, commit_id, kind="changelog")
        self._deltas_since_compact += 1
        if self._deltas_since_compact >= self.DELTA_COMPACT_EVERY:
            self.session.compact()
            self._deltas_since_compact = 0
        return 0

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
        if candidates:
            history = self.repo.log.history(self.key)
            if any(cp.checkpoint_id == state.commit_id for cp in history):
                raise StorageError(f"refusing to abort {state.commit_id}: the checkpoint log has it")
            try:
                candidates = candidates - self.repo.retained_references(history)
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
