"""Test-only plugin: a partition snapshot task SIGKILLed with its driver, mid-upload (issue 27 case 12).

In a process that uploads a snapshot index (``stage_snapshot``'s last put: its blobs are up, its RocksDB local
checkpoint directory still held), it SIGKILLs its own session: the Spark driver of a ``start_new_session`` child,
its JVM, and the Python daemon and workers (which PySpark puts in a process group of their own). Loaded through
``BLOBSTATE_PLUGINS=snapshot_task_killer`` (the executors' Python workers inherit it), as a third party's plugin
would be."""

from __future__ import annotations

import os
import signal

from blobstate.plugins.fsspec_store import FsspecBlobStore

_put = FsspecBlobStore.put


def _killing_put(self, request) -> None:  # noqa: ANN001
    if "/indexes/" in request.blob_id:
        os.killpg(os.getsid(0), signal.SIGKILL)  # the driver's group (the child session's leader's): its JVM too
        os.killpg(os.getpgid(0), signal.SIGKILL)  # then this worker's own (PySpark's daemon and workers)
    _put(self, request)


FsspecBlobStore.put = _killing_put  # type: ignore[method-assign]
