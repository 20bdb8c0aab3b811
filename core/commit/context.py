"""The store-commit context: the pieces every commit of one store shares, whatever its record kind.

A store's snapshot commits (``blobstate.commit.backup.StoreCommitter``), delta commits
(``blobstate.commit.delta.DeltaCommitter``) and group commits (``blobstate.commit.group.GroupCommitter``) are
ordered in one generation sequence and obey the same safety rules because they share one ``StoreCommitContext``:
its session (lock and journal), ``CommitPoint``, ``CleanupExecutor`` and ``CommitEngine``. The store committer
builds it; the delta and group committers are composed from it (they hold it, they inherit from nothing). It also
holds the two steps every kind takes first: ``take_over`` (once, before the first commit) and ``start`` (the
commit's ``CommitStarted``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from blobstate.commit.cleanup import CleanupExecutor, init_cleanup, last_completed
from blobstate.commit.engine import CommitEngine
from blobstate.commit.point import CommitPoint
from blobstate.commit.session import StoreSession
from blobstate.config.options import display_url, redact
from blobstate.errors import IntegrityError
from blobstate.journal import events as ev
from blobstate.model.layout import now_ms
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)


@dataclass
class StoreCommitContext:
    """What the commits of store ``key`` in ``repo`` share in this process: ``session`` (its lock and journal, in
    ``work_dir``), ``commit_point``, ``cleanup`` and ``engine``; ``writer_id`` (recorded in every record),
    ``ttl_ms`` (ms, the TTL of every upload until its commit completes) and ``retain`` (the newest checkpoints
    kept, as journaled in ``CommitStarted``)."""

    key: StoreKey
    repo: Repository
    session: StoreSession
    commit_point: CommitPoint
    cleanup: CleanupExecutor
    engine: CommitEngine
    work_dir: str
    writer_id: str
    ttl_ms: int
    retain: int
    took_over: bool = field(default=False)

    def take_over(self) -> None:
        """Before the first commit of this store in this context (snapshot, delta or group; later calls do
        nothing): when the latest checkpoint is not one whose cleanup completed from this work directory (another
        host wrote it, or its post-commit step never ran here), remove the TTL of everything it references
        (restore's init cleanup), so the new commit never reuses a blob that a lifecycle rule will expire. An
        unreadable latest index is left alone: the next snapshot then uploads everything."""
        if self.took_over:
            return
        latest = self.commit_point.latest()  # the view this writer pinned: another writer's append fences it
        if latest is not None and latest.checkpoint_id != last_completed(self.work_dir):
            try:
                init_cleanup(self.repo, self.key, self.work_dir, commit_point=self.commit_point)
            except IntegrityError as exc:
                log.warning("the latest snapshot of %s is unreadable (%s): the next commit uploads everything",
                            self.key, redact(str(exc)))
        self.took_over = True

    def start(self, commit_id: str, batch_id: int | None, *, kind: str, created_ms: int | None = None,
              sync: bool = False) -> None:
        """Journal ``CommitStarted`` of commit ``commit_id`` (``kind``: snapshot, delta or group) for ``batch_id``
        at ``created_ms`` (ms; default now), expecting the commit point's generation; ``sync``: fsync'd at once."""
        repo = self.repo
        self.session.record(ev.CommitStarted(commit_id, now_ms() if created_ms is None else created_ms,
                                             str(self.key), self.commit_point.generation(), batch_id, self.retain,
                                             display_url(repo.url), display_url(repo.log.url or repo.url),
                                             kind=kind, ttl_ms=self.ttl_ms), sync=sync)
