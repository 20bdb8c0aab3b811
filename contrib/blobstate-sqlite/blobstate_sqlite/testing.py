"""The harness that runs blobstate's ``LocalStore`` conformance suite against the ``sqlite`` store (needs pytest).

Keys are spread over two databases, ``even.db`` (WAL mode, automatic WAL checkpoints off, so a checkpoint must
pick committed pages out of the ``-wal`` file) and ``odd.sqlite`` (rollback journal), each a table ``kv``.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Mapping

from blobstate.testing.local_stores import StoreHarness
from blobstate_sqlite.store import _uri, database_files

DATABASES = ("even.db", "odd.sqlite")


def _db_for(key: str) -> str:
    return DATABASES[zlib.crc32(key.encode()) % 2]


class SqliteHarness(StoreHarness):
    """``open`` keeps one connection per database until ``close``; the source is the store directory."""

    store_type = "sqlite"

    def __init__(self) -> None:
        self._conns: dict[str, dict[str, sqlite3.Connection]] = {}

    def open(self, directory: str) -> object:
        os.makedirs(directory, exist_ok=True)
        conns = {}
        for name in DATABASES:
            conn = sqlite3.connect(os.path.join(directory, name))
            if name.endswith(".db"):
                conn.execute("PRAGMA journal_mode=wal")
                conn.execute("PRAGMA wal_autocheckpoint=0")
            conn.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
            conn.commit()
            conns[name] = conn
        self._conns[directory] = conns
        return directory

    def write(self, source: object, items: Mapping[str, str]) -> None:
        conns = self._conns[str(source)]
        for key, value in items.items():
            conns[_db_for(key)].execute("INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)", (key, value))
        for conn in conns.values():
            conn.commit()

    def read(self, directory: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for name in database_files(directory):
            conn = sqlite3.connect(_uri(os.path.join(directory, name), mode="ro", immutable="1"), uri=True)
            try:
                out.update(conn.execute("SELECT k, v FROM kv"))
            finally:
                conn.close()
        return out

    def close(self, source: object) -> None:
        for conn in self._conns.pop(str(source), {}).values():
            conn.close()
