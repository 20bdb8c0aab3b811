"""The CLI's backup/restore cycle with ``--log`` on SQLite and PostgreSQL (real servers), and two writers racing on
one store key: one wins each generation, the other exits 4, restore gives the winner's state. The same scenarios
(``tests/support/log_cycles.py``) run against both Kafka brokers in ``test_kafka_e2e.py``."""

from __future__ import annotations

import uuid

import pytest
from log_cycles import backup_restore_cycle, two_writers_race

LOGS = ["sqlite", "postgresql"]


@pytest.fixture(params=LOGS)
def log_url(request, tmp_path):
    """A checkpoint-log URL on a real server of the parametrized kind."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/checkpoints.db"
    server = request.getfixturevalue("pg_server")
    return server.create_database(f"e2e_{uuid.uuid4().hex[:8]}")


def test_backup_restore_cycle_with_log(log_url, tmp_path):
    backup_restore_cycle(log_url, tmp_path)


def test_two_writers_race_one_wins_each_generation(log_url, tmp_path):
    two_writers_race(log_url, tmp_path)
