"""Test-only plugin: SIGKILLs its own process right after a chosen journal event is durable.

``BLOBSTATE_TEST_KILL_AT=EventType`` (or ``EventType:N`` for the N-th occurrence, 1-based; ``EventType:N:delta`` or
``EventType:N:snapshot`` counts only events of commits of that kind). With ``BLOBSTATE_TEST_KILL_GROUP=1`` the
whole process group is killed (a Spark driver: this Python process and its JVM). With
``BLOBSTATE_TEST_KILL_IF_RECORD=TEXT`` only events whose journaled record contains ``TEXT`` count (a group record
carrying partition snapshots: ``"kind":"snapshot"``). Loaded through
``BLOBSTATE_PLUGINS=kill_plugin``, exactly as a third-party observer plugin would be.
"""

from __future__ import annotations

import os
import signal

from blobstate import hookimpl

_seen: dict[str, int] = {}
_kinds: dict[str, str] = {}  # commit id -> kind, from CommitStarted


@hookimpl
def blobstate_journal_event(event, store_key) -> None:  # noqa: ANN001
    spec = os.environ.get("BLOBSTATE_TEST_KILL_AT", "")
    if event.type_name == "CommitStarted":
        _kinds[event.commit_id] = getattr(event, "kind", "snapshot")
    if not spec:
        return
    name, _, rest = spec.partition(":")
    nth, _, kind = rest.partition(":")
    if event.type_name != name or (kind and _kinds.get(event.commit_id, "snapshot") != kind):
        return
    needle = os.environ.get("BLOBSTATE_TEST_KILL_IF_RECORD", "")
    if needle and needle not in (getattr(event, "record", None) or ""):
        return  # only a CheckpointAppending whose record holds ``needle`` counts
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == int(nth or 1):
        if os.environ.get("BLOBSTATE_TEST_KILL_GROUP") == "1":
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
