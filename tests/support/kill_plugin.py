"""Test-only plugin: SIGKILLs its own process right after a chosen journal event is durable.

``BLOBSTATE_TEST_KILL_AT=EventType`` (or ``EventType:N`` for the N-th occurrence, 1-based). Loaded through
``BLOBSTATE_PLUGINS=kill_plugin``, exactly as a third-party observer plugin would be.
"""

from __future__ import annotations

import os
import signal

from blobstate import hookimpl

_seen: dict[str, int] = {}


@hookimpl
def blobstate_journal_event(event, store_key) -> None:  # noqa: ANN001
    spec = os.environ.get("BLOBSTATE_TEST_KILL_AT", "")
    if not spec:
        return
    name, _, nth = spec.partition(":")
    if event.type_name != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
