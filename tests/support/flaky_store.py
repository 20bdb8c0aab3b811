"""Test-only blob store plugin: the file store behind a fault injector (scheme ``flaky``).

``BLOBSTATE_TEST_FAULT_RATE`` (0..1): fraction of calls that raise ``ConnectionResetError`` first (transient;
retried by blobstate). ``BLOBSTATE_TEST_PERMANENT_FAULT=put``: every ``put`` raises ``PermissionError`` (permanent).
Faults are drawn from a seeded RNG (``BLOBSTATE_TEST_FAULT_SEED``), so a run is reproducible.
"""

from __future__ import annotations

import os
import random
import threading

from blobstate import BlobStoreSpec, hookimpl
from blobstate.plugins.fsspec_store import FsspecBlobStore

CALLS = {"faults": 0, "calls": 0}


class FlakyBlobStore(FsspecBlobStore):
    def __init__(self, url: str, **kwargs) -> None:  # noqa: ANN003
        super().__init__("file://" + url.split("://", 1)[1], **kwargs)
        self.url = url
        self._rng = random.Random(int(os.environ.get("BLOBSTATE_TEST_FAULT_SEED", "7")))
        self._lock = threading.Lock()

    def _maybe_fail(self, op: str) -> None:
        if os.environ.get("BLOBSTATE_TEST_PERMANENT_FAULT") == op:
            raise PermissionError(f"injected permanent fault on {op}")
        rate = float(os.environ.get("BLOBSTATE_TEST_FAULT_RATE", "0"))
        with self._lock:
            CALLS["calls"] += 1
            fail = self._rng.random() < rate
            if fail:
                CALLS["faults"] += 1
        if fail:
            raise ConnectionResetError(f"injected transient fault on {op}")

    def put(self, request):  # noqa: ANN001, ANN201
        self._maybe_fail("put")
        return super().put(request)

    def get(self, blob_id, sink):  # noqa: ANN001, ANN201
        self._maybe_fail("get")
        return super().get(blob_id, sink)

    def get_bytes(self, blob_id):  # noqa: ANN001, ANN201
        self._maybe_fail("get")
        return super().get_bytes(blob_id)

    def delete(self, blob_id):  # noqa: ANN001, ANN201
        self._maybe_fail("delete")
        return super().delete(blob_id)

    def remove_ttl(self, blob_id):  # noqa: ANN001, ANN201
        self._maybe_fail("remove_ttl")
        return super().remove_ttl(blob_id)


@hookimpl
def blobstate_blob_stores():  # noqa: ANN201
    return [BlobStoreSpec(name="flaky", schemes=("flaky",), factory=FlakyBlobStore, priority=5)]
