"""Requests in flight are settled before anyone cleans up after them, through every interrupt (issue 27 case 6).

A batch of store requests runs on a thread pool while the main thread waits. When the wait ends early (a request
failed, or Ctrl-C raised ``KeyboardInterrupt`` in the main thread), the caller is about to clean up: an abort
deletes what its commit uploaded. A request still running then could land after those deletes and leave a blob
that nothing names. So ``run_settled`` cancels the pending requests and waits for the running ones before it lets
the exception go, and a further interrupt (a second Ctrl-C) while it waits is noted, never raised in the middle.

Python runs a signal's handler in the main thread between two bytecodes, wherever it is: a ``try`` around the
wait alone leaves a window (the handler's ``KeyboardInterrupt`` lands in the ``except`` clause before the wait
began, and the requests run on). ``InterruptShield`` closes it at the handler: while a batch runs, the handlers of
SIGINT and SIGTERM are wrapped; the first signal is passed to the previous handler (which raises, as it would have)
and switches the shield to settling in the same call, and every later one is passed too but its
``KeyboardInterrupt`` swallowed until the batch is settled (the CLI's handler still counts it, so its message says
"again during cleanup"). Interrupts that come after the settle (during the abort's own deletes) raise as usual.
"""

from __future__ import annotations

import contextvars
import logging
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from types import FrameType, TracebackType
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: the signals a shield wraps (the CLI turns both into ``KeyboardInterrupt``)
SHIELDED = (signal.SIGINT, signal.SIGTERM)


class InterruptShield:
    """A context manager, for the main thread (elsewhere it does nothing: Python raises interrupts only there).

    ``settling``: set by the first signal, or by the caller once the batch must stop; from then on a signal's
    ``KeyboardInterrupt`` is swallowed (counted in ``noted``). On exit the previous handlers come back; a signal
    swallowed after a batch that ended without an exception is raised then (the user still meant it).
    """

    def __init__(self) -> None:
        self.settling = False
        self.noted = 0
        self._swallowed = False
        self._previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def __enter__(self) -> InterruptShield:
        if threading.current_thread() is threading.main_thread():
            self.settling = True  # a signal while the handlers are wrapped is noted, then raised below
            try:
                for signum in SHIELDED:
                    handler = signal.getsignal(signum)
                    if callable(handler):
                        self._previous[signum] = handler
                        signal.signal(signum, self._handle)
            except BaseException:
                self._restore()
                raise
            self.settling = False
            if self._swallowed:
                self._restore()
                raise KeyboardInterrupt
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        previous = self._previous[signum]
        if not self.settling:
            self.settling = True  # in the same call that raises: no bytecode between the raise and the settle
            previous(signum, frame)
            return
        self.noted += 1
        try:
            previous(signum, frame)
        except KeyboardInterrupt:
            self._swallowed = True

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._restore()
        if self.noted:
            log.warning("interrupted again: the requests in flight were waited for before cleaning up")
        if self._swallowed and exc_type is None:
            raise KeyboardInterrupt

    def resume(self) -> None:
        """End a stretch the caller ran with ``settling`` set: interrupts raise again, and one swallowed meanwhile
        is raised now."""
        self.settling = False
        if self._swallowed:
            self._swallowed = False
            self.settling = True
            raise KeyboardInterrupt

    def _restore(self) -> None:
        self.settling = True  # a signal from here on is noted: the handlers are being put back
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def settle(pool: ThreadPoolExecutor) -> None:
    """Cancel ``pool``'s pending requests and wait until none is running (every thread joined), through any
    ``KeyboardInterrupt`` (only possible without a shield: the wait goes on, the caller re-raises its own)."""
    while True:
        try:
            pool.shutdown(wait=True, cancel_futures=True)
            return
        except KeyboardInterrupt:
            log.warning("interrupted again: waiting for the requests in flight before cleaning up")


def run_settled(fn: Callable[[T], R], items: Iterable[T], workers: int) -> list[R]:
    """``fn`` over ``items`` on ``workers`` threads, results in input order, each call in a copy of the caller's
    ``contextvars`` context (what the caller's context holds, a tracing span say, reaches it). The first exception (an
    interrupt included) is raised only once no request is pending or running (``settle`` under an
    ``InterruptShield``)."""
    pool = ThreadPoolExecutor(max_workers=workers)
    with InterruptShield() as shield:
        try:
            shield.settling = True  # an interrupt inside ``submit`` could leave a started thread unregistered
            futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
            shield.resume()
            return [f.result() for f in futures]
        except BaseException:
            shield.settling = True
            settle(pool)
            raise
        finally:
            pool.shutdown(wait=False)


class ByteBudget:
    """A counting semaphore in bytes: ``reserve(n)`` blocks until ``n`` bytes fit under ``limit``.

    A reservation larger than the limit is clipped to the limit (it then runs alone). ``peak`` is the largest
    number of bytes ever reserved at once (for tests and the benchmark).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self._cond = threading.Condition()

    def acquire(self, nbytes: int, *, block: bool = True) -> int | None:
        """Take ``nbytes`` (clipped to the limit) from the budget; returns the amount to ``release``, or None
        when ``block`` is false and it does not fit now."""
        n = max(0, min(nbytes, self.limit))
        with self._cond:
            if not block and self.used + n > self.limit:
                return None
            self._cond.wait_for(lambda: self.used + n <= self.limit)
            self.used += n
            self.peak = max(self.peak, self.used)
        return n

    def release(self, n: int) -> None:
        with self._cond:
            self.used -= n
            self._cond.notify_all()

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[None]:
        n = self.acquire(nbytes)
        assert n is not None
        try:
            yield
        finally:
            self.release(n)
