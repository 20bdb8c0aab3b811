"""A store's journaled session on this host: the work directory's lock, the journal, and event recording.

Every verb that changes a store's repository objects on behalf of this host's journal (backup, recover, restore's
init cleanup) runs inside one session, so that one commit or cleanup runs per store at a time (a ``flock`` on the
work directory's lock file, released by the kernel when the process dies) and every step is recorded before it is
reported (``blobstate_journal_event`` observers see an event only once it is in the journal). Within the process,
the threads that commit one store (a delta in the batch, a snapshot in the background) share one session:
recording, reading and compacting the journal are serialized by its lock.
"""

from __future__ import annotations

import os
import threading

import msgspec

from blobstate.errors import CommitInProgressError
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.journal.projection import CommitState, project
from blobstate.local import held, workdir
from blobstate.local.files import try_lock
from blobstate.model.records import StoreKey
from blobstate.plugin.manager import get_plugin_manager


class StoreSession:
    """The lock and journal of ``key``'s work directory ``work_dir``; a context manager. ``repository_id`` (the
    marker's) is stamped on every ``CommitStarted`` recorded without one, so recovery knows which repository each
    commit belongs to.

    Raises ``CommitInProgressError`` when another process holds the lock, ``CorruptJournalError`` (exit 3) when
    the journal is damaged in the middle.
    """

    def __init__(self, key: StoreKey, work_dir: str, *, repository_id: str = "") -> None:
        self.key = key
        self.work_dir = work_dir
        self.repository_id = repository_id
        self._lock = threading.RLock()
        os.makedirs(workdir.checkpoints_dir(work_dir), exist_ok=True)
        self._lock_fd: int | None = try_lock(os.path.join(work_dir, workdir.LOCK), 0o644)
        if self._lock_fd is None:
            raise CommitInProgressError(f"another process is committing {key} (work dir {work_dir})")
        held.sweep_work_dir(work_dir)  # what a killed process of this store left (a copy's staged chunks)
        self.journal = Journal(os.path.join(work_dir, workdir.JOURNAL))
        try:
            self.journal.open()
        except BaseException:
            self.close()
            raise
        self._hooks = get_plugin_manager()

    def __enter__(self) -> StoreSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def record(self, event: ev.Event, *, sync: bool = False) -> None:
        """Append ``event`` (fsync with ``sync``), then tell the ``blobstate_journal_event`` observers."""
        if isinstance(event, ev.CommitStarted) and self.repository_id and not event.repository_id:
            event = msgspec.structs.replace(event, repository_id=self.repository_id)
        with self._lock:
            self.journal.append(event, sync=sync)
        self._hooks.emit("blobstate_journal_event", event=event, store_key=self.key)

    def states(self) -> dict[str, CommitState]:
        """The journal's commits, projected."""
        with self._lock:
            return project(self.journal.read().events)

    def compact(self) -> None:
        """Rewrite the journal with only the events of commits still open."""
        with self._lock:
            open_events = [e for s in self.states().values() if s.is_open for e in s.events]
            self.journal.compact(open_events)

    def close(self) -> None:
        """Close the journal and release the lock (idempotent)."""
        if getattr(self, "journal", None) is not None:
            with self._lock:
                self.journal.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
