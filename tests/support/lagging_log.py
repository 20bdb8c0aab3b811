"""Test-only checkpoint log plugin: the repository's own file log, read from a replica that lags.

With ``BLOBSTATE_TEST_LAGGING_LOG`` (a directory holding a copy of the repository's ``checkpoints/`` taken earlier),
the file log inside a ``file://`` repository reads and appends through that copy: the same log, as far as the
repository marker's log identity goes, seen through a replica that stopped following it (a read replica, a cache).
Without the variable it is the plain file log. Loaded through ``BLOBSTATE_PLUGINS=lagging_log``.
"""

from __future__ import annotations

import os
from typing import Any

from blobstate import CheckpointLogSpec, hookimpl
from blobstate.plugin.interfaces import BlobStore
from blobstate.plugins.file_log import FileCheckpointLog, open_file_log


def open_lagging_log(url: str, *, storage_options: dict[str, Any] | None = None,
                     blob_store: BlobStore | None = None) -> FileCheckpointLog:
    replica = os.environ.get("BLOBSTATE_TEST_LAGGING_LOG")
    if not replica:
        return open_file_log(url, storage_options=storage_options, blob_store=blob_store)
    return open_file_log(f"file://{replica}")


@hookimpl
def blobstate_checkpoint_logs() -> list[CheckpointLogSpec]:
    return [CheckpointLogSpec(name="lagging", schemes=("file",), factory="lagging_log:open_lagging_log",
                              priority=10, description="test: the file log read from a lagging replica")]
