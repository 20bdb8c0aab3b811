"""``blobstate.repository.log_identity``: one normalised identity, without credentials, for every way of writing the
same checkpoint log (a relative SQLite path from any directory, a SQL URL's driver and credentials, Kafka's servers in
any order), the repository's own file log whatever URL reaches it, and different logs kept different."""

from __future__ import annotations

import pytest

from blobstate.repository.log_identity import (
    REPOSITORY_LOG,
    absolute_log_url,
    canonical_identity,
    describe,
    log_identity,
    same_log,
)

REPO = "file:///backups/repo"


def test_the_repositorys_own_log_has_one_name_and_is_described_in_words():
    assert describe(REPOSITORY_LOG) == "the file log inside the repository"
    assert describe("sqlite:///x.db") == "sqlite:///x.db"
    for log in (None, REPO, REPO + "/", "file:///backups/repo/", "local:///backups/repo", "local:///backups/repo/"):
        assert log_identity(log, REPO) == REPOSITORY_LOG, log
    assert log_identity("file:///backups/repo", "myfs:///backups/repo") == REPOSITORY_LOG  # a wrapping plugin's scheme


@pytest.mark.parametrize("log", ["file:///backups/other", "file:///backups/repo2", "s3://bucket/backups/repo",
                                 "file:///backups"])
def test_a_file_log_elsewhere_is_another_log(log):
    assert log_identity(log, REPO) not in (REPOSITORY_LOG, log_identity(REPO + "x", REPO))


def test_a_relative_sqlite_log_is_the_same_absolute_file_from_its_first_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute_log_url("sqlite:///log.db") == f"sqlite:///{tmp_path}/log.db"
    assert absolute_log_url("sqlite+pysqlite:///sub/log.db?table=t") == f"sqlite+pysqlite:///{tmp_path}/sub/log.db?table=t"
    for unchanged in ("sqlite:////abs/log.db", "sqlite:///:memory:", "sqlite://", "sqlite:///file:x?mode=ro",
                      "postgresql://h/db", "kafka://h:1/t", "relative/path"):
        assert absolute_log_url(unchanged) == unchanged
    assert log_identity("sqlite:///log.db", REPO) == log_identity(f"sqlite:///{tmp_path}/log.db", REPO) == \
        f"sqlite:///{tmp_path}/log.db"


def test_a_sqlite_logs_table_counts_and_the_default_table_is_left_out():
    assert log_identity("sqlite:////d/log.db?table=blobstate_checkpoints", REPO) == "sqlite:////d/log.db"
    assert log_identity("sqlite:////d/log.db?table=other", REPO) == "sqlite:////d/log.db?table=other"
    assert log_identity("sqlite:////d/log.db", REPO, {"table": "opt"}) == "sqlite:////d/log.db?table=opt"
    assert log_identity("sqlite+pysqlite:////d/log.db", REPO) == log_identity("sqlite:////d/log.db", REPO)


def test_a_sql_logs_identity_has_its_host_port_database_and_table_and_no_credentials_or_driver():
    identity = log_identity("postgresql+psycopg://user:s3cret@DB.example:5432/state?sslmode=require", REPO)
    assert identity == "postgresql://db.example:5432/state?table=blobstate_checkpoints"
    assert log_identity("postgresql://other:pw@db.example:5432/state", REPO) == identity
    assert log_identity("postgresql://db.example:5432/state", REPO, {"table": "t2"}) != identity
    assert log_identity("postgresql://db.example:5433/state", REPO) != identity
    assert log_identity("mysql://u:p@h/db?table=x", REPO) == "mysql://h/db?table=x"


def test_postgres_and_postgresql_are_one_log_in_the_canonical_spelling():
    """The SQL plugin serves both as ``postgresql+psycopg``; the identity keeps ``postgresql``, the spelling every
    marker recorded for it, so those markers still match."""
    canonical = "postgresql://h:5432/db?table=blobstate_checkpoints"
    for url in ("postgres://h:5432/db", "postgresql://h:5432/db", "postgresql+psycopg://u:pw@h:5432/db",
                "postgresql+psycopg2://h:5432/db/", "POSTGRES://H:5432/db"):
        assert log_identity(url, REPO) == canonical, url


def test_a_marker_that_recorded_either_spelling_is_the_same_log():
    canonical = log_identity("postgresql://h/db", REPO)
    assert same_log(canonical, canonical) and same_log("postgres://h/db?table=blobstate_checkpoints", canonical)
    assert canonical_identity("postgres://h/db?table=t") == "postgresql://h/db?table=t"
    for other in ("postgresql://h/db2?table=blobstate_checkpoints", "postgresql://h/db?table=t",
                  "mysql://h/db?table=blobstate_checkpoints", REPOSITORY_LOG, "postgres://h2/db?table=blobstate_checkpoints"):
        assert not same_log(other, canonical), other
    assert canonical_identity(REPOSITORY_LOG) == REPOSITORY_LOG


def test_kafkas_servers_in_any_order_and_with_credentials_are_one_log():
    identity = log_identity("kafka://b:9092,A:9092/checkpoints?timeout_ms=5", REPO)
    assert identity == "kafka://a:9092,b:9092/checkpoints"
    assert log_identity("kafka://user:pw@a:9092, b:9092/checkpoints/", REPO) == identity
    assert log_identity("kafka://a:9092,b:9092/other", REPO) != identity


def test_no_identity_holds_a_credential():
    for url in ("postgresql://admin:hunter22@h/db", "kafka://admin:hunter22@h:1/t", "s3://AKIA:hunter22@b/log",
                "mysql://admin:hunter22@h/db"):
        identity = log_identity(url, REPO)
        assert "hunter22" not in identity and "admin" not in identity, identity
