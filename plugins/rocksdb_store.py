"""The ``rocksdb`` local store (rocksdict): RocksDB's own ``Checkpoint`` (hard-linked SSTs, milliseconds).

Which writes a backup holds (RocksDB's checkpoint and recovery rules):

- **Through the live handle** (``blobstate.backup(path, source=db)``, ``StoreCommitter.backup(db)``, the Spark
  binding): ``Checkpoint(db)`` flushes the memtables or copies the live WAL files, so every write acknowledged
  before the call is in the checkpoint. The way to back up a store your own process has open.
- **From the path** (``blobstate backup DIR``), whether or not another process holds the store open: a read-only
  instance makes the checkpoint (the SSTs and ``MANIFEST`` it sees at open), then the WAL files (``*.log`` in the
  store, or in its ``wal_dir``) are copied into it, so writes acknowledged to the WAL before the copy are
  replayed when the restored store opens (a write torn by the copy was not acknowledged; RocksDB's default
  ``kPointInTimeRecovery`` stops before it). This holds only when no flush or compaction installs a new version
  in between: the ``CURRENT`` file and the ``MANIFEST``'s size and mtime are compared before and after, and the
  checkpoint is taken again (``PATH_ATTEMPTS`` times) until they match; a store that never settles is refused
  with ``LocalStoreError`` naming the live-handle API. A writer with ``manual_wal_flush`` or the WAL disabled
  keeps acknowledged writes in its own memory, where no other process can read them: back such a store up
  through its handle.

Path options are never carried along: ``wal_dir``, ``db_log_dir``, ``db_paths`` and ``cf_paths`` are stripped
from the checkpoint's ``OPTIONS-*`` (rewritten as new files, never through a hard link to the live store), and a
snapshot that still sets them (written by an older version or by hand) fails ``validate``, before the restore
changes anything: a restored store never writes or deletes outside its directory.

Immutable: ``*.sst`` and ``*.blob`` (BlobDB) files, which RocksDB never rewrites. Mutable: everything else
(``MANIFEST-*`` keeps its name and grows, ``CURRENT``, ``OPTIONS-*``, WAL ``*.log``, ``rocksdict-config.json``):
read at every commit (never cached), compared by CRC32C and XXH3-128, and copied (never hard-linked) on restore.
"""

from __future__ import annotations

import os
import re
import shutil

from blobstate.errors import IntegrityError, LocalStoreError
from blobstate.local.files import replace_file
from blobstate.plugin.interfaces import LocalStore

IMMUTABLE_SUFFIXES = (".sst", ".blob")
PATH_ATTEMPTS = 10
PATH_OPTIONS = ("wal_dir", "db_log_dir", "db_paths", "cf_paths")
_PATH_OPTION = re.compile(rf"^\s*({'|'.join(PATH_OPTIONS)})\s*=\s*(\S.*)$")
_WAL = re.compile(r"^[0-9]+\.log$")
_LIVE_API = ("back it up through its live handle instead: blobstate.backup(path, source=db) or "
             "StoreCommitter.backup(db) in the process that has it open")


def _options_files(directory: str) -> list[str]:
    """``OPTIONS-*`` files of a store, oldest first."""
    names = [n for n in os.listdir(directory) if re.fullmatch(r"OPTIONS-[0-9]+", n)]
    return [os.path.join(directory, n) for n in sorted(names, key=lambda n: int(n[8:]))]


def path_options(directory: str) -> list[str]:
    """``"OPTIONS-n: key=value"`` for every path option set in the store's ``OPTIONS-*`` files."""
    found = []
    for path in _options_files(directory):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = _PATH_OPTION.match(line)
                if m:
                    found.append(f"{os.path.basename(path)}: {m.group(1)}={m.group(2)[:200]}")
    return found


def strip_path_options(directory: str) -> None:
    """Remove path options from the ``OPTIONS-*`` files in ``directory``, writing each changed file anew (temp
    file + rename), so a hard link shared with the live store is never written through."""
    for path in _options_files(directory):
        with open(path, encoding="utf-8", errors="surrogateescape") as fh:
            lines = fh.readlines()
        kept = [line for line in lines if not _PATH_OPTION.match(line)]
        if len(kept) != len(lines):
            replace_file(path, "".join(kept))


def _wal_dir(directory: str) -> str:
    options = _options_files(directory)
    if options:
        with open(options[-1], encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = _PATH_OPTION.match(line)
                if m and m.group(1) == "wal_dir":
                    return m.group(2).strip()
    return directory


def _version_state(directory: str) -> tuple[bytes, int, int]:
    """``(CURRENT, size and mtime in ns of the MANIFEST it names)``: changes whenever a new version is installed."""
    with open(os.path.join(directory, "CURRENT"), "rb") as fh:
        current = fh.read()
    st = os.stat(os.path.join(directory, current.decode(errors="replace").strip()))
    return current, st.st_size, st.st_mtime_ns


def lock_holder(directory: str) -> int | None:
    """The pid of a process holding the store's ``LOCK`` (RocksDB's ``fcntl`` lock), or None.

    Read from ``/proc/locks`` on Linux, so that this process's own locks are seen too and no file descriptor of
    ``LOCK`` is closed here (closing one would drop every POSIX lock this process holds on it); elsewhere asked
    with a non-blocking ``lockf``.
    """
    path = os.path.join(directory, "LOCK")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    try:
        with open("/proc/locks", encoding="ascii") as fh:
            table = fh.read()
    except OSError:
        return _lockf_holder(path)
    wanted = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in table.splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 8:
            continue  # a waiter, not a holder
        if fields[5] == wanted:
            return int(fields[4]) if fields[4].lstrip("-").isdigit() else -1
    return None


def _lockf_holder(path: str) -> int | None:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return -1
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class RocksDBStore(LocalStore):
    """``create_checkpoint(source, target)``: ``source`` is a live ``rocksdict.Rdict`` or a DB directory (see the
    module docstring for which writes each holds)."""

    store_type = "rocksdb"

    def create_checkpoint(self, source: object, target_dir: str) -> None:
        from rocksdict import Checkpoint, Rdict

        if isinstance(source, Rdict):
            Checkpoint(source).create_checkpoint(target_dir)
        else:
            self._checkpoint_from_path(os.fspath(source), target_dir)  # type: ignore[call-overload]
        try:
            strip_path_options(target_dir)
        except BaseException:
            shutil.rmtree(target_dir, ignore_errors=True)
            raise

    def _checkpoint_from_path(self, directory: str, target_dir: str) -> None:
        from rocksdict import AccessType, Checkpoint, Rdict

        if not os.path.isfile(os.path.join(directory, "CURRENT")):
            raise FileNotFoundError(f"not a RocksDB store (no CURRENT file): {directory}")
        for _ in range(PATH_ATTEMPTS):
            before = _version_state(directory)
            db = Rdict(directory, access_type=AccessType.read_only())
            try:
                Checkpoint(db).create_checkpoint(target_dir)
            finally:
                db.close()
            try:
                wal_dir = _wal_dir(directory)
                for name in sorted(os.listdir(wal_dir)):
                    if _WAL.match(name):
                        shutil.copyfile(os.path.join(wal_dir, name), os.path.join(target_dir, name))
                settled = _version_state(directory) == before
            except FileNotFoundError:  # a WAL or the MANIFEST went away: a new version was installed
                settled = False
            if settled:
                return
            shutil.rmtree(target_dir, ignore_errors=True)
        raise LocalStoreError(f"the RocksDB at {directory} kept changing (flushes or compactions) during "
                              f"{PATH_ATTEMPTS} checkpoints from its path; {_LIVE_API}")

    def is_mutable(self, relative_path: str) -> bool:
        return not relative_path.endswith(IMMUTABLE_SUFFIXES)

    def check_destination(self, directory: str) -> None:
        """Refuse (``LocalStoreError``) a restore into a store a live process holds open (its ``LOCK``)."""
        pid = lock_holder(directory)
        if pid is not None:
            who = "this process" if pid == os.getpid() else f"process {pid}" if pid > 0 else "another process"
            raise LocalStoreError(f"the RocksDB at {directory} is open in {who} (its LOCK is held): close it "
                                  "before restoring into it")

    def validate(self, directory: str) -> None:
        from rocksdict import AccessType, Rdict

        found = path_options(directory)
        if found:
            raise IntegrityError(f"the snapshot's RocksDB options name paths outside its directory "
                                 f"({'; '.join(found)}): refused, a restored store never writes or deletes outside "
                                 "its directory")
        try:
            db = Rdict(directory, access_type=AccessType.read_only())
        except Exception as exc:  # noqa: BLE001 - rocksdict raises plain Exception
            raise IntegrityError(f"restored RocksDB at {directory} does not open: {exc}") from None
        db.close()


def looks_like_rocksdb(directory: str) -> bool:
    """A RocksDB directory has a ``CURRENT`` file."""
    return os.path.isfile(os.path.join(directory, "CURRENT"))
