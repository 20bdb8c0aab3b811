"""Test-only plugin: a partition snapshot task SIGKILLed with its driver, mid-upload (issue 27 case 12).

In a process that uploads a snapshot index (``stage_snapshot``'s last put: its blobs are up, its RocksDB local
checkpoint directory still held), it SIGKILLs its own session: the Spark driver of a ``start_new_session`` child,
its JVM, and the Python daemon and workers (which PySpark puts in a process group of their own). With
``BLOBSTATE_TEST_KILL_TASK_PARTITION=N`` only the Spark task of partition ``N`` kills (``TaskContext``: a
``write_state`` or rescale write task stages new partition ``N``'s snapshot from its scratch RocksDB copy). Loaded
through ``BLOBSTATE_PLUGINS=snapshot_task_killer`` (the executors' Python workers inherit it), as a third party's
plugin would be."""

from __future__ import annotations

import os
import signal

from blobstate.plugins.fsspec_store import FsspecBlobStore

_put = FsspecBlobStore.put


def _this_partition() -> bool:
    wanted = os.environ.get("BLOBSTATE_TEST_KILL_TASK_PARTITION", "")
    if not wanted:
        return True
    from pyspark import TaskContext

    context = TaskContext.get()
    return context is not None and context.partitionId() == int(wanted)


def _killing_put(self, request) -> None:  # noqa: ANN001
    if "/indexes/" in request.blob_id and _this_partition():
        os.killpg(os.getsid(0), signal.SIGKILL)  # the driver's group (the child session's leader's): its JVM too
        os.killpg(os.getpgid(0), signal.SIGKILL)  # then this worker's own (PySpark's daemon and workers)
    _put(self, request)


FsspecBlobStore.put = _killing_put  # type: ignore[method-assign]
