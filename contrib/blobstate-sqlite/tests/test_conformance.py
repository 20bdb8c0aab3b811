"""Run blobstate's LocalStore conformance suite against the sqlite store: ``pytest tests`` in this directory,
with blobstate and this distribution installed (``pip install -e .``)."""

from blobstate.testing.local_stores import LocalStoreContract
from blobstate_sqlite.testing import SqliteHarness


class TestSqliteStore(LocalStoreContract):
    def create_harness(self) -> SqliteHarness:
        return SqliteHarness()
