"""The commit room's tests share one fixture: an empty ``file://`` repository in the test's directory."""

from __future__ import annotations

import pytest

from blobstate.repository.repo import Repository


@pytest.fixture
def repo(tmp_path):
    """An empty ``file://`` repository under ``tmp_path`` (closed after the test)."""
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    yield repository
    repository.close()
