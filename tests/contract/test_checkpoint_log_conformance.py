"""The CheckpointLog conformance suite against the file log (local disk, moto S3), SQLite and PostgreSQL, plus what
is specific to each backend (schema, URLs). The Kafka log's suite runs against both Kafka brokers in
``test_kafka_log.py``."""

from __future__ import annotations

import uuid

import pytest

from blobstate.errors import ConfigurationError
from blobstate.repository.backends import open_checkpoint_log
from blobstate.testing.checkpoint_logs import (
    UNREACHABLE_SECRET,
    CheckpointLogContract,
    make_checkpoint,
    new_key,
)


def closed_port() -> int:
    from kafka_server import free_port

    return free_port()  # nothing listens there once the probe socket is closed


# -- file log on local disk ----------------------------------------------------------------------------------
class FileLogContract(CheckpointLogContract):
    def write_raw_record(self, log, key, generation, payload):
        from blobstate.plugins.file_log import record_id

        log.store.put_exclusive(record_id(key, generation), payload)


class TestFileLogLocal(FileLogContract):
    def create_log(self):
        from blobstate.plugins.file_log import open_file_log

        return open_file_log(f"file://{self.tmp_path}/repo")

    def create_unreachable_log(self):
        from blobstate.plugins.file_log import open_file_log

        (self.tmp_path / "a-file").write_bytes(b"not a directory")
        return open_file_log(f"file://{self.tmp_path}/a-file/repo")


# -- file log on moto S3 (conditional create with If-None-Match) ------------------------------------------------
class TestFileLogS3(FileLogContract):
    def create_log(self):
        from blobstate.plugins.file_log import open_file_log

        target = self.request.getfixturevalue("s3_target")
        return open_file_log(target.url, storage_options=target.storage_options)

    def create_unreachable_log(self):
        from blobstate.plugins.file_log import open_file_log

        self.request.getfixturevalue("monkeypatch").setenv("BLOBSTATE_RETRY_ATTEMPTS", "2")
        options = {"endpoint_url": f"http://127.0.0.1:{closed_port()}", "key": "testing",
                   "secret": UNREACHABLE_SECRET, "config_kwargs": {"retries": {"max_attempts": 1},
                                                                   "connect_timeout": 1}}
        return open_file_log("s3://unreachable-bucket/repo", storage_options=options)


# -- SQLite --------------------------------------------------------------------------------------------------
def sql_write_raw(log, key, generation, payload):
    from sqlalchemy import insert

    with log.engine.begin() as conn:
        conn.execute(insert(log.table).values(job=key.job, task=key.task, store=key.store, generation=generation,
                                              checkpoint_id="x", created_time_ms=0, record=payload.decode("latin-1")))


class SqlLogContract(CheckpointLogContract):
    def write_raw_record(self, log, key, generation, payload):
        sql_write_raw(log, key, generation, payload)


class TestSqliteLog(SqlLogContract):
    def create_log(self):
        from blobstate.plugins.sql_log import open_sql_log

        return open_sql_log(f"sqlite:///{self.tmp_path}/log.db")

    def create_unreachable_log(self):
        from blobstate.plugins.sql_log import open_sql_log

        return open_sql_log(f"sqlite:///{self.tmp_path}/missing-dir/log.db")


# -- PostgreSQL ----------------------------------------------------------------------------------------------
class TestPostgresLog(SqlLogContract):
    @pytest.fixture(scope="class")
    def pg_url(self, pg_server):
        return pg_server.create_database(f"conf_{uuid.uuid4().hex[:8]}")

    def create_log(self):
        from blobstate.plugins.sql_log import open_sql_log

        return open_sql_log(self.request.getfixturevalue("pg_url"))

    def create_unreachable_log(self):
        from blobstate.plugins.sql_log import open_sql_log

        return open_sql_log(f"postgresql://blobstate:{UNREACHABLE_SECRET}@127.0.0.1:{closed_port()}/x")


# -- SQL specifics -------------------------------------------------------------------------------------------
def test_sql_schema_is_created_on_first_use_and_the_database_refuses_duplicates(tmp_path):
    import sqlalchemy as sa

    from blobstate.plugins.sql_log import open_sql_log

    url = f"sqlite:///{tmp_path}/cp.db"
    log = open_sql_log(url, storage_options={"table": "my_checkpoints"})
    engine = sa.create_engine(url)
    try:
        assert not sa.inspect(engine).has_table("my_checkpoints")
        key = new_key()
        log.append(make_checkpoint(key), 0)
        assert sa.inspect(engine).has_table("my_checkpoints")
        with pytest.raises(sa.exc.IntegrityError):
            sql_write_raw(log, key, 1, make_checkpoint(key).with_generation(1).to_bytes())
    finally:
        engine.dispose()
        log.close()


def test_sql_rejects_unknown_options_and_bad_table_names(tmp_path):
    from blobstate.plugins.sql_log import engine_url, open_sql_log

    with pytest.raises(ConfigurationError, match="unknown"):
        open_sql_log(f"sqlite:///{tmp_path}/x.db", storage_options={"tabel": "x"})
    with pytest.raises(ConfigurationError, match="table name"):
        open_sql_log(f"sqlite:///{tmp_path}/x.db", storage_options={"table": "x; drop table y"})
    assert engine_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert engine_url("postgresql+psycopg://u:p@h/db") == "postgresql+psycopg://u:p@h/db"


def test_postgres_url_hides_the_password(pg_server):
    from blobstate.plugins.sql_log import open_sql_log

    log = open_sql_log(pg_server.url())
    try:
        assert "blobstate-test-pw" not in log.url and "***" in log.url
        log.latest(new_key())  # connects: the scheme maps to psycopg 3
    finally:
        log.close()


# -- registration --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("url, cls", [
    ("kafka://127.0.0.1:9/topic", "KafkaCheckpointLog"),
    ("sqlite:///{tmp}/a.db", "SqlCheckpointLog"),
    ("postgresql://u:p@127.0.0.1:9/db", "SqlCheckpointLog"),
    ("postgresql+psycopg://u:p@127.0.0.1:9/db", "SqlCheckpointLog"),
])
def test_schemes_select_the_plugins(url, cls, tmp_path):
    log = open_checkpoint_log(url.format(tmp=tmp_path))
    try:
        assert type(log).__name__ == cls
    finally:
        log.close()
