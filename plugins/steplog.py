"""Step-level logging of blobstate's own work: every journal event of every commit, logged at INFO on the
``blobstate.steps`` logger once it is durable (``blobstate -v backup ...`` shows each step of the commit). A record
being appended is logged as its size, never its content: it may carry a batch's keys and values.

A built-in observer plugin (``blobstate_journal_event``), registered by the plugin manager like any other.
"""

from __future__ import annotations

import logging
from typing import Any

from blobstate.plugin.hookspecs import hookimpl

log = logging.getLogger("blobstate.steps")

# Fields that would make a line long (every blob id of a commit): logged as a count.
_COUNTED = ("blob_ids", "paths", "checkpoints_pruned")
# Fields that carry a record's payload (a delta's record holds the batch's keys and values when its changelog goes
# inline): logged as their size, never their content, encrypted repository or not (issue 39).
_PAYLOADS = ("record",)


@hookimpl
def blobstate_journal_event(event: Any, store_key: Any) -> None:
    """Log ``event`` of ``store_key``'s commit: its type and its fields (lists as counts)."""
    if not log.isEnabledFor(logging.INFO):
        return
    from msgspec.structs import fields

    parts = []
    for f in fields(event):
        if f.name in ("commit_id", "time_ms", "store_key"):
            continue
        value = getattr(event, f.name)
        if f.name in _PAYLOADS:
            parts.append(f"{f.name}=<{len(value or '')} chars>")
        else:
            parts.append(f"{f.name}={len(value)}" if f.name in _COUNTED else f"{f.name}={value}")
    log.info("%s commit %s: %s %s", store_key, event.commit_id, event.type_name, " ".join(parts))
