"""Test-only observer plugin: pauses its own process with a real SIGSTOP right after a chosen journal event, and
when continued (SIGCONT) moves its own clock forward, so a test can stage "a writer paused longer than its TTL".

``BLOBSTATE_TEST_PAUSE_AT=EventType`` (or ``EventType:N`` for the N-th occurrence). ``BLOBSTATE_TEST_CLOCK_FILE``:
a file the test writes (always, "0" for no jump) while the process is stopped, holding the number of ms to add to
``time.time()`` from then on (what the process would have seen after a pause that long). Loaded through
``BLOBSTATE_PLUGINS=pause_plugin``, exactly as a third-party observer plugin is.
"""

from __future__ import annotations

import os
import signal
import time

from blobstate import hookimpl

_seen: dict[str, int] = {}
_real_time = time.time


@hookimpl
def blobstate_journal_event(event, store_key) -> None:  # noqa: ANN001
    spec = os.environ.get("BLOBSTATE_TEST_PAUSE_AT", "")
    name, _, nth = spec.partition(":")
    if not spec or event.type_name != name:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] != int(nth or 1):
        return
    os.kill(os.getpid(), signal.SIGSTOP)  # the test sees state T, does its work, then sends SIGCONT
    clock = os.environ.get("BLOBSTATE_TEST_CLOCK_FILE")
    if not clock:
        return
    # In a threaded process the stop can take effect just after kill() returns: wait for the test's clock file,
    # which it writes before it sends SIGCONT, so the clock never moves before the pause.
    deadline = _real_time() + 600
    while not os.path.exists(clock) and _real_time() < deadline:
        time.sleep(0.005)
    with open(clock, encoding="utf-8") as fh:
        offset_s = int(fh.read().strip() or 0) / 1000
    time.time = lambda: _real_time() + offset_s  # every later reading: layout.now_ms, lease expiries
