"""blobstate-otel: OpenTelemetry metrics for blobstate commits, a plugin built on ``blobstate_journal_event``.

Registered through the entry point group ``blobstate``; importing it loads nothing of OpenTelemetry. The
instruments are created on the first journal event after telemetry is configured, from the global
``MeterProvider`` (set yours before the first commit: an SDK provider with an exporter, e.g. Prometheus, see
``examples/prometheus_exporter.py``); without one the API's no-op provider makes every measurement free.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from blobstate import hookimpl

if TYPE_CHECKING:
    from blobstate_otel.metrics import CommitMetrics

__all__ = ["CommitMetrics", "blobstate_journal_event"]

_metrics: CommitMetrics | None = None
_lock = threading.Lock()


def configured() -> bool:
    """Whether a meter provider can have been set in this process: one is set through ``opentelemetry.metrics``
    (so whoever set it imported that module) or named by ``OTEL_PYTHON_METER_PROVIDER`` (the API loads it on first
    use). Until then every measurement would go to the API's no-op provider, so the plugin does not import
    OpenTelemetry at all (a ``blobstate backup`` from the CLI: ~5 ms of import, issue 31)."""
    return "opentelemetry.metrics" in sys.modules or "OTEL_PYTHON_METER_PROVIDER" in os.environ


def _instance() -> CommitMetrics:
    global _metrics
    with _lock:
        if _metrics is None:
            from blobstate_otel.metrics import CommitMetrics  # deliberately lazy: see configured()

            _metrics = CommitMetrics()
        return _metrics


def __getattr__(name: str) -> Any:  # PEP 562: ``from blobstate_otel import CommitMetrics`` imports OpenTelemetry
    if name == "CommitMetrics":
        from blobstate_otel.metrics import CommitMetrics

        return CommitMetrics
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@hookimpl
def blobstate_journal_event(event: Any, store_key: Any) -> None:
    """Record ``event`` of ``store_key``'s commit (see ``CommitMetrics.observe``); nothing until telemetry is
    configured (``configured``)."""
    if _metrics is not None or configured():
        _instance().observe(event, store_key)
