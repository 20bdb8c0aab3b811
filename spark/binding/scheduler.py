"""The snapshot scheduler: background snapshot commits, one in flight, of batches the engine has committed.

Spark-agnostic. Two facts drive it: a batch is *applied* (its writes are in the store: ``applied(b)``) and the
engine that runs the batches has *committed* it (Spark wrote ``commits/b``: ``committed(b)``, from the
``StreamingQueryListener`` or from the start of batch ``b + 1``). A snapshot of batch ``b`` is due when ``b`` is
both, and at least ``every`` batches after the previous snapshot; the worker thread then calls ``commit(b)``, which
takes the local checkpoint if the store still holds exactly batch ``b`` (it returns None when a later batch got
there first: the next trigger catches up) and commits it. One commit is in flight at a time; triggers that arrive
meanwhile coalesce into the newest due batch. Nothing here blocks the caller.

The first failure stops the scheduler; it is raised by ``raise_if_failed`` (the engine calls it at the start of
every batch, so it reaches the user within one batch) and by ``close``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

from blobstate.errors import ConfigurationError
from blobstate.spark.errors import SnapshotCommitError

log = logging.getLogger(__name__)

R = TypeVar("R")


class SnapshotScheduler(Generic[R]):
    """Runs ``commit(batch_id) -> R | None`` in one background thread named ``name`` (see the module docstring).

    ``every``: batches between snapshots (>= 1); ``describe_error``: the message of a failed commit's
    ``SnapshotCommitError`` given (batch id, exception); ``batch_of``: the batch a result covers.
    """

    def __init__(self, commit: Callable[[int], R | None], *, batch_of: Callable[[R], int], every: int = 1,
                 name: str = "blobstate-snapshot",
                 describe_error: Callable[[int, BaseException], str] | None = None) -> None:
        if every < 1:
            raise ConfigurationError("snapshots must be taken every 1 or more batches")
        self._commit = commit
        self._batch_of = batch_of
        self.every = every
        self._describe = describe_error or (lambda b, e: f"the snapshot of batch {b} failed: {e}")
        self._cond = threading.Condition()
        self._applied: int | None = None
        self._committed: int | None = None
        self._last: int | None = None  # batch of the newest snapshot (committed or restored)
        self._inflight: int | None = None
        self._skipped: int | None = None  # a batch whose checkpoint came too late; wait for a newer one
        self._paused = False
        self._closing = False
        self.error: SnapshotCommitError | None = None
        self._error_reported = False
        self.results: deque[R] = deque(maxlen=1000)  # the newest snapshots' results
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- facts -------------------------------------------------------------------------------------------------
    def start_from(self, batch_id: int | None) -> None:
        """The store holds batch ``batch_id`` (restored) and a snapshot covers it or the chain restores it."""
        with self._cond:
            self._applied = self._last = batch_id

    def applied(self, batch_id: int) -> None:
        """The store now holds batch ``batch_id``'s writes."""
        with self._cond:
            self._applied = batch_id
            self._cond.notify_all()

    def committed(self, batch_id: int) -> None:
        """The engine committed batch ``batch_id`` (and every batch before it)."""
        with self._cond:
            if self._committed is None or batch_id > self._committed:
                self._committed = batch_id
                self._cond.notify_all()

    @property
    def committed_batch(self) -> int | None:
        """The newest batch the engine reported committed."""
        with self._cond:
            return self._committed

    @property
    def last_snapshot(self) -> int | None:
        with self._cond:
            return self._last

    @property
    def lag(self) -> int:
        """Batches between the newest applied batch and the newest snapshot."""
        with self._cond:
            if self._applied is None:
                return 0
            return self._applied - (self._last if self._last is not None else -1)

    def _due_locked(self) -> int | None:
        if self._paused or self._closing or self.error is not None or self._inflight is not None:
            return None
        if self._applied is None or self._committed is None:
            return None
        target = min(self._applied, self._committed)
        if self._skipped is not None and target <= self._skipped:
            return None
        if self._last is not None and target - self._last < self.every:
            return None
        return target

    # -- the worker --------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while (target := self._due_locked()) is None:
                    if self._closing:
                        return
                    self._cond.wait()
                self._inflight = target
            try:
                result = self._commit(target)
            except BaseException as exc:  # noqa: BLE001 - reported to the user by raise_if_failed
                error = SnapshotCommitError(self._describe(target, exc), batch_id=target, cause=exc)
                error.__cause__ = exc
                log.error("%s", error)
                with self._cond:
                    self.error = error
                    self._inflight = None
                    self._cond.notify_all()
                continue
            with self._cond:
                self._inflight = None
                if result is None:
                    self._skipped = target
                else:
                    self._last = self._batch_of(result)
                    self.results.append(result)
                self._cond.notify_all()

    # -- control -----------------------------------------------------------------------------------------------
    def pause(self) -> None:
        """Hold snapshot commits (a commit in flight finishes); deltas are not affected."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def raise_if_failed(self) -> None:
        """Raise the first failure (``SnapshotCommitError``) once it happened."""
        with self._cond:
            error = self.error
            if error is not None:
                self._error_reported = True
        if error is not None:
            raise error

    def wait_for(self, batch_id: int, timeout_s: float) -> R:
        """Block until a snapshot covering ``batch_id`` or later is committed; returns its result. Raises the
        failure, or ``TimeoutError`` after ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                done = [r for r in self.results if self._batch_of(r) >= batch_id]
                if done:
                    return done[0]
                if self.error is not None:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no snapshot of batch {batch_id} within {timeout_s:.0f} s (newest: "
                                       f"{self._last}, applied {self._applied}, committed {self._committed}"
                                       f"{', paused' if self._paused else ''})")
                self._cond.wait(left)
        self.raise_if_failed()
        raise AssertionError("unreachable")

    def drain(self, timeout_s: float | None) -> None:
        """Wait until no snapshot is in flight or due (at most ``timeout_s`` seconds)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            while self._inflight is not None or self._due_locked() is not None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"the snapshot of batch {self._inflight} did not finish within "
                                       f"{timeout_s:.0f} s")
                self._cond.wait(left)

    def close(self, *, drain: bool = True, timeout_s: float | None = None) -> None:
        """With ``drain``, commit what is due first; then stop the worker (a commit in flight finishes). Raises
        the first failure not reported yet."""
        try:
            if drain:
                self.drain(timeout_s)
        finally:
            with self._cond:
                self._closing = True
                self._cond.notify_all()
            self._thread.join(timeout_s)
        with self._cond:
            error, reported = self.error, self._error_reported
            self._error_reported = True
        if error is not None and not reported:
            raise error
