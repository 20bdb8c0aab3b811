"""The CheckpointLog conformance suite against the file log (local disk), SQLite, PostgreSQL and Kafka 0.9.0.1,
plus what is specific to each backend (acceptance rule, topic handling, schema, URLs)."""

from __future__ import annotations

import uuid

import pytest

from blobstate.backends import open_checkpoint_log
from blobstate.errors import ConfigurationError, CorruptIndexError, FencedError
from blobstate.model import StoreKey
from blobstate.testing.checkpoint_logs import (
    UNREACHABLE_SECRET,
    CheckpointLogContract,
    make_checkpoint,
    new_key,
)

KAFKA_PARTITIONS = 3


def closed_port() -> int:
    from kafka_server import free_port

    return free_port()  # nothing listens there once the probe socket is closed


# -- file log on local disk ----------------------------------------------------------------------------------
class TestFileLogLocal(CheckpointLogContract):
    @pytest.fixture
    def open_log(self, tmp_path):
        from blobstate.plugins.file_log import open_file_log

        return lambda: open_file_log(f"file://{tmp_path}/repo")

    @pytest.fixture
    def write_malformed(self):
        from blobstate.plugins.file_log import record_id

        return lambda log, key, generation, payload: log.store.put_exclusive(record_id(key, generation), payload)

    @pytest.fixture
    def open_unreachable_log(self, tmp_path):
        from blobstate.plugins.file_log import open_file_log

        (tmp_path / "a-file").write_bytes(b"not a directory")
        return lambda: open_file_log(f"file://{tmp_path}/a-file/repo")


# -- file log on moto S3 (conditional create with If-None-Match) ------------------------------------------------
class TestFileLogS3(CheckpointLogContract):
    @pytest.fixture
    def open_log(self, s3_target):
        from blobstate.plugins.file_log import open_file_log

        return lambda: open_file_log(s3_target.url, storage_options=s3_target.storage_options)

    @pytest.fixture
    def write_malformed(self):
        from blobstate.plugins.file_log import record_id

        return lambda log, key, generation, payload: log.store.put_exclusive(record_id(key, generation), payload)

    @pytest.fixture
    def open_unreachable_log(self, monkeypatch):
        from blobstate.plugins.file_log import open_file_log

        monkeypatch.setenv("BLOBSTATE_RETRY_ATTEMPTS", "2")
        options = {"endpoint_url": f"http://127.0.0.1:{closed_port()}", "key": "testing",
                   "secret": UNREACHABLE_SECRET, "config_kwargs": {"retries": {"max_attempts": 1},
                                                                   "connect_timeout": 1}}
        return lambda: open_file_log("s3://unreachable-bucket/repo", storage_options=options)


# -- SQLite --------------------------------------------------------------------------------------------------
def _sql_write_malformed(log, key, generation, payload):
    from sqlalchemy import insert

    with log.engine.begin() as conn:
        conn.execute(insert(log.table).values(job=key.job, task=key.task, store=key.store, generation=generation,
                                              checkpoint_id="x", created_time_ms=0,
                                              record=payload.decode("latin-1")))


class TestSqliteLog(CheckpointLogContract):
    @pytest.fixture
    def open_log(self, tmp_path):
        from blobstate.plugins.sql_log import open_sql_log

        return lambda: open_sql_log(f"sqlite:///{tmp_path}/log.db")

    @pytest.fixture
    def write_malformed(self):
        return _sql_write_malformed

    @pytest.fixture
    def open_unreachable_log(self, tmp_path):
        from blobstate.plugins.sql_log import open_sql_log

        return lambda: open_sql_log(f"sqlite:///{tmp_path}/missing-dir/log.db")


# -- PostgreSQL ----------------------------------------------------------------------------------------------
class TestPostgresLog(CheckpointLogContract):
    @pytest.fixture(scope="class")
    def pg_url(self, pg_server):
        return pg_server.create_database(f"conf_{uuid.uuid4().hex[:8]}")

    @pytest.fixture
    def open_log(self, pg_url):
        from blobstate.plugins.sql_log import open_sql_log

        return lambda: open_sql_log(pg_url)

    @pytest.fixture
    def write_malformed(self):
        return _sql_write_malformed

    @pytest.fixture
    def open_unreachable_log(self):
        from blobstate.plugins.sql_log import open_sql_log

        return lambda: open_sql_log(f"postgresql://blobstate:{UNREACHABLE_SECRET}@127.0.0.1:{closed_port()}/x")


# -- Kafka 0.9.0.1 -------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kafka_topic(kafka_server):
    topic = f"checkpoints-{uuid.uuid4().hex[:8]}"
    kafka_server.create_topic(topic, partitions=KAFKA_PARTITIONS)
    return topic


def _kafka_write_raw(bootstrap, topic, key, generation, payload):
    from kafka import KafkaProducer

    from blobstate.plugins.kafka_log import partition_for, record_key

    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(0, 9), acks="all", enable_idempotence=False)
    try:
        producer.send(topic, key=record_key(key, generation, uuid.uuid4().hex), value=payload,
                      partition=partition_for(key, KAFKA_PARTITIONS)).get(timeout=30)
    finally:
        producer.close()


class TestKafkaLog(CheckpointLogContract):
    @pytest.fixture
    def open_log(self, kafka_server, kafka_topic):
        from blobstate.plugins.kafka_log import open_kafka_log

        return lambda: open_kafka_log(kafka_server.url(kafka_topic))

    @pytest.fixture
    def write_malformed(self, kafka_server, kafka_topic):
        return lambda log, key, generation, payload: _kafka_write_raw(kafka_server.bootstrap, kafka_topic, key,
                                                                      generation, payload)

    @pytest.fixture
    def open_unreachable_log(self):
        from blobstate.plugins.kafka_log import open_kafka_log

        url = f"kafka://user:{UNREACHABLE_SECRET}@127.0.0.1:{closed_port()}/t?api_version=0.9&timeout_ms=2000"
        return lambda: open_kafka_log(url)


# -- Kafka specifics -----------------------------------------------------------------------------------------
def test_kafka_missing_topic_is_a_configuration_error(kafka_server):
    from blobstate.plugins.kafka_log import open_kafka_log

    log = open_kafka_log(kafka_server.url("no-such-topic", timeout_ms="2000"))
    try:
        with pytest.raises(ConfigurationError, match="does not exist"):
            log.latest(new_key())
    finally:
        log.close()


def test_kafka_topic_admin_creates_the_topic_on_first_use(kafka_server):
    from blobstate.plugins.kafka_log import KafkaLogConfig, open_kafka_log

    class TopicCommandAdmin:  # a TopicAdmin for a 0.9 broker: Kafka's TopicCommand through ZooKeeper
        calls: list[str] = []

        def ensure_topic(self, topic, *, partitions, replication_factor):
            self.calls.append(topic)
            kafka_server.create_topic(topic, partitions=partitions)

    admin = TopicCommandAdmin()
    topic = f"created-{uuid.uuid4().hex[:8]}"
    log = open_kafka_log(kafka_server.url(topic, partitions="2"), storage_options={"topic_admin": admin})
    try:
        key = new_key()
        assert log.append(make_checkpoint(key), 0).generation == 1
        assert log.latest(key).generation == 1
        assert admin.calls == [topic]
        assert isinstance(log.config, KafkaLogConfig) and log.config.partitions == 2
    finally:
        log.close()


def test_kafka_loser_record_in_the_log_is_never_returned(kafka_server, kafka_topic):
    """A racing loser's record really is in the partition after the winner's: readers must skip it."""
    from blobstate.plugins.kafka_log import open_kafka_log

    key = new_key()
    log = open_kafka_log(kafka_server.url(kafka_topic))
    try:
        winner = log.append(make_checkpoint(key, writer="winner"), 0)
        loser = make_checkpoint(key, writer="loser").with_generation(1)
        _kafka_write_raw(kafka_server.bootstrap, kafka_topic, key, 1, loser.to_bytes())
        stale = make_checkpoint(key, writer="stale").with_generation(1)
        log.append(make_checkpoint(key), 1)
        _kafka_write_raw(kafka_server.bootstrap, kafka_topic, key, 1, stale.to_bytes())
        fresh = open_kafka_log(kafka_server.url(kafka_topic))
        try:
            for reader in (log, fresh):
                assert [c.writer_id for c in reader.history(key)] == ["winner", "w"]
                assert reader.latest(key).generation == 2
            assert fresh.history(key)[0].checkpoint_id == winner.checkpoint_id
            removed = fresh.prune(key, 1)  # also tombstones the two rejected records
            assert [c.generation for c in removed] == [1]
            with pytest.raises(FencedError):
                fresh.append(make_checkpoint(key), 1)
        finally:
            fresh.close()
        assert [c.generation for c in log.history(key)] == [2]
    finally:
        log.close()


def _cp(key, generation, writer="w"):
    return make_checkpoint(key, writer=writer).with_generation(generation)


def test_acceptance_rule_is_the_same_before_and_after_compaction():
    """The pure fold of a partition: first record per generation wins, stale ones lose, tombstones delete, and
    dropping what compaction may drop (tombstoned records and the tombstones) changes no answer."""
    from blobstate.plugins.kafka_log import _PartitionView, record_key

    key = StoreKey("j", "t", "s")
    r = [(record_key(key, g, tok), _cp(key, g, tok).to_bytes()) for g, tok in
         [(1, "a"), (1, "b"), (2, "c"), (3, "d"), (2, "e"), (5, "f"), (4, "g")]]
    records = [*r, (r[0][0], None), (r[1][0], None), (r[4][0], None), (r[5][0], None)]

    def fold(recs):
        view = _PartitionView("t", 0)
        for offset, (k, v) in recs:
            view.apply(offset, k, v)
        st = view.state(key)
        return {g: st.accepted[g][1].writer_id for g in st.accepted}, st.last_generation, set(st.rejected)

    full = list(enumerate(records))
    accepted, last, rejected = fold(full)
    assert accepted == {2: "c", 3: "d", 4: "g"} and last == 4
    assert rejected == set()  # the losers (b, e, f) were tombstoned
    tombstoned = {k for k, v in records if v is None}
    compacted = [(o, (k, v)) for o, (k, v) in full if k not in tombstoned]
    assert fold(compacted)[:2] == (accepted, last)

    with pytest.raises(CorruptIndexError, match="offset 0"):
        view = _PartitionView("t", 0)
        view.apply(0, record_key(key, 1, "x"), b"{broken")
        view.state(key)
    view = _PartitionView("t", 0)
    view.apply(0, b"some-foreign-key", b"v")
    with pytest.raises(CorruptIndexError, match="not job/task/store"):
        view.state(key)
    view.apply(1, b"some-foreign-key", None)  # an operator's tombstone clears it
    assert view.state(key).accepted == {}


def test_kafka_url_parsing_keeps_credentials_out_of_sight():
    from blobstate.plugins.kafka_log import parse_kafka_url

    cfg = parse_kafka_url(f"kafka://me:{UNREACHABLE_SECRET}@h1:9092,h2:9093/cps?api_version=2.8&transactional=false"
                          "&timeout_ms=500", {"partitions": 4})
    assert cfg.bootstrap_servers == ("h1:9092", "h2:9093") and cfg.topic == "cps"
    assert cfg.api_version == (2, 8) and cfg.transactional is False and cfg.timeout_ms == 500
    assert cfg.partitions == 4 and cfg.client_options["sasl_plain_username"] == "me"
    assert UNREACHABLE_SECRET not in cfg.display_url and UNREACHABLE_SECRET not in repr(cfg)
    assert parse_kafka_url("kafka://h:1/t").api_version is None
    for bad in ("kafka://h:1/", "kafka:///t", "kafka://h:1/t?api_version=x", "kafka://h:1/t?transactional=maybe"):
        with pytest.raises(ConfigurationError):
            parse_kafka_url(bad)


def test_kafka_transactional_true_needs_a_new_broker(kafka_server, kafka_topic):
    from blobstate.plugins.kafka_log import open_kafka_log

    log = open_kafka_log(kafka_server.url(kafka_topic, transactional="true"))
    try:
        with pytest.raises(ConfigurationError, match="0.11"):
            log.latest(new_key())
    finally:
        log.close()


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
            _sql_write_malformed(log, key, 1, make_checkpoint(key).with_generation(1).to_bytes())
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
