"""Test-only plugin: the blob store ``pausefile:///PATH`` (a real fsspec store on the local disk) that can hold a
command at a chosen point, so that a test sends it a signal exactly there.

With ``BLOBSTATE_TEST_PAUSE_DIR=DIR``: after the second blob upload it creates ``DIR/uploading`` and waits; with
``BLOBSTATE_TEST_PAUSE_DELETE=1`` as well, the first delete creates ``DIR/deleting`` and waits. A wait ends when
``DIR/go`` appears, or after 60 s (a signal interrupts it sooner: that is the point). Loaded through
``BLOBSTATE_PLUGINS=hold_store``, exactly as a third-party plugin would be.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugins.fsspec_store import FsspecBlobStore


def _hold(name: str) -> None:
    directory = Path(os.environ["BLOBSTATE_TEST_PAUSE_DIR"])
    (directory / name).touch()
    deadline = time.monotonic() + 60
    while not (directory / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # polling for the test's go-ahead; a signal raises out of here


class PausingBlobStore(FsspecBlobStore):
    uploads = 0
    deletes = 0

    def put(self, request: PutRequest) -> None:
        super().put(request)
        if "/blobs/" in request.blob_id and os.environ.get("BLOBSTATE_TEST_PAUSE_DIR"):
            PausingBlobStore.uploads += 1
            if PausingBlobStore.uploads == 2:
                _hold("uploading")

    def delete(self, blob_id: str) -> None:
        if os.environ.get("BLOBSTATE_TEST_PAUSE_DIR") and os.environ.get("BLOBSTATE_TEST_PAUSE_DELETE"):
            PausingBlobStore.deletes += 1
            if PausingBlobStore.deletes == 1:
                _hold("deleting")
        super().delete(blob_id)


def make_store(url: str, *, storage_options: dict, ttl_mode: str | None, max_concurrency: int) -> FsspecBlobStore:
    return PausingBlobStore("file://" + url.split("://", 1)[1], storage_options=storage_options, ttl_mode=ttl_mode,
                            max_concurrency=max_concurrency)


@hookimpl
def blobstate_blob_stores():  # noqa: ANN201
    return [BlobStoreSpec(name="pausefile", schemes=("pausefile",), factory=make_store)]
