"""Run blobstate's LocalStore conformance suite against the sqlite store: ``pytest tests`` in this directory,
with blobstate and this distribution installed (``pip install -e .``)."""

import pytest
from blobstate.testing.local_stores import LocalStoreConformance
from blobstate_sqlite.testing import SqliteHarness


class TestSqliteStore(LocalStoreConformance):
    @pytest.fixture
    def harness(self) -> SqliteHarness:
        return SqliteHarness()
