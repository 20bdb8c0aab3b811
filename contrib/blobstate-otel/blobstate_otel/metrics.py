"""The instruments, and how journal events become measurements.

Every instrument carries the attribute ``blobstate.store_key`` (``job/task/store``); commit counts and durations
also ``blobstate.outcome`` (``committed`` or ``aborted``). Following the OpenTelemetry semantic conventions,
durations are in seconds and sizes in bytes; a Prometheus exporter turns the names into ``blobstate_commits_total``,
``blobstate_commit_duration_seconds``, ``blobstate_commit_uploaded_bytes_total`` and
``blobstate_last_successful_commit_time_seconds``.

| instrument | kind | unit | from |
| --- | --- | --- | --- |
| ``blobstate.commits`` | counter | ``{commit}`` | ``CheckpointWritten`` (committed), ``CommitAborted`` (aborted) |
| ``blobstate.commit.duration`` | histogram | ``s`` | ``CommitStarted`` to ``CommitCompleted`` / ``CommitAborted`` |
| ``blobstate.commit.uploaded`` | counter | ``By`` | every ``BlobUploaded`` (bytes uploaded, index excluded) |
| ``blobstate.last_successful_commit.time`` | gauge | ``s`` | ``CheckpointWritten``: Unix time of the commit point |

A commit finished by recovery in another process (its ``CommitStarted`` not seen here) is counted, without a
duration. Alert on staleness with ``time() - blobstate_last_successful_commit_time_seconds > 600``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

STORE_KEY = "blobstate.store_key"
OUTCOME = "blobstate.outcome"


class CommitMetrics:
    """Turns blobstate journal events into OpenTelemetry measurements. Thread-safe (events arrive from upload
    threads). ``meter_provider``: default the global one."""

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("blobstate_otel", "0.1.0")
        self.commits = meter.create_counter("blobstate.commits", unit="{commit}",
                                            description="Commits that reached their commit point, or were aborted")
        self.duration = meter.create_histogram("blobstate.commit.duration", unit="s",
                                               description="Commit duration, from start to completed or aborted")
        self.uploaded = meter.create_counter("blobstate.commit.uploaded", unit="By",
                                             description="Bytes of blobs uploaded by commits")
        meter.create_observable_gauge("blobstate.last_successful_commit.time", callbacks=[self._last_success],
                                      unit="s", description="Unix time of the last commit point per store")
        self._lock = threading.Lock()
        self._started: dict[str, int] = {}  # commit id -> CommitStarted time (ms)
        self._committed: set[str] = set()
        self._last: dict[str, float] = {}  # store key -> seconds since the epoch

    def observe(self, event: Any, store_key: Any) -> None:
        """Record one journal event (``blobstate.journal.events``) of ``store_key``'s commit."""
        key = str(store_key)
        name = event.type_name
        if name == "CommitStarted":
            with self._lock:
                self._started[event.commit_id] = event.time_ms
        elif name == "BlobUploaded":
            self.uploaded.add(event.size, {STORE_KEY: key})
        elif name == "CheckpointWritten":
            with self._lock:
                self._committed.add(event.commit_id)
                self._last[key] = max(self._last.get(key, 0.0), event.time_ms / 1000)
            self.commits.add(1, {STORE_KEY: key, OUTCOME: "committed"})
        elif name in ("CommitCompleted", "CommitAborted"):
            outcome = "committed" if name == "CommitCompleted" else "aborted"
            with self._lock:
                started = self._started.pop(event.commit_id, None)
                self._committed.discard(event.commit_id)
            if outcome == "aborted":
                self.commits.add(1, {STORE_KEY: key, OUTCOME: outcome})
            if started is not None:
                self.duration.record(max(0, event.time_ms - started) / 1000, {STORE_KEY: key, OUTCOME: outcome})

    def _last_success(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            last = dict(self._last)
        return [Observation(seconds, {STORE_KEY: key}) for key, seconds in sorted(last.items())]
