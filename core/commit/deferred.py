"""Lease marks of committed changelogs left for a later removal: one request less per delta, or group of changelog
parts, in lease mode (issue 31).

A delta whose changelog has a blob of its own writes a lease beside it, as every executor does beside a group's
changelog part; once the record is committed the committer would remove them in a request of its own. In lease mode
nothing but gc acts on an expired mark, and gc deletes an expired blob only while no retained record references it
(docs/architecture.md, Safety rule 2), re-checked right before it deletes (rule 13); until its expiry (at least a
TTL after its upload began) a mark protects its blob more than its absence would. So the committer leaves the marks
of deltas and of groups of changelog parts committed in time here, and removes them with its next removal (a
snapshot's, a late commit's) or at its close (``CleanupExecutor.flush_deferred``), and with its next commit of any
kind once ``DeferredMarks.MAX`` wait or the oldest has waited TTL/4 (nothing runs in between: a committer idle for
longer than its TTL keeps them past their expiry, which only leaves gc to remove them). A process that dies with
marks waiting leaves them to the next committer's take-over (``blobstate.commit.cleanup.init_cleanup``: the marks of
the latest snapshot and every later delta, or of every retained group record) or to gc, which removes an expired
mark of a referenced blob. In native mode a cloud lifecycle rule expires marked blobs whatever references them:
nothing is deferred there.
"""

from __future__ import annotations

import threading

from blobstate.model.layout import monotonic


class DeferredMarks:
    """The lease marks (blob ids) waiting for removal, oldest first; thread-safe (a delta and a snapshot of one
    store may finish in two threads)."""

    #: the most marks that wait; one more makes them all due
    MAX = 256

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._since = 0.0  # monotonic s: when the oldest waiting mark was left
        self._lock = threading.Lock()

    def take(self, ids: list[str], *, defer: bool, ttl_ms: int) -> list[str]:
        """The marks to remove now: with ``defer``, ``ids`` are left waiting and nothing is returned unless the
        waiting ones are due (then all of them); without, every waiting mark and ``ids``. The caller gives back
        (``keep``) what it could not remove."""
        with self._lock:
            if defer:
                if ids and not self._ids:
                    self._since = monotonic()
                self._ids += ids
                ids = []
                if len(self._ids) < self.MAX and (not self._ids or monotonic() - self._since < ttl_ms / 4000):
                    return []
            taken, self._ids = self._ids, []
        return [*taken, *ids]

    def keep(self, ids: list[str]) -> None:
        """Put back marks a removal failed to remove (they wait again, as the oldest)."""
        with self._lock:
            if ids and not self._ids:
                self._since = monotonic()
            self._ids[:0] = ids

    def __len__(self) -> int:
        return len(self._ids)
