"""The one shape of every conformance kit: a contract class with one abstract factory (``create_store``,
``create_log``, ``create_harness``) that the backend's ``Test*`` class implements, like eventsourcing's
``create_recorder()``. Before each test the kit sets ``self.tmp_path`` (the test's temporary directory) and
``self.request`` (pytest's request: ``self.request.getfixturevalue("my_server")`` for any other fixture; name a
parametrized one in ``@pytest.mark.usefixtures`` on the class so that pytest runs the suite once per parameter).
"""

from __future__ import annotations

from abc import ABC
from pathlib import Path

import pytest


class ContractKit(ABC):
    """Base of the contract classes: gives the factory ``self.tmp_path`` and ``self.request``."""

    request: pytest.FixtureRequest
    tmp_path: Path

    @pytest.fixture(autouse=True)
    def _kit(self, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.request, self.tmp_path = request, tmp_path
