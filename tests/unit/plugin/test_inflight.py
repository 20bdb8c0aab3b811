"""``blobstate.plugin.inflight``: ``run_settled`` gives results in input order in the caller's context and raises
the first failure only once no call is running; ``InterruptShield`` (real SIGINT and SIGTERM, raised in this
process's main thread) lets the first interrupt raise at once, notes and holds a later one until the batch is
settled, and puts the previous handlers back."""

from __future__ import annotations

import contextvars
import logging
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from blobstate.plugin.inflight import InterruptShield, run_settled, settle

REQUEST = contextvars.ContextVar("request", default="none")


@pytest.fixture
def interrupts():
    """SIGINT and SIGTERM as the CLI has them: both raise ``KeyboardInterrupt`` in the main thread."""
    assert threading.current_thread() is threading.main_thread()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    seen: list[int] = []

    def handler(signum, frame):
        seen.append(signum)
        raise KeyboardInterrupt

    for s in previous:
        signal.signal(s, handler)
    yield seen, handler
    for s, h in previous.items():
        signal.signal(s, h)


def test_results_come_in_input_order_each_call_in_the_callers_context():
    REQUEST.set("verb-1")
    gate = threading.Barrier(4)

    def fn(i: int) -> tuple[int, str]:
        if i < 4:
            gate.wait()  # four calls at once: they finish in any order
        return i * i, REQUEST.get()

    assert run_settled(fn, range(10), workers=4) == [(i * i, "verb-1") for i in range(10)]
    assert run_settled(fn, [], workers=2) == []


def test_the_first_failure_is_raised_only_once_every_running_call_returned():
    started, failing = threading.Event(), threading.Event()
    finished: list[int] = []

    def fn(i: int) -> int:
        if i == 0:
            started.wait()
            failing.set()
            raise ValueError("request 0 failed")
        started.set()
        failing.wait()
        total = sum(range(3_000_000))  # still running when request 0 has failed
        finished.append(i)
        return total

    with pytest.raises(ValueError, match="request 0 failed"):
        run_settled(fn, [0, 1], workers=2)
    assert finished == [1]


def test_requests_not_begun_when_one_fails_are_cancelled():
    ran: list[int] = []
    lock = threading.Lock()

    def fn(i: int) -> None:
        with lock:
            ran.append(i)
        if i == 0:
            raise OSError("refused")

    with pytest.raises(OSError, match="refused"):
        run_settled(fn, range(200), workers=1)
    assert ran[0] == 0 and len(ran) < 200


def test_an_interrupt_in_a_request_is_raised_after_the_others_settle():
    def fn(i: int) -> int:
        if i == 1:
            raise KeyboardInterrupt
        return i

    with pytest.raises(KeyboardInterrupt):
        run_settled(fn, range(4), workers=2)


def test_settle_waits_for_the_running_request_and_cancels_the_pending():
    release = threading.Event()
    pool = ThreadPoolExecutor(max_workers=1)
    running = pool.submit(lambda: release.wait() and sum(range(3_000_000)))
    pending = [pool.submit(lambda: "ran") for _ in range(5)]
    pending[-1].add_done_callback(lambda f: release.set())  # called as settle cancels it
    settle(pool)
    assert running.done() and running.result() == sum(range(3_000_000))
    assert all(p.cancelled() for p in pending)


def test_the_first_interrupt_raises_at_once_and_settles_the_shield(interrupts):
    seen, handler = interrupts
    with pytest.raises(KeyboardInterrupt):
        with InterruptShield() as shield:
            assert signal.getsignal(signal.SIGINT) == shield._handle
            with pytest.raises(KeyboardInterrupt):
                signal.raise_signal(signal.SIGINT)
            assert shield.settling and shield.noted == 0  # the caller now settles its batch
            signal.raise_signal(signal.SIGINT)  # a second Ctrl-C meanwhile: noted, raised on exit
            assert shield.noted == 1
    assert seen == [signal.SIGINT, signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is handler and signal.getsignal(signal.SIGTERM) is handler


def test_a_later_interrupt_is_noted_and_raised_once_the_batch_ended(interrupts, caplog):
    seen, _ = interrupts
    with caplog.at_level(logging.WARNING, logger="blobstate.plugin.inflight"):
        with pytest.raises(KeyboardInterrupt):
            with InterruptShield() as shield:
                shield.settling = True  # the batch is being settled
                signal.raise_signal(signal.SIGTERM)
                signal.raise_signal(signal.SIGINT)
                completed = True  # neither interrupt broke into the settle
    assert completed and shield.noted == 2 and seen == [signal.SIGTERM, signal.SIGINT]
    assert "interrupted again: the requests in flight were waited for" in caplog.text


def test_an_interrupt_held_while_settling_does_not_replace_the_batchs_own_error(interrupts):
    with pytest.raises(ValueError, match="the batch's error"):
        with InterruptShield() as shield:
            shield.settling = True
            signal.raise_signal(signal.SIGINT)
            raise ValueError("the batch's error")
    assert shield.noted == 1


def test_resume_raises_an_interrupt_held_meanwhile_and_interrupts_raise_again(interrupts):
    with InterruptShield() as shield:
        shield.settling = True
        signal.raise_signal(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            shield.resume()
        shield.resume()  # nothing held any more
        assert not shield.settling
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)


def test_off_the_main_thread_the_shield_changes_no_handler(interrupts):
    _, handler = interrupts
    found = []

    def worker():
        with InterruptShield() as shield:
            found.append((signal.getsignal(signal.SIGINT), shield.settling))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert found == [(handler, False)]


def test_a_signal_without_a_python_handler_is_left_alone(interrupts):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with InterruptShield():
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
