"""blobstate-otel: OpenTelemetry metrics for blobstate commits, a plugin built on ``blobstate_journal_event``.

Registered through the entry point group ``blobstate``; importing it loads only the OpenTelemetry API. The
instruments are created on the first journal event from the global ``MeterProvider`` (set yours before the first
commit: an SDK provider with an exporter, e.g. Prometheus, see ``examples/prometheus_exporter.py``); without one the
API's no-op provider makes every measurement free.
"""

from __future__ import annotations

import threading
from typing import Any

from blobstate import hookimpl
from blobstate_otel.metrics import CommitMetrics

__all__ = ["CommitMetrics", "blobstate_journal_event"]

_metrics: CommitMetrics | None = None
_lock = threading.Lock()


def _instance() -> CommitMetrics:
    global _metrics
    with _lock:
        if _metrics is None:
            _metrics = CommitMetrics()
        return _metrics


@hookimpl
def blobstate_journal_event(event: Any, store_key: Any) -> None:
    """Record ``event`` of ``store_key``'s commit (see ``CommitMetrics.observe``)."""
    _instance().observe(event, store_key)
