"""Test-only checkpoint log plugin: ``delayed+<url>`` is the file checkpoint log on ``<url>`` whose appends are
answered with a timeout while the request is applied later, the unknown outcome of issue 12.

``BLOBSTATE_TEST_APPEND_DELAY_S``: seconds after which the first append reaches the log (in a background thread;
the caller got ``TimeoutError`` at once). ``BLOBSTATE_TEST_UNKNOWN_FOR_S``: for this long every later append (the
caller's re-appends) also times out without reaching the log. Without the variables it is the plain file log.
Loaded through ``BLOBSTATE_PLUGINS=fault_logs``.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from blobstate import CheckpointLogSpec, hookimpl
from blobstate.model.records import Checkpoint
from blobstate.plugins.file_log import FileCheckpointLog

PREFIX = "delayed+"


class DelayedAppendLog(FileCheckpointLog):
    """The file log, with appends that time out on the client but land on the server later."""

    def __init__(self, url: str, storage_options: dict[str, Any], settings: Any = None) -> None:
        from blobstate.repository.backends import open_blob_store

        super().__init__(open_blob_store(url[len(PREFIX):], storage_options=storage_options, settings=settings))
        self.url = url
        self._first: float | None = None

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        delay = os.environ.get("BLOBSTATE_TEST_APPEND_DELAY_S")
        if delay is None:
            return super().append(checkpoint, expected_generation)
        if self._first is None:
            self._first = time.monotonic()
            late = threading.Thread(target=self._land_later, args=(checkpoint, expected_generation, float(delay)))
            late.start()  # not a daemon: the request lands even if the caller gives up
            raise TimeoutError("the append timed out on the client (the server will apply it)")
        if time.monotonic() - self._first < float(os.environ.get("BLOBSTATE_TEST_UNKNOWN_FOR_S", "0")):
            raise TimeoutError("the re-append timed out on the client too")
        return super().append(checkpoint, expected_generation)

    def _land_later(self, checkpoint: Checkpoint, expected: int, delay: float) -> None:
        time.sleep(delay)
        try:
            FileCheckpointLog.append(self, checkpoint, expected)
        except Exception:  # noqa: BLE001 - a re-append got there first: the request lost the race, as in real life
            pass


def open_delayed_log(url: str, *, storage_options: dict[str, Any] | None = None, settings: Any = None
                     ) -> DelayedAppendLog:
    """The delayed log on ``url``'s store, opened with the call's ``settings`` (handed down, as every backend)."""
    return DelayedAppendLog(url, dict(storage_options or {}), settings)


@hookimpl
def blobstate_checkpoint_logs() -> list[CheckpointLogSpec]:
    return [CheckpointLogSpec(name="delayed", schemes=("delayed",), factory="fault_logs:open_delayed_log",
                              priority=10, description="test: appends time out but land later")]
