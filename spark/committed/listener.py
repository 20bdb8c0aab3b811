"""The ``StreamingQueryListener`` that turns Spark's batch completions into background snapshot commits.

Spark calls ``onQueryProgress`` after a micro-batch completed and its ``commits/<batchId>`` entry is written (150-360
ms after ``foreachBatch`` returned, on a py4j callback thread). The listener only forwards ``(run id, batchId)`` to
its target, which ignores other runs (every query of the session reports here) and lets the snapshot scheduler
commit that batch's snapshot in the background: the listener never blocks Spark. Spark logs and drops exceptions
raised by a listener, so the listener never raises: a failure is handed to the target.

``detach`` ends the forwarding for good and waits for a callback in flight: the owner calls it first when it
closes, so that no late progress event (Spark posts the last batch's progress and the termination asynchronously)
schedules a snapshot job, or calls into Python at all, while the query stops and the SparkContext may stop after it.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)


class BatchCommitTarget(Protocol):
    """What the listener reports to (the driver binding's ``StateBinding`` and ``PartitionedState`` implement it)."""

    def on_batch_committed(self, run_id: str, batch_id: int) -> None: ...

    def on_listener_error(self, exc: BaseException) -> None: ...


class CommitListener(StreamingQueryListener):
    """Forwards each completed micro-batch (``QueryProgressEvent.progress.batchId``) to ``target``."""

    def __init__(self, target: BatchCommitTarget) -> None:
        super().__init__()
        self._target: BatchCommitTarget | None = target
        self._calls = threading.Condition()
        self._in_flight = 0

    def detach(self, timeout_s: float = 30.0) -> bool:
        """Forward nothing from now on; wait up to ``timeout_s`` for a callback in flight to return (True when none
        is left). Idempotent."""
        with self._calls:
            self._target = None
            return self._calls.wait_for(lambda: self._in_flight == 0, timeout_s)

    def onQueryStarted(self, event: object) -> None:  # noqa: N802 - Spark's method names
        pass

    def onQueryProgress(self, event: object) -> None:  # noqa: N802
        with self._calls:
            target = self._target
            if target is None:
                return
            self._in_flight += 1
        try:
            progress = event.progress  # type: ignore[attr-defined]
            target.on_batch_committed(str(progress.runId), int(progress.batchId))
        except BaseException as exc:  # noqa: BLE001 - Spark would swallow it; hand it to the target instead
            log.exception("blobstate listener failed on a progress event")
            target.on_listener_error(exc)
        finally:
            with self._calls:
                self._in_flight -= 1
                self._calls.notify_all()

    def onQueryIdle(self, event: object) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: object) -> None:  # noqa: N802
        pass
