"""Unit tests: the pure modules of each room, one folder per room (``tests/unit/<room>/test_<module>.py``).

They run alone in seconds (``python -m pytest tests/unit``): no server, no Spark, no subprocess. The session
fixtures of ``tests/conftest.py`` (moto, azurite, the GCS emulator, Kafka, PostgreSQL, Spark) start only when a test
asks for them, so this guard refuses, at collection, any unit test that asks for one (directly or through another
fixture): such a test belongs in ``tests/contract``, ``tests/e2e`` or ``tests/fault``. Local files under
``tmp_path`` (a ``file://`` repository, a RocksDB directory) are fine: they are the real components and cost
milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from blobstate.repository.repo import Repository

UNIT_DIR = Path(__file__).resolve().parent
SERVER_MODULES = {"cloud_servers", "kafka_brokers", "kafka_server", "pg_server", "spark_fixtures"}
SUBPROCESS_FIXTURES = {"cli", "blobstate_script"}


def heavy_fixtures(item: pytest.Item) -> list[str]:
    """The fixtures ``item`` uses (its closure) that start a server or a subprocess."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    heavy = []
    for name, defs in info.name2fixturedefs.items():
        modules = {getattr(d.func, "__module__", "").rsplit(".", 1)[-1] for d in defs}
        if modules & SERVER_MODULES or name in SUBPROCESS_FIXTURES:
            heavy.append(name)
    return sorted(heavy)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    offenders = []
    for item in items:
        if UNIT_DIR in Path(str(item.path)).resolve().parents:
            heavy = heavy_fixtures(item)
            if heavy:
                offenders.append(f"{item.nodeid}: {', '.join(heavy)}")
    if offenders:
        raise pytest.UsageError("unit tests start no server and no subprocess; move these to tests/contract, "
                                "tests/e2e or tests/fault:\n  " + "\n  ".join(offenders))


@pytest.fixture
def repository(tmp_path):
    """A real ``file://`` repository (blob store and file checkpoint log) under ``tmp_path``, open."""
    repo = Repository.open(str(tmp_path / "repo"))
    yield repo
    repo.close()
