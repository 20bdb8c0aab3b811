"""The ``StreamingQueryListener`` that turns Spark's batch completions into background snapshot commits.

Spark calls ``onQueryProgress`` after a micro-batch completed and its ``commits/<batchId>`` entry is written (150-360
ms after ``foreachBatch`` returned, on a py4j callback thread). The listener only forwards ``(run id, batchId)`` to
its target, which ignores other runs (every query of the session reports here) and lets the snapshot scheduler
commit that batch's snapshot in the background: the listener never blocks Spark. Spark logs and drops exceptions
raised by a listener, so the listener never raises: a failure is handed to the target.
"""

from __future__ import annotations

import logging
from typing import Protocol

from pyspark.sql.streaming import StreamingQueryListener

log = logging.getLogger(__name__)


class BatchCommitTarget(Protocol):
    """What the listener reports to (``StateBinding`` implements it)."""

    def on_batch_committed(self, run_id: str, batch_id: int) -> None: ...

    def on_listener_error(self, exc: BaseException) -> None: ...


class CommitListener(StreamingQueryListener):
    """Forwards each completed micro-batch (``QueryProgressEvent.progress.batchId``) to ``target``."""

    def __init__(self, target: BatchCommitTarget) -> None:
        super().__init__()
        self._target = target

    def onQueryStarted(self, event: object) -> None:  # noqa: N802 - Spark's method names
        pass

    def onQueryProgress(self, event: object) -> None:  # noqa: N802
        try:
            progress = event.progress  # type: ignore[attr-defined]
            self._target.on_batch_committed(str(progress.runId), int(progress.batchId))
        except BaseException as exc:  # noqa: BLE001 - Spark would swallow it; hand it to the target instead
            log.exception("blobstate listener failed on a progress event")
            self._target.on_listener_error(exc)

    def onQueryIdle(self, event: object) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event: object) -> None:  # noqa: N802
        pass
