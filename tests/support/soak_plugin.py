"""Test-only observer plugin for the soak (bench/soak.py): a process on a simulated clock, with a trace of what it did.

Loaded first through ``BLOBSTATE_PLUGINS=soak_plugin[,pause_plugin|kill_plugin]`` (its import moves the clock, so
``pause_plugin``, imported after it, adds its own jump on top of the simulated time, not of the real one):

- ``BLOBSTATE_TEST_CLOCK_OFFSET_MS``: ms added to ``time.time()`` from import on: every host of the soak reads one
  simulated clock (real time + an offset that only grows), so TTL expiries written by writers and ``gc --now`` agree.
  Objects' modification times are the file system's (or the S3 server's), real: the process reads them shifted by
  the same offset, so an object's age is its real age. Clock jumps age leases (the expiries writers record), not
  objects: unshifted, a blob uploaded a millisecond ago would look as old as the whole offset to a gc, which would
  delete it as an orphan if it listed the blob's lease before the lease was written (real clocks make it young).
- ``BLOBSTATE_TEST_TRACE_FILE``: one line per journal event, ``<type> <commit id> [generation]``, appended as
  each event is durable (a SIGKILL loses nothing written before it); at exit a line ``LIST <n> <what>=<n>...``:
  how many listings (one walk of a prefix: a LIST on object stores) the process made, in all and by what they
  walked (``checkpoints``, ``blobs``, ``indexes``, ``store``: a store's whole prefix, ``root``: the repository).
- ``BLOBSTATE_TEST_STOP_AFTER_LOG_READ=N``: the process SIGSTOPs itself once, right after its N-th read of a
  store's checkpoint history (or of every store's at once, a repository-wide gc's) returns (a gc host paused by its
  hypervisor). ``gc`` reads it once to decide (N=1: it has listed the store and read the log, its decision is
  fixed) and once more per re-check of that decision right before it deletes (N=2: it has re-checked and is about
  to send its first delete batch).
- ``BLOBSTATE_TEST_STOP_BEFORE_DELETE=1``: the process SIGSTOPs itself inside its first blob delete call, before
  the request is sent: a gc paused after its last re-check, in the delete call itself (the residual window of
  docs/architecture.md, "Safety", rule 13; on file://, S3 and Azure, Azure's conditional delete included).
- ``BLOBSTATE_TEST_GC_RECHECK_AFTER_S``: seconds (monotonic) after which gc re-checks its decision again before a
  delete batch (``blobstate.maintenance.gc.RECHECK_AFTER_S``): the soak's pauses are seconds long where a real gc
  host's are minutes, so it scales this down as it scales the TTLs.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections import Counter
from typing import Any

from blobstate import hookimpl
from blobstate.plugins import fsspec_store
from blobstate.plugins.fsspec_store import FsspecBlobStore

_offset_ms = int(os.environ.get("BLOBSTATE_TEST_CLOCK_OFFSET_MS", "0") or 0)
if _offset_ms:
    _real_time = time.time
    time.time = lambda: _real_time() + _offset_ms / 1000
    _modified_ms = fsspec_store.modified_ms

    def _shifted_modified_ms(info: dict[str, Any]) -> int | None:
        real = _modified_ms(info)
        return None if real is None else real + _offset_ms

    fsspec_store.modified_ms = _shifted_modified_ms

_lock = threading.Lock()
_state = {"stopped": False}
_lists: Counter[str] = Counter()
_trace = os.environ.get("BLOBSTATE_TEST_TRACE_FILE", "")


def _write(line: str) -> None:
    if not _trace:
        return
    with _lock, open(_trace, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


_find = FsspecBlobStore._find


def _walked(prefix: str) -> str:
    parts = prefix.strip("/").split("/")
    if not parts[0]:
        return "root"
    if parts[0] == "checkpoints":
        return "checkpoints"
    return parts[3] if len(parts) > 3 else "store" if len(parts) == 3 else "other"


def _counting_find(self: FsspecBlobStore, prefix: str) -> dict[str, dict[str, Any]]:
    with _lock:
        _lists[_walked(prefix)] += 1
    return _find(self, prefix)


FsspecBlobStore._find = _counting_find  # type: ignore[method-assign]


def _stop_once() -> None:
    with _lock:
        first = not _state["stopped"]
        _state["stopped"] = True
    if first:
        os.kill(os.getpid(), signal.SIGSTOP)  # the soak sees state T, lets writers run, then sends SIGCONT


def _stopping(method: Any, batch: bool) -> Any:
    def wrapper(self: FsspecBlobStore, ids: Any) -> None:
        ids = list(ids) if batch else ids
        if ids:
            _stop_once()
        method(self, ids)

    return wrapper


_stop_after_read = int(os.environ.get("BLOBSTATE_TEST_STOP_AFTER_LOG_READ", "0") or 0)
if _stop_after_read:
    from blobstate.plugins.file_log import FileCheckpointLog

    _reads = Counter[str]()

    def _stopping(read: Any) -> Any:  # a read of the log: one store's history, or every store's at once
        def wrapper(self: FileCheckpointLog, *args: Any, **kwargs: Any) -> Any:
            out = read(self, *args, **kwargs)
            with _lock:
                _reads["history"] += 1
                now = _reads["history"] == _stop_after_read
            if now:
                _stop_once()
            return out

        return wrapper

    FileCheckpointLog.history = _stopping(FileCheckpointLog.history)  # type: ignore[method-assign]
    FileCheckpointLog.histories = _stopping(FileCheckpointLog.histories)  # type: ignore[method-assign]

if os.environ.get("BLOBSTATE_TEST_GC_RECHECK_AFTER_S"):
    from blobstate.maintenance import gc as _gc

    _gc.RECHECK_AFTER_S = float(os.environ["BLOBSTATE_TEST_GC_RECHECK_AFTER_S"])

if os.environ.get("BLOBSTATE_TEST_STOP_BEFORE_DELETE"):
    FsspecBlobStore.delete = _stopping(FsspecBlobStore.delete, False)  # type: ignore[method-assign]
    try:
        from blobstate.plugins.s3_store import S3BlobStore
    except ImportError:  # s3fs not installed: no S3 repository either
        pass
    else:
        S3BlobStore.delete_many = _stopping(S3BlobStore.delete_many, True)  # type: ignore[method-assign]
    try:
        from blobstate.plugins.azure_store import AzureBlobStore
    except ImportError:  # adlfs not installed: no Azure repository either
        pass
    else:  # Blob Batch deletes, plain or conditioned on the expiry tag (gc's, in native mode)
        AzureBlobStore._delete_paths = _stopping(AzureBlobStore._delete_paths, True)  # type: ignore[method-assign]
        _conditional = AzureBlobStore.delete_if_expired

        def _stopping_conditional(self: Any, ids: Any, now_ms: int) -> Any:
            if ids:
                _stop_once()
            return _conditional(self, ids, now_ms)

        AzureBlobStore.delete_if_expired = _stopping_conditional  # type: ignore[method-assign]


@atexit.register
def _report_lists() -> None:
    _write(" ".join(["LIST", str(sum(_lists.values())), *(f"{k}={v}" for k, v in sorted(_lists.items()))]))


@hookimpl(tryfirst=True)  # traced before kill_plugin or pause_plugin act on the same event
def blobstate_journal_event(event, store_key) -> None:  # noqa: ANN001
    generation = getattr(event, "generation", None)
    _write(f"{event.type_name} {event.commit_id}" + ("" if generation is None else f" {generation}"))
