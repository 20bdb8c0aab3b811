"""The CLI's backup/restore cycle with ``--log`` on SQLite and PostgreSQL (real servers), and two writers racing on
one store key: one wins each generation, the other exits 4, restore gives the winner's state. The same scenarios
(``tests/support/log_cycles.py``) run against both Kafka brokers in ``test_kafka_e2e.py``."""

from __future__ import annotations

import json
import uuid

import pytest
from fixtures_core import read_all, run_cli, write_keys
from log_cycles import backup_restore_cycle, ok, two_writers_race

from blobstate.errors import EXIT_USAGE
from blobstate.repository.marker import MARKER_ID

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


def test_every_spelling_of_one_postgresql_log_is_the_repositorys_log(pg_server, tmp_path):
    """The SQL plugin serves ``postgres://``, ``postgresql://`` and ``postgresql+psycopg://`` as one database: a
    repository begun with one spelling is written, listed and restored with the others, and a marker that recorded
    ``postgres://`` (as blobstate did before the spellings were one) still matches every spelling."""
    url = pg_server.create_database(f"e2e_{uuid.uuid4().hex[:8]}")
    spellings = [url.replace("postgresql://", "postgres://", 1), url,
                 url.replace("postgresql://", "postgresql+psycopg://", 1)]
    repo, store, host = tmp_path / "repo", tmp_path / "src" / "s", tmp_path / "host"
    expected: dict = {}
    for i, log in enumerate(spellings):
        expected.update(write_keys(store, n=50, start=40 * i, seed=i))
        ok(run_cli("backup", store, "--repo", repo, "--log", log, "--job", "j", "--store", "s", "-q", work_base=host))
    marker_path = repo / MARKER_ID
    marker = json.loads(marker_path.read_text())
    netloc_db = url.split("@", 1)[1]  # 127.0.0.1:PORT/DB, no credentials
    assert marker["checkpointLog"] == f"postgresql://{netloc_db}?table=blobstate_checkpoints"
    marker["checkpointLog"] = f"postgres://{netloc_db}?table=blobstate_checkpoints"  # the spelling recorded before
    marker_path.write_text(json.dumps(marker))
    for log in spellings:
        listed = ok(run_cli("list", "--repo", repo, "--log", log, "--job", "j", "--store", "s", "--json",
                            work_base=host))
        assert len(json.loads(listed.stdout)) == 3
    dest = tmp_path / "restored" / "s"
    ok(run_cli("restore", dest, "--repo", repo, "--log", spellings[0], "--job", "j", "--store", "s", "-q",
               work_base=tmp_path / "host-b"))
    assert read_all(dest) == expected
    other = pg_server.create_database(f"e2e_{uuid.uuid4().hex[:8]}").replace("postgresql://", "postgres://", 1)
    refused = run_cli("list", "--repo", repo, "--log", other, work_base=host)
    assert refused.returncode == EXIT_USAGE and "LogMismatchError" in refused.stderr, refused.stderr
