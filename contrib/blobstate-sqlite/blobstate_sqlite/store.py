"""The ``sqlite`` local store: consistent copies of SQLite databases through SQLite's online backup API.

A store is a directory holding one or more database files (``*.db``, ``*.sqlite``, ``*.sqlite3``; the top level
only, symlinks and other files ignored), a single database file, or a live ``sqlite3.Connection``. A checkpoint
directory holds one self-contained file per database, under the same name: ``sqlite3.Connection.backup`` copies
the committed content (a WAL database's ``-wal`` frames included) while writers keep running, so no ``-wal``,
``-shm`` or ``-journal`` file is ever part of a checkpoint.

Mutability: every file is mutable. SQLite rewrites pages of a database file in place under the same name, so
each commit uploads each database whose content changed (the core skips a file only if name, size and CRC32C
all match), and restore copies database files instead of hard-linking them.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from pathlib import Path

from blobstate.errors import ConfigurationError, IntegrityError, StorageError
from blobstate.plugin.interfaces import LocalStore

#: File name suffixes of database files in a store directory.
DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: The first 16 bytes of every non-empty SQLite 3 database file.
SQLITE_HEADER = b"SQLite format 3\x00"
#: ``validate`` checks: ``quick`` (``PRAGMA quick_check``: every page of every b-tree, O(size)), ``full``
#: (``PRAGMA integrity_check``: also index contents), ``open`` (read the schema only).
CHECKS = ("quick", "full", "open")


def database_files(directory: str) -> list[str]:
    """Names (not paths) of the database files at the top level of ``directory``, sorted.

    Raises ``FileNotFoundError``/``NotADirectoryError`` when ``directory`` is not a directory.
    """
    names = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(DB_SUFFIXES) and entry.is_file(follow_symlinks=False):
                names.append(entry.name)
    return sorted(names)


def is_sqlite_file(path: str) -> bool:
    """True for an SQLite 3 database file: it starts with the SQLite header, or is empty (a new database)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError:
        return False
    return head in (SQLITE_HEADER, b"")


def looks_like_sqlite(directory: str) -> bool:
    """The store-type detector: ``directory`` holds at least one SQLite database file and every ``*.db``-named
    file in it is one (so a directory of other ``.db`` formats is not claimed)."""
    try:
        names = database_files(directory)
    except OSError:
        return False
    return bool(names) and all(is_sqlite_file(os.path.join(directory, n)) for n in names)


def _uri(path: str, **params: str) -> str:
    """An SQLite URI for ``path`` (percent-encoded, so ``?``/``#``/``%`` in names are safe)."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return Path(path).absolute().as_uri() + (f"?{query}" if query else "")


def _main_file(conn: sqlite3.Connection) -> str:
    for _seq, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return file or ""
    return ""


class SqliteStore(LocalStore):
    """SQLite databases, copied with the online backup API.

    ``check``: how thoroughly ``validate`` reads a restored database (see ``CHECKS``); ``busy_timeout_s``: how
    long a checkpoint waits for a writer's exclusive lock before it fails.
    """

    store_type = "sqlite"

    def __init__(self, *, check: str = "quick", busy_timeout_s: float = 30.0) -> None:
        if check not in CHECKS:
            raise ConfigurationError(f"check must be one of {', '.join(CHECKS)}, not {check!r}")
        self.check = check
        self.busy_timeout_s = busy_timeout_s

    # -- checkpoint -------------------------------------------------------------------------------------------
    def create_checkpoint(self, source: object, target_dir: str) -> None:
        """Copy every database of ``source`` into the new directory ``target_dir`` (one file each, same name).

        ``source``: a store directory, a database file path, or a live ``sqlite3.Connection`` (its ``main``
        database). Raises ``FileExistsError`` when ``target_dir`` exists (left untouched), ``ConfigurationError``
        for a source with no database, ``StorageError`` when SQLite cannot read a database. A failed checkpoint
        leaves no ``target_dir`` behind.
        """
        plan = self._plan(source)
        os.mkdir(target_dir)  # atomic "must not exist"; the parent must exist
        try:
            for name, src in plan:
                self._copy(src, os.path.join(target_dir, name))
        except BaseException:
            shutil.rmtree(target_dir, ignore_errors=True)
            raise

    def _plan(self, source: object) -> list[tuple[str, str]]:
        """``(file name in the checkpoint, database path)`` for each database of ``source``."""
        if isinstance(source, sqlite3.Connection):
            # Read through a connection of our own: the caller's may be inside a write transaction (SQLite then
            # refuses to back it up), and only committed content belongs in a checkpoint.
            path = _main_file(source)
            if not path:
                raise ConfigurationError("an in-memory SQLite database has no file to copy; use a file-backed one")
            return [(os.path.basename(path), path)]
        if not isinstance(source, (str, os.PathLike)):
            raise ConfigurationError(f"sqlite store: cannot checkpoint a {type(source).__name__}")
        path = os.fspath(source)
        if os.path.isfile(path):
            return [(os.path.basename(path), path)]
        if not os.path.isdir(path):
            raise ConfigurationError(f"sqlite store: {path} is neither a directory nor a database file")
        names = database_files(path)
        if not names:
            raise ConfigurationError(f"{path} holds no SQLite database ({', '.join('*' + s for s in DB_SUFFIXES)})")
        return [(n, os.path.join(path, n)) for n in names]

    def _copy(self, src: str, target: str) -> None:
        deadline = time.monotonic() + self.busy_timeout_s

        def progress(status: int, remaining: int, total: int) -> None:
            # Python's backup() retries SQLITE_BUSY/LOCKED forever; give up at the deadline instead.
            if status in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) and time.monotonic() > deadline:
                raise StorageError(f"SQLite backup of {src} failed: database locked for over "
                                   f"{self.busy_timeout_s:g} s")

        try:
            # mode=rw: never create a missing database by accident; a reader only (no write is issued).
            conn = sqlite3.connect(_uri(src, mode="rw"), uri=True, timeout=self.busy_timeout_s)
            try:
                dst = sqlite3.connect(target)
                try:
                    # All pages in one step: one read transaction, a consistent snapshot.
                    conn.backup(dst, progress=progress, sleep=0.05)
                finally:
                    dst.close()  # the last connection closes: a WAL-mode copy folds its -wal back in
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise StorageError(f"SQLite backup of {src} failed: {exc}") from exc
        for suffix in ("-wal", "-shm", "-journal"):
            if os.path.exists(target + suffix):  # never expected; a copy must be one self-contained file
                raise StorageError(f"SQLite backup left {os.path.basename(target)}{suffix} behind")

    # -- mutability, validation -------------------------------------------------------------------------------
    def is_mutable(self, relative_path: str) -> bool:
        """Always True: SQLite changes database files in place (and the core's own marker file too)."""
        return True

    def validate(self, directory: str) -> None:
        """Open every database of a restored ``directory`` read-only (``immutable=1``: no ``-wal``/``-shm`` is
        created) and run the configured check. Raises ``IntegrityError`` naming the first bad database, or when
        ``directory`` holds no database at all."""
        try:
            names = database_files(directory)
        except OSError as exc:
            raise IntegrityError(f"restored SQLite store {directory} is not readable: {exc}") from None
        if not names:
            raise IntegrityError(f"restored SQLite store {directory} holds no database")
        for name in names:
            problem = self._check_one(os.path.join(directory, name))
            if problem:
                raise IntegrityError(f"restored SQLite database {name} in {directory} is damaged: {problem}")

    def _check_one(self, path: str) -> str | None:
        """None when the database passes the check, else SQLite's complaint."""
        try:
            conn = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True)
        except sqlite3.Error as exc:
            return str(exc)
        try:
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            if self.check == "open":
                return None
            pragma = "quick_check" if self.check == "quick" else "integrity_check"
            rows = [r[0] for r in conn.execute(f"PRAGMA {pragma}")]
            return None if rows == ["ok"] else "; ".join(map(str, rows[:5]))
        except sqlite3.Error as exc:
            return str(exc)
        finally:
            conn.close()
