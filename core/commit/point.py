"""The commit point of one store in this process: every append (snapshot or delta) goes through here, one at a time.

Snapshot commits and delta commits of a store share one generation sequence in the checkpoint log. Within the
process they are serialized here, so a snapshot committed in the background never fences the deltas committed
meanwhile (and the other way round): each append expects the generation the previous one of this process left.
Fencing is against other writers only. Before it, the caller checks the TTL budget (``check_ttl_budget``: a commit
older than half its blobs' TTL is refused, its uploads' protection may lapse before it completes; one that lands
late anyway is healed by its cleanup). In order, under the lock:

1. ``CheckpointAppending`` records the exact record (sealed under the data key in an encrypted repository:
   ``repository.host.journal_record``) and expected generation, durably: from here the append may land at any moment,
   and recovery resolves it by re-appending, never by guessing;
2. ``CheckpointLog.append``; an unknown outcome is resolved by re-appending the same record (idempotent for it)
   with backoff for at most ``append_resolve_s`` seconds;
3. ``CheckpointWritten``: the commit point.

Retention prunes by generation on the log as re-read after the append (``cleanup.apply_retention``), never by a
count from the generation cached here: ``written`` tells it which later records this process appended.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace

from blobstate.commit.session import StoreSession
from blobstate.config.options import redact
from blobstate.errors import AppendOutcomeUnknown, FencedError, StorageError
from blobstate.journal import events as ev
from blobstate.model.layout import monotonic, now_ms, sleep
from blobstate.model.records import Checkpoint
from blobstate.repository.host import journal_record
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)


@dataclass
class AppendAttempt:
    """Whether an append was sent (``CheckpointAppending`` recorded): after that, a failure is not a certain "no"."""

    sent: bool = False


def check_ttl_budget(commit_id: str, created_ms: int, ttl_ms: int) -> None:
    """``StorageError`` when commit ``commit_id`` (created at ``created_ms``) is older than half the TTL ``ttl_ms``
    of its uploads: their protection could lapse before it completes."""
    age = now_ms() - created_ms
    if age > ttl_ms // 2:
        raise StorageError(f"commit {commit_id} took {age} ms, more than half the blob TTL ({ttl_ms} ms): its blobs "
                           "could expire before it completes; raise --ttl")


class CommitPoint:
    """Appends of ``session``'s store to ``repo``'s checkpoint log, serialized, with the generation tracked.

    ``append_resolve_s``: seconds an unknown outcome is resolved by re-appending before the commit is left open
    for recovery; ``generation``: the generation the first append expects (default: the log's latest). Thread-safe.
    """

    def __init__(self, session: StoreSession, repo: Repository, *, append_resolve_s: float,
                 generation: int | None = None) -> None:
        self.session = session
        self.repo = repo
        self.key = session.key
        self.append_resolve_s = append_resolve_s
        self._lock = threading.RLock()
        self._generation: int | None = generation
        #: the record at ``_generation`` as this process knows it (read with it, or appended), if it does
        self._latest: Checkpoint | None = None
        self._latest_known = False
        #: the store's records the view was pinned from (``pin``), oldest first, until the generation moves
        self.pinned: tuple[Checkpoint, ...] | None = None
        self.written: set[int] = set()  # generations this process appended
        #: fields every record appended from now on carries (the run of a query: ``lineage_id``), set at the commit
        #: point before ``CheckpointAppending`` journals the record, so recovery re-appends the same record
        self.fields: dict[str, object] = {}

    def generation(self) -> int:
        """The generation the next append expects (read from the log when unknown)."""
        with self._lock:
            if self._generation is None:
                self._set(self.repo.log.latest(self.key))
            return self._generation  # type: ignore[return-value]

    def latest(self) -> Checkpoint | None:
        """The record at the generation the next append expects (None: an empty log), as the read that pinned the
        generation returned it or as this process appended it: the writer's view, read from the log once (the
        previous snapshot a commit diffs against, restore's init cleanup on a take-over), not once per use. Read
        from the log when this process does not know it (a generation given to it, or forgotten)."""
        with self._lock:
            if self._generation is None:
                self.generation()
            if self._latest_known:
                return self._latest
            return self.repo.log.latest(self.key)

    def pin(self, history: list[Checkpoint]) -> None:
        """Pin the view from ``history`` (the store's records as just read, oldest first) as ``generation`` pins it
        from the latest record: the same view, when the caller needs the older records too."""
        with self._lock:
            self._set(history[-1] if history else None)
            self.pinned = tuple(history)

    def _set(self, latest: Checkpoint | None) -> None:
        self._generation = latest.generation if latest else 0
        self._latest, self._latest_known = latest, True
        self.pinned = None

    def invalidate(self) -> None:
        """Forget the generation: the next append reads it from the log (after a failure, after recovery)."""
        with self._lock:
            self._generation = None
            self._latest, self._latest_known = None, False
            self.pinned = None

    def ours_since(self, expected: int, observed: int) -> bool:
        """True when every generation in ``(expected, observed]`` was appended by this process (no other writer)."""
        return all(g in self.written for g in range(expected + 1, observed + 1))

    def append(self, commit_id: str, record: Checkpoint, *, attempt: AppendAttempt) -> Checkpoint:
        """Steps 1-3 of the module docstring for ``record`` of commit ``commit_id``.

        Raises ``FencedError`` (certainly not committed), ``AppendOutcomeUnknown`` (still unknown: the commit stays
        open for recovery), ``StorageError`` from the journal. ``attempt.sent`` tells whether the append was sent.
        """
        with self._lock:
            if self.fields:
                record = replace(record, **self.fields)  # type: ignore[arg-type]
            expected = self.generation()
            kept = journal_record(self.repo, self.key, commit_id, record.with_generation(expected + 1))
            self.session.record(ev.CheckpointAppending(commit_id, now_ms(), expected, kept), sync=True)
            attempt.sent = True
            try:
                checkpoint = self._append(record, expected)
            except BaseException:
                self.invalidate()
                raise
            self._set(checkpoint)
            self.written.add(checkpoint.generation)
            self.session.record(ev.CheckpointWritten(commit_id, now_ms(), checkpoint.generation), sync=True)
            return checkpoint

    def _append(self, record: Checkpoint, expected: int) -> Checkpoint:
        """``CheckpointLog.append``; an outcome that is unknown (``AppendOutcomeUnknown``, or any storage failure
        of a log that does not say) is resolved by re-appending the same record, with backoff."""
        try:
            return self.repo.log.append(record, expected)
        except (StorageError, OSError) as exc:  # AppendOutcomeUnknown included; FencedError is certain: raised
            first = exc
        log.warning("the append of %s may or may not have landed (%s); resolving by re-appending it",
                    record.checkpoint_id, redact(str(first)))
        deadline = monotonic() + self.append_resolve_s
        wait = 0.1
        while True:
            sleep(min(wait, max(0.0, deadline - monotonic())))
            try:
                return self.repo.log.append(record, expected)
            except FencedError:
                raise
            except (AppendOutcomeUnknown, StorageError, OSError) as exc:
                if monotonic() >= deadline:
                    raise AppendOutcomeUnknown(f"the append of checkpoint {record.checkpoint_id} is still of "
                                               f"unknown outcome after {self.append_resolve_s:.0f} s ({exc}); the "
                                               "commit stays open and `blobstate recover` resolves it",
                                               checkpoint_id=record.checkpoint_id) from exc
                wait = min(wait * 2, 5.0)
