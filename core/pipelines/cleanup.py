"""The journaled cleanup executor: everything that deletes or makes permanent on a store's behalf.

One executor serves the three verbs that clean up (Samza's post-commit and restore-time init steps):

- backup, after its commit point: ``finish`` (REMOVE_TTL of the commit's new blobs and index, deferred deletes by
  retention, pruning of local checkpoints, ``CommitCompleted``); before it: ``abort``;
- recover, replaying the journal: ``finish`` or ``abort`` per open commit;
- restore's init step on a host without the writer's journal: ``init_cleanup`` from the latest index alone.

Every action is idempotent, so a crash in the middle is finished by running it again. Deletes never touch a blob
that a retained snapshot references: references are computed from the indexes, and an unreadable index stops the
delete rather than letting it proceed on incomplete knowledge.
"""

from __future__ import annotations

import logging
import os
import shutil

from blobstate import workdir
from blobstate.errors import BlobstateError, StorageError
from blobstate.journal import events as ev
from blobstate.journal.projection import CommitState
from blobstate.layout import now_ms
from blobstate.model import StoreKey
from blobstate.pipelines.session import StoreSession
from blobstate.repository import Repository
from blobstate.storage_options import redact

log = logging.getLogger(__name__)


def apply_retention(repo: Repository, key: StoreKey, retain: int) -> tuple[list[str], list[str]]:
    """Keep the newest ``retain`` (>= 1) checkpoints of ``key``; delete the blobs only older ones reference, then
    their records.

    Returns ``(deleted blob ids, pruned checkpoint ids)``. Blobs are deleted before the records, so a crash in
    between is finished by running it again.
    """
    retain = max(1, retain)
    history = repo.log.history(key)
    if len(history) <= retain:
        return [], []
    expiring, retained = history[:-retain], history[-retain:]
    keep = repo.retained_references(retained)
    doomed: set[str] = set()
    for cp in expiring:
        doomed.add(cp.index_blob_id)
        try:
            doomed |= repo.read_index(cp).referenced_blob_ids()
        except BlobstateError as exc:
            log.warning("checkpoint %s leaves retention with an unreadable index (%s); the orphan sweep of "
                        "`blobstate gc` reclaims its blobs", cp.checkpoint_id, redact(str(exc)))
    to_delete = sorted(doomed - keep)
    repo.store.delete_many(to_delete)
    pruned = repo.log.prune(key, retain)
    return to_delete, [cp.checkpoint_id for cp in pruned]


def init_cleanup(repo: Repository, key: StoreKey) -> None:
    """Samza's restore-time init without a journal (a new host): remove the TTL of everything the latest checkpoint
    references and apply the retention its writer recorded (the deferred deletes: with a retention of 1, exactly
    the blobs its ``filesRemoved`` lists). A snapshot that records no retention (an older writer) is not pruned."""
    latest = repo.log.latest(key)
    if latest is None:
        return
    index = repo.read_index(latest)
    repo.store.remove_ttl_many(sorted(index.referenced_blob_ids() | {latest.index_blob_id}))
    if index.retain is not None:
        apply_retention(repo, key, index.retain)


class CleanupExecutor:
    """Finishes and aborts commits of ``session``'s store in ``repo``, recording each step in the journal.

    ``retain``: checkpoints kept when a commit does not record its own retention.
    """

    def __init__(self, session: StoreSession, repo: Repository, *, retain: int) -> None:
        self.session = session
        self.repo = repo
        self.key = session.key
        self.retain = retain

    def finish(self, state: CommitState) -> int:
        """The post-commit steps of a committed commit; returns how many blobs retention deleted. Idempotent."""
        commit_id = state.commit_id
        new_ids = sorted(state.blob_ids - state.ttl_removed)
        if new_ids:
            self.repo.store.remove_ttl_many(new_ids)
        self.session.record(ev.TtlRemoved(commit_id, now_ms(), tuple(new_ids)), sync=True)
        deleted, pruned = apply_retention(self.repo, self.key, state.retain or self.retain)
        self.session.record(ev.BlobsDeleted(commit_id, now_ms(), tuple(deleted), tuple(pruned)), sync=True)
        removed = self.prune_local(keep=state.local_path)
        self.session.record(ev.LocalCheckpointsPruned(commit_id, now_ms(), tuple(removed)), sync=True)
        self.session.record(ev.CommitCompleted(commit_id, now_ms()), sync=True)
        self.session.compact()
        return len(deleted)

    def abort(self, state: CommitState, reason: str) -> list[str]:
        """Delete what an uncommitted commit created (never a blob a retained snapshot references); returns the
        deleted blob ids. Raises ``StorageError`` when the checkpoint log holds the commit. Idempotent."""
        candidates = state.blob_ids
        if candidates:
            history = self.repo.log.history(self.key)
            if any(cp.checkpoint_id == state.commit_id for cp in history):
                raise StorageError(f"refusing to abort {state.commit_id}: the checkpoint log has it")
            candidates = candidates - self.repo.retained_references(history)
        to_delete = sorted(candidates)
        self.repo.store.delete_many(to_delete)
        self.session.record(ev.BlobsDeleted(state.commit_id, now_ms(), tuple(to_delete)), sync=True)
        removed = []
        if state.local_path and os.path.isdir(state.local_path):
            shutil.rmtree(state.local_path, ignore_errors=True)
            removed.append(state.local_path)
        self.session.record(ev.LocalCheckpointsPruned(state.commit_id, now_ms(), tuple(removed)), sync=True)
        self.session.record(ev.CommitAborted(state.commit_id, now_ms(), reason[:500]), sync=True)
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
