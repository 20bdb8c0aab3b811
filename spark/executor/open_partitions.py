"""Partitions kept open between batches in an executor's Python worker (``spark.python.worker.reuse``, Spark's default).

Opening a partition's RocksDB for every batch costs an open (the MANIFEST read, the WAL replayed, background threads
started), a memtable flush at every close (one small SST per batch, compacted later) and one info ``LOG`` file per
open. Spark's own RocksDB state store keeps a loaded store in its executor across micro-batches; a Python worker
that Spark reuses for the next task does the same here:

- **Ownership on a host.** ``<partition>/OPEN`` is ``flock``-ed by the one process that owns the partition's
  directory: it has the database open, or may restore or wipe it. A task takes ownership under the partition's
  lock (``take``): its own process's handle when it has one, else the ``OPEN`` lock, asking the owner to let go by
  creating ``<partition>/RELEASE`` and polling until it does (bounded: ``CommitInProgressError``). The owner keeps
  ``OPEN`` between tasks (``give_back``).
- **Closed** (``OpenPartition.close``: the memtable flushed, the database closed, ``OPEN`` unlocked) by the
  process's keeper thread when another process asks (``RELEASE``), after ``IDLE_CLOSE_S`` unused (before Spark
  stops an idle worker, after 60 s), when the process's parent changed (the executor is gone); by a task that
  failed; by ``close_all``; and at the end of every task when Spark does not reuse its Python workers. A process
  killed with its executor loses nothing: RocksDB's WAL holds what the memtable had, and ``flock`` locks die with
  it.
- **The marker** (``applied.json``: the committed record the copy is at) is written once the writes it names are
  durable (the WAL synced, ``flush_wal``, or the database flushed and closed): a process that dies between two
  tasks (a failed task ends its Python worker) leaves a copy the next owner reuses, and the copy on disk is never
  behind its marker.
- **Wiped under a live handle.** Every file the handle touches is reached through descriptors of the directories it
  owns (RocksDB at ``/proc/self/fd/<n>``, the marker with ``dir_fd``): a partition directory removed and made again
  by someone else is never written by a stale handle; ``take`` sees the path name another directory, drops the
  stale handle (its errors ignored) and takes the new one.
- **RocksDB's info LOG** is bounded (``db_options``): at most ``KEEP_LOG_FILES`` files of ``MAX_LOG_FILE_BYTES``
  per partition, older ones removed by RocksDB at open; no periodic statistics dump.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import threading
import time
from typing import Any

from blobstate.errors import CommitInProgressError

log = logging.getLogger(__name__)

OPEN, RELEASE, MARKER = "OPEN", "RELEASE", "applied.json"
IDLE_CLOSE_S = 30.0  # an unused open partition is closed after this (Spark stops idle Python workers after 60 s)
POLL_S = 0.005  # the keeper's poll interval of RELEASE requests: a partition moving between two Python workers
#                of one executor (on local[2], 19 of 26 tasks in a profile of the 1M-key benchmark) waits for it
TAKE_POLL_S = 0.002  # a waiting taker's poll interval of the OPEN lock (only while it waits)
KEEP_LOG_FILES = 2  # RocksDB info LOG files kept per partition (the current one and one old)
MAX_LOG_FILE_BYTES = 1 << 20
BLOCK_CACHE_BYTES = 64 << 20  # one LRU block cache shared by every partition a process keeps open
BLOOM_BITS_PER_KEY = 10  # a full-key Bloom filter per SST: a point read skips the SSTs that lack the key

_LOCK = threading.Lock()
_HELD: dict[str, OpenPartition] = {}
_KEEPER: threading.Thread | None = None
_PARENT = os.getppid()
_CACHE: Any = None


def db_options() -> Any:
    """rocksdict ``Options`` of a partition's RocksDB: rocksdict's defaults (the format every copy and restore uses),
    with the info LOG bounded, the periodic statistics dump off, and for point reads (an update reads the keys of
    its rows) a Bloom filter per SST and a block cache shared by the process's partitions (as Spark's own RocksDB
    state store configures its table format)."""
    from rocksdict import BlockBasedOptions, Cache, Options

    global _CACHE
    if _CACHE is None:
        _CACHE = Cache(BLOCK_CACHE_BYTES)
    table = BlockBasedOptions()
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, False)
    table.set_block_cache(_CACHE)
    options = Options()
    options.set_block_based_table_factory(table)
    options.set_keep_log_file_num(KEEP_LOG_FILES)
    options.set_max_log_file_size(MAX_LOG_FILE_BYTES)
    options.set_stats_dump_period_sec(0)
    return options


def keep_open() -> bool:
    """Whether this process outlives its task: Spark reuses its Python workers (``SPARK_REUSE_WORKER``)."""
    return os.environ.get("SPARK_REUSE_WORKER") == "1"


class OpenPartition:
    """One partition directory this process owns: its ``OPEN`` lock, its RocksDB handle while open, its marker.

    ``marker``: the record the database is at (``{"checkpointId", "batchId"}``, None: unknown), as on disk;
    ``db_path``: the database's path for whole-directory operations (a restore, a wipe) done while the handle is
    closed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.db_path = os.path.join(path, "db")
        self.dir_fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        self._ident = _ident(os.fstat(self.dir_fd))
        self.lock_fd: int | None = None
        self.db: Any = None
        self._db_fd: int | None = None
        self.marker: dict[str, Any] | None = None
        self._staged: tuple[str, list[Any]] | None = None  # (checkpoint id, ops) of this process's last part
        self.in_use = False
        self.last_used = time.monotonic()

    # -- ownership ---------------------------------------------------------------------------------------------
    def acquire(self, deadline: float) -> None:
        """Take the ``OPEN`` lock, asking its holder to let go (``RELEASE``) until ``deadline`` (monotonic s).
        Raises ``CommitInProgressError`` when it is still held then."""
        fd = os.open(OPEN, os.O_RDWR | os.O_CREAT, 0o644, dir_fd=self.dir_fd)
        asked = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise CommitInProgressError(f"another process keeps {self.path} open") from None
                if not asked or not self._exists(RELEASE):
                    os.close(os.open(RELEASE, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=self.dir_fd))
                    asked = True
                time.sleep(TAKE_POLL_S)  # polling the owner's keeper, bounded by the deadline
        self.lock_fd = fd
        with contextlib.suppress(FileNotFoundError):
            os.unlink(RELEASE, dir_fd=self.dir_fd)
        self.marker = self.read_marker()

    def current(self) -> bool:
        """The path still names the directory this handle owns (not removed, or removed and made again)."""
        try:
            return _ident(os.stat(self.path)) == self._ident
        except OSError:
            return False

    def release_requested(self) -> bool:
        return self._exists(RELEASE)

    def _exists(self, name: str) -> bool:
        try:
            os.stat(name, dir_fd=self.dir_fd)
            return True
        except OSError:
            return False

    # -- the database ------------------------------------------------------------------------------------------
    def open_db(self) -> Any:
        """The partition's RocksDB (``rocksdict.Rdict``), opened through a descriptor of its directory (made when
        missing)."""
        if self.db is None:
            from rocksdict import Rdict

            with contextlib.suppress(FileExistsError):
                os.mkdir("db", 0o755, dir_fd=self.dir_fd)
            fd = os.open("db", os.O_RDONLY | os.O_DIRECTORY, dir_fd=self.dir_fd)
            try:
                self.db = Rdict(_fd_path(fd, self.db_path), db_options())
            except BaseException:
                os.close(fd)
                raise
            self._db_fd = fd
        return self.db

    def close_db(self) -> None:
        """Flush and close the database (when open)."""
        if self.db is not None:
            db, self.db = self.db, None
            try:
                db.close()  # rocksdict flushes the memtable first
            finally:
                if self._db_fd is not None:
                    os.close(self._db_fd)
                    self._db_fd = None

    def stage(self, checkpoint_id: str, ops: list[Any]) -> None:
        """Keep the ops of the part this process just uploaded as ``checkpoint_id`` (exactly what it encoded): if
        the driver commits that part, the next task here applies them without reading and decoding the changelog."""
        self._staged = (checkpoint_id, ops)

    def staged_ops(self, checkpoint_id: str) -> list[Any] | None:
        """The ops kept for ``checkpoint_id`` by ``stage``, or None."""
        staged = self._staged
        return staged[1] if staged is not None and staged[0] == checkpoint_id else None

    # -- the marker --------------------------------------------------------------------------------------------
    def read_marker(self) -> dict[str, Any] | None:
        try:
            fd = os.open(MARKER, os.O_RDONLY, dir_fd=self.dir_fd)
            with os.fdopen(fd, "rb") as fh:
                doc = json.loads(fh.read())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def set_marker(self, doc: dict[str, Any] | None) -> None:
        """The database is now at ``doc`` (None: unknown, the marker file removed). The caller made the writes
        durable first: the database is closed, or its WAL synced (``db.flush_wal(True)``)."""
        self.marker = doc
        if self.marker is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(MARKER, dir_fd=self.dir_fd)
        else:
            tmp = f"{MARKER}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=self.dir_fd)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(self.marker))
            os.replace(tmp, MARKER, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)

    # -- the end -----------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the database, let go of ``OPEN`` and of the directory. Raises what the close raises (everything
        is let go first)."""
        try:
            self.close_db()
        finally:
            self._let_go()

    def discard(self) -> None:
        """Let go of a handle whose directory was removed under it: its errors are logged, never raised (every
        write it still attempts lands in the removed directory)."""
        try:
            self.close_db()
        except Exception as exc:  # noqa: BLE001 - the directory is gone: nothing of it is kept
            log.info("dropped the handle of %s, removed under it: %s", self.path, exc)
        finally:
            self._let_go()

    def _let_go(self) -> None:
        for name in ("lock_fd", "dir_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                with contextlib.suppress(OSError):
                    os.close(fd)


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _fd_path(fd: int, fallback: str) -> str:
    """``/proc/self/fd/<fd>`` (Linux): the directory itself, whatever its path names later; else ``fallback``."""
    path = f"/proc/self/fd/{fd}"
    return path if os.path.isdir(path) else fallback


def take(path: str, deadline: float) -> OpenPartition:
    """Own the partition directory ``path`` (it exists; the caller holds the partition's lock): this process's open
    handle when it still names ``path``, else a new one (the ``OPEN`` lock taken, the owner asked to let go until
    ``deadline``, monotonic s). Raises ``CommitInProgressError``, ``OSError``."""
    with _LOCK:
        entry = _HELD.pop(path, None)
        if entry is not None and entry.current():
            entry.in_use = True
            _HELD[path] = entry
            return entry
    if entry is not None:
        entry.discard()
    entry = OpenPartition(path)
    try:
        entry.acquire(deadline)
    except BaseException:
        entry.discard()
        raise
    entry.in_use = True
    with _LOCK:
        _HELD[path] = entry
    return entry


def give_back(entry: OpenPartition, *, close: bool = False) -> None:
    """The task is done with ``entry``: kept open for the next task of this process, or closed (``close``, or when
    Spark does not reuse this process). Raises what the close raises."""
    if close or not keep_open():
        with _LOCK:
            _HELD.pop(entry.path, None)
        entry.close()
        return
    global _KEEPER
    with _LOCK:
        entry.in_use = False
        entry.last_used = time.monotonic()
        if _KEEPER is None or not _KEEPER.is_alive():
            _KEEPER = threading.Thread(target=_keep, name="blobstate-open-partitions", daemon=True)
            _KEEPER.start()


def held() -> list[str]:
    """The paths of the partitions this process keeps open."""
    with _LOCK:
        return sorted(_HELD)


def close_all() -> int:
    """Close every partition this process keeps and no task uses; returns how many. Errors are logged."""
    return len(_close_where(lambda entry: "closed"))


def _close_where(reason_of: Any) -> list[str]:
    """Close the unused partitions ``reason_of(entry)`` names a reason for (a string; None keeps it open)."""
    closed = []
    with _LOCK:
        for path, entry in list(_HELD.items()):
            if entry.in_use:
                continue
            reason = reason_of(entry)
            if reason is None:
                continue
            del _HELD[path]
            try:
                entry.close() if entry.current() else entry.discard()
            except Exception as exc:  # noqa: BLE001 - the WAL keeps what was not flushed; the next owner replays
                log.warning("closing %s (%s) failed: %s", path, reason, exc)
            closed.append(path)
    return closed


def _close_reason(orphaned: bool, now: float, entry: OpenPartition) -> str | None:
    """Why the keeper closes ``entry`` now (None: it stays open)."""
    if orphaned:
        return "the executor is gone"
    if entry.release_requested():
        return "another process asked"
    if now - entry.last_used >= IDLE_CLOSE_S:
        return "idle"
    return None


def _keep() -> None:
    """The keeper thread: close what another process asks for, what stayed idle, everything once the parent (the
    executor) is gone; ends when nothing is left open."""
    while True:
        time.sleep(POLL_S)  # the poll interval of RELEASE requests
        _close_where(functools.partial(_close_reason, os.getppid() != _PARENT, time.monotonic()))
        with _LOCK:
            if not _HELD:
                global _KEEPER
                _KEEPER = None
                return
