"""Shared fixtures. Server fixtures (moto, azurite, GCS emulator, Kafka, PostgreSQL, Spark) live in
``tests/support/`` and are loaded as pytest plugins below; each starts a real server on 127.0.0.1."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "support"))
os.environ.setdefault("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "0")

pytest_plugins = [
    "fixtures_core",
    "kafka_server",
    "kafka_brokers",
    "pg_server",
    "cloud_servers",
    "spark_fixtures",
]


@pytest.fixture(autouse=True)
def _fresh_plugin_manager(monkeypatch):
    """Every test gets a freshly built plugin manager (plugins registered by one test never leak)."""
    from blobstate.plugin.manager import reset_plugin_manager

    reset_plugin_manager()
    yield
    reset_plugin_manager()
