"""blobstate-sqlite: a third-party blobstate plugin providing the ``sqlite`` local store.

Registered through the entry-point group ``blobstate`` (see this distribution's pyproject.toml); the plugin
manager imports this module and calls its hook implementations. The factory and detector are dotted paths, so
``blobstate_sqlite.store`` is imported only when a SQLite store is actually used.
"""

from __future__ import annotations

from blobstate import LocalStoreSpec, hookimpl

__version__ = "0.1.0"

#: Above ``dir`` (0), which claims every directory, and below ``rocksdb`` (10).
PRIORITY = 5


@hookimpl
def blobstate_local_stores() -> list[LocalStoreSpec]:
    """The ``sqlite`` store type: SQLite databases copied with the online backup API."""
    return [
        LocalStoreSpec(
            name="sqlite",
            store_type="sqlite",
            factory="blobstate_sqlite.store:SqliteStore",
            detect="blobstate_sqlite.store:looks_like_sqlite",
            priority=PRIORITY,
            description="SQLite databases (*.db, *.sqlite, *.sqlite3), copied with the online backup API",
        )
    ]
