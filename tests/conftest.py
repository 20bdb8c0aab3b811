"""Shared fixtures. Server fixtures (moto, azurite, GCS emulator, Kafka, PostgreSQL, Spark) live in
``tests/support/`` and are loaded as pytest plugins below; each starts a real server on 127.0.0.1."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "support"))
os.environ.setdefault("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "0")
# `python -m pytest` from a virtual environment that is not activated: its console scripts (blobstate, moto_server,
# gcp-storage-emulator) are found as if it were, by the fixtures and by every subprocess they start.
_bin = os.path.dirname(sys.executable)
if _bin not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = os.pathsep.join([_bin, os.environ.get("PATH", "")])

pytest_plugins = [
    "fixtures_core",
    "kafka_server",
    "kafka_brokers",
    "pg_server",
    "cloud_servers",
    "spark_fixtures",
]


LONG_HELP = ("also run the tests marked long: the variants the suite leaves to `python -m bench.long_tests` "
             "(a fault matrix's other kill points, the other placement of a Spark kill test)")


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", default=False, help=LONG_HELP)


def pytest_collection_modifyitems(config, items):
    """Deselect the tests marked ``long`` unless ``--long`` (or ``BLOBSTATE_LONG_TESTS=1``) asks for them: the suite
    keeps one short variant of each (the 20-minute budget on two cores), ``bench/long_tests.py`` runs all of them."""
    if config.getoption("--long") or os.environ.get("BLOBSTATE_LONG_TESTS") == "1":
        return
    long_ones = [item for item in items if item.get_closest_marker("long") is not None]
    if long_ones:
        config.hook.pytest_deselected(items=long_ones)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]


@pytest.fixture(autouse=True)
def _fresh_plugin_manager(monkeypatch):
    """Every test gets a freshly built plugin manager (plugins registered by one test never leak)."""
    from blobstate.plugin.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()
