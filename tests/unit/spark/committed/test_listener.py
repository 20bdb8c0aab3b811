"""``blobstate.spark.committed.listener.CommitListener``, its pure part (no Spark session: the progress events are
shaped as Spark's ``QueryProgressEvent``, ``event.progress.runId`` and ``.batchId``): each completed batch is forwarded
as ``(run id, batch id)``; nothing is ever raised back to Spark (a failure goes to the target); ``detach`` ends the
forwarding for good and waits for a callback in flight."""

from __future__ import annotations

import threading
import uuid
from types import SimpleNamespace

import pytest
from pyspark.sql.streaming import StreamingQueryListener

from blobstate.spark.committed.listener import CommitListener


def progress(run_id, batch_id) -> SimpleNamespace:
    return SimpleNamespace(progress=SimpleNamespace(runId=run_id, batchId=batch_id))


class Target:
    def __init__(self) -> None:
        self.batches: list[tuple[str, int]] = []
        self.errors: list[BaseException] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def on_batch_committed(self, run_id: str, batch_id: int) -> None:
        self.entered.set()
        self.release.wait()
        if batch_id < 0:
            raise RuntimeError("the target failed")
        self.batches.append((run_id, batch_id))

    def on_listener_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


def test_it_is_a_spark_listener_and_forwards_each_batch_as_run_id_and_batch_id():
    target = Target()
    listener = CommitListener(target)
    assert isinstance(listener, StreamingQueryListener)
    run = uuid.uuid4()  # py4j hands a java.util.UUID: forwarded as its text
    listener.onQueryProgress(progress(run, 4))
    listener.onQueryProgress(progress("run-2", "5"))
    assert target.batches == [(str(run), 4), ("run-2", 5)]
    for other in (listener.onQueryStarted, listener.onQueryIdle, listener.onQueryTerminated):
        other(object())
    assert target.batches == [(str(run), 4), ("run-2", 5)] and target.errors == []


@pytest.mark.parametrize("event", [object(), progress("r", None), progress("r", "seven"), progress("r", -1)],
                         ids=["no progress", "no batch id", "not a number", "the target raises"])
def test_a_failure_goes_to_the_target_never_back_to_spark(event):
    target = Target()
    CommitListener(target).onQueryProgress(event)
    assert target.batches == [] and len(target.errors) == 1


def test_after_detach_nothing_is_forwarded():
    target = Target()
    listener = CommitListener(target)
    assert listener.detach(1.0) is True
    listener.onQueryProgress(progress("r", 1))
    assert target.batches == [] and listener.detach(1.0) is True  # idempotent


def test_detach_waits_for_a_callback_in_flight():
    target = Target()
    target.release.clear()
    listener = CommitListener(target)
    callback = threading.Thread(target=listener.onQueryProgress, args=(progress("r", 9),))
    callback.start()
    detached = []
    try:
        assert target.entered.wait(10)
        assert listener.detach(0.01) is False  # still in flight: not left
        waiter = threading.Thread(target=lambda: detached.append(listener.detach(10.0)))
        waiter.start()
    finally:
        target.release.set()
    waiter.join()
    callback.join()
    assert detached == [True] and target.batches == [("r", 9)]
