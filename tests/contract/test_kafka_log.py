"""The Kafka checkpoint log against both brokers (Apache Kafka 0.9.0.1 and tansu 0.6.0): the CheckpointLog
conformance suite, the append path each broker must get (acceptance rule alone on 0.9, transactional producers on
tansu), topic handling, losers in the log; and the pure parts (acceptance rule, read target, URL options)."""

from __future__ import annotations

import uuid

import pytest
from kafka_brokers import fresh_topic, read_partition, transaction_markers
from kafka_server import free_port

from blobstate.errors import ConfigurationError, CorruptIndexError, FencedError
from blobstate.model.records import StoreKey
from blobstate.plugins.kafka import open_kafka_log
from blobstate.plugins.kafka.acceptance import (
    PartitionView,
    decide_after_read,
    decide_before_produce,
    read_target,
    record_key,
)
from blobstate.plugins.kafka.client import partition_for
from blobstate.plugins.kafka.config import KafkaLogConfig, parse_kafka_url
from blobstate.repository.backends import open_checkpoint_log
from blobstate.testing.checkpoint_logs import (
    UNREACHABLE_SECRET,
    CheckpointLogContract,
    make_checkpoint,
    new_key,
)

KAFKA_PARTITIONS = 3


@pytest.fixture(scope="module")
def kafka_topic(kafka_broker):
    topic = f"checkpoints-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, partitions=KAFKA_PARTITIONS)
    return topic


def write_raw(broker, topic, key, generation, payload, partitions=KAFKA_PARTITIONS):
    """Produce one record for ``key`` as another client would (no transaction, no acceptance rule)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(acks="all", enable_idempotence=False, **broker.client_kwargs())
    try:
        producer.send(topic, key=record_key(key, generation, uuid.uuid4().hex), value=payload,
                      partition=partition_for(key, partitions)).get(timeout=30)
    finally:
        producer.close()


@pytest.mark.usefixtures("kafka_broker", "kafka_topic")  # parametrized: one run of the suite per broker
class TestKafkaLog(CheckpointLogContract):
    def create_log(self):
        broker = self.request.getfixturevalue("kafka_broker")
        return open_kafka_log(broker.url(self.request.getfixturevalue("kafka_topic")))

    def write_raw_record(self, log, key, generation, payload):
        write_raw(self.request.getfixturevalue("kafka_broker"), self.request.getfixturevalue("kafka_topic"), key,
                  generation, payload)

    def create_unreachable_log(self):
        return open_kafka_log(f"kafka://user:{UNREACHABLE_SECRET}@127.0.0.1:{free_port()}/t?api_version=0.9"
                              "&timeout_ms=1000")

    def test_appends_take_the_path_the_broker_offers(self, kafka_broker):
        """0.9: the acceptance rule alone (no markers); tansu: one committed transaction (one marker) per append."""
        topic = fresh_topic(kafka_broker, "path")
        log = open_kafka_log(kafka_broker.url(topic))
        try:
            assert log.transactional is None  # nothing contacted yet
            self._append_n(log, new_key(), 3)
            assert log.transactional is kafka_broker.transactional
        finally:
            log.close()
        markers = transaction_markers(kafka_broker, topic)
        assert markers == (3 if kafka_broker.transactional else 0), markers


# -- against each broker: topics, losers, options ----------------------------------------------------------------
def test_kafka_missing_topic_is_a_configuration_error_even_where_tansu_would_create_it(kafka_broker):
    """Never a topic with the broker's defaults. tansu differs from Kafka here: it creates a missing topic (four
    partitions, not compacted) on any metadata request, even when the client asks it not to
    (``allow_auto_create_topics=False``), so where the broker has an admin API the log checks with it first."""
    log = open_kafka_log(kafka_broker.url(f"missing-{uuid.uuid4().hex[:8]}", timeout_ms="2000", topic_admin="none"))
    try:
        with pytest.raises(ConfigurationError, match="does not exist"):
            log.latest(new_key())
    finally:
        log.close()


def test_kafka_topic_admin_object_creates_the_topic_on_first_use(kafka_broker):
    class BrokerToolAdmin:  # a caller's TopicAdmin: here the broker's own tool (TopicCommand on 0.9)
        calls: list[str] = []

        def ensure_topic(self, topic, *, partitions, replication_factor):
            self.calls.append(topic)
            kafka_broker.create_topic(topic, partitions=partitions)

    admin = BrokerToolAdmin()
    topic = f"created-{uuid.uuid4().hex[:8]}"
    log = open_kafka_log(kafka_broker.url(topic, partitions="2"), storage_options={"topic_admin": admin})
    try:
        key = new_key()
        assert log.append(make_checkpoint(key), 0).generation == 1
        assert log.latest(key).generation == 1
        assert admin.calls == [topic]
        assert isinstance(log.config, KafkaLogConfig) and log.config.partitions == 2
    finally:
        log.close()


def test_kafka_topic_admin_auto_uses_the_admin_api_where_the_broker_has_one(kafka_broker):
    """tansu (API 3.9) gets the topic created, compacted, with the asked partitions; 0.9 has no admin API, so the
    topic must exist."""
    topic = f"auto-{uuid.uuid4().hex[:8]}"
    log = open_kafka_log(kafka_broker.url(topic, partitions="2", timeout_ms="3000"))
    try:
        key = new_key()
        if not kafka_broker.transactional:
            with pytest.raises(ConfigurationError, match="does not exist"):
                log.latest(key)
            return
        assert log.append(make_checkpoint(key), 0).generation == 1
        assert log.clients.partitions == 2
    finally:
        log.close()


def test_kafka_loser_record_in_the_log_is_never_returned(kafka_broker, kafka_topic):
    """A racing loser's record really is in the partition after the winner's: readers must skip it."""
    key = new_key()
    log = open_kafka_log(kafka_broker.url(kafka_topic))
    try:
        winner = log.append(make_checkpoint(key, writer="winner"), 0)
        loser = make_checkpoint(key, writer="loser").with_generation(1)
        write_raw(kafka_broker, kafka_topic, key, 1, loser.to_bytes())
        stale = make_checkpoint(key, writer="stale").with_generation(1)
        log.append(make_checkpoint(key), 1)
        write_raw(kafka_broker, kafka_topic, key, 1, stale.to_bytes())
        fresh = open_kafka_log(kafka_broker.url(kafka_topic))
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
        records, _ = read_partition(kafka_broker, kafka_topic, partition_for(key, KAFKA_PARTITIONS))
        tombstoned = {r.key for r in records if r.value is None and r.key.startswith(key.prefix.encode())}
        assert len(tombstoned) == 3  # generation 1 and the two losers
    finally:
        log.close()


def test_kafka_transactional_option_on_each_broker(kafka_broker, kafka_topic):
    """``transactional=true`` needs a broker >= 0.11; ``false`` takes the acceptance-rule path on any broker."""
    topic = fresh_topic(kafka_broker, "plain")
    forced = open_kafka_log(kafka_broker.url(kafka_topic, transactional="true"))
    plain = open_kafka_log(kafka_broker.url(topic, transactional="false"))
    try:
        key = new_key()
        if kafka_broker.transactional:
            forced.append(make_checkpoint(key), 0)
            assert forced.transactional is True
        else:
            with pytest.raises(ConfigurationError, match="0.11"):
                forced.latest(key)
        other = new_key()
        plain.append(make_checkpoint(other), 0)
        plain.append(make_checkpoint(other), 1)
        assert plain.transactional is False
        assert transaction_markers(kafka_broker, topic) == 0
    finally:
        forced.close()
        plain.close()


# -- pure parts --------------------------------------------------------------------------------------------------
def _cp(key, generation, writer="w"):
    return make_checkpoint(key, writer=writer).with_generation(generation)


def test_acceptance_rule_is_the_same_before_and_after_compaction():
    """The pure fold of a partition: first record per generation wins, stale ones lose, tombstones delete, and
    dropping what compaction may drop (tombstoned records and the tombstones) changes no answer."""
    key = StoreKey("j", "t", "s")
    r = [(record_key(key, g, tok), _cp(key, g, tok).to_bytes()) for g, tok in
         [(1, "a"), (1, "b"), (2, "c"), (3, "d"), (2, "e"), (5, "f"), (4, "g")]]
    records = [*r, (r[0][0], None), (r[1][0], None), (r[4][0], None), (r[5][0], None)]

    def fold(recs):
        view = PartitionView("t", 0)
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
        view = PartitionView("t", 0)
        view.apply(0, record_key(key, 1, "x"), b"{broken")
        view.state(key)
    view = PartitionView("t", 0)
    view.apply(0, b"some-foreign-key", b"v")
    with pytest.raises(CorruptIndexError, match="not job/task/store"):
        view.state(key)
    view.apply(1, b"some-foreign-key", None)  # an operator's tombstone clears it
    assert view.state(key).accepted == {}


def test_append_decisions_recognise_an_earlier_attempt_by_checkpoint_id():
    """Two attempts of one checkpoint have different record keys; whichever is accepted, the append is ours."""
    key = StoreKey("j", "t", "s")
    mine, rival = make_checkpoint(key, writer="me"), make_checkpoint(key, writer="rival")
    view = PartitionView("t", 0)
    assert decide_before_produce(view.state(key), mine.with_generation(1), 0) is None  # empty: go ahead
    view.apply(0, record_key(key, 1, "attempt-1"), mine.with_generation(1).to_bytes())
    view.apply(1, record_key(key, 1, "attempt-2"), mine.with_generation(1).to_bytes())  # late copy: rejected
    state = view.state(key)
    assert decide_before_produce(state, mine.with_generation(1), 0).checkpoint_id == mine.checkpoint_id
    assert decide_after_read(state, mine.with_generation(1), 0).checkpoint_id == mine.checkpoint_id
    with pytest.raises(FencedError):
        decide_before_produce(state, rival.with_generation(1), 0)
    with pytest.raises(FencedError, match="'me'"):
        decide_after_read(state, rival.with_generation(1), 0)
    assert decide_after_read(PartitionView("t", 0).state(key), mine.with_generation(1), 0) is None  # nothing landed
    view.apply(2, record_key(key, 2, "x"), rival.with_generation(2).to_bytes())
    view.apply(3, record_key(key, 1, "attempt-1"), None)  # generation 1 pruned
    with pytest.raises(FencedError, match="no longer retained"):
        decide_after_read(view.state(key), mine.with_generation(1), 0)


@pytest.mark.parametrize("committed, high_watermark, position, target", [
    (0, 0, 0, 0),  # empty partition
    (7, 7, 3, 7),  # no transactions: both ends agree
    (5, 9, 0, 5),  # Kafka: a transaction open at offset 5 holds read_committed there (last stable offset)
    (0, 9, 4, 9),  # tansu: 0 while any transaction is open, with records present: wait for the high watermark
    (2, 9, 4, 9),  # a committed end below what was read cannot be Kafka's: the high watermark again
])
def test_read_target_trusts_the_last_stable_offset_unless_it_is_tansus_zero(committed, high_watermark, position,
                                                                            target):
    assert read_target(committed, high_watermark, position) == target


def test_kafka_url_parsing_keeps_credentials_out_of_sight():
    cfg = parse_kafka_url(f"kafka://me:{UNREACHABLE_SECRET}@h1:9092,h2:9093/cps?api_version=2.8&transactional=false"
                          "&timeout_ms=500", {"partitions": 4})
    assert cfg.bootstrap_servers == ("h1:9092", "h2:9093") and cfg.topic == "cps"
    assert cfg.api_version == (2, 8) and cfg.transactional is False and cfg.timeout_ms == 500
    assert cfg.partitions == 4 and cfg.client_options["sasl_plain_username"] == "me"
    assert UNREACHABLE_SECRET not in cfg.display_url and UNREACHABLE_SECRET not in repr(cfg)
    assert cfg.secrets == [UNREACHABLE_SECRET]
    assert parse_kafka_url("kafka://h:1/t").api_version is None
    for bad in ("kafka://h:1/", "kafka:///t", "kafka://h:1/t?api_version=x", "kafka://h:1/t?transactional=maybe",
                "kafka://h:1/t?timeout_ms=0", "kafka://h:1/t?partitions=two"):
        with pytest.raises(ConfigurationError):
            parse_kafka_url(bad)


def test_kafka_topic_admin_naming_code_is_refused_and_nothing_is_imported(tmp_path, monkeypatch):
    """Issue 14: ``?topic_admin=mod:fn`` used to import ``mod`` and call ``fn``. No URL option imports code now;
    a ``TopicAdmin`` object still comes through the Python API's storage_options."""
    marker = tmp_path / "imported"
    (tmp_path / "evil_admin.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef make(config):\n    return None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for url, options in [("kafka://127.0.0.1:9/t?topic_admin=evil_admin:make", None),
                         ("kafka://127.0.0.1:9/t?topic_admin=evil_admin.make", None),
                         ("kafka://127.0.0.1:9/t", {"topic_admin": "evil_admin:make"}),
                         ("kafka://127.0.0.1:9/t", {"topic_admin": 42})]:
        with pytest.raises(ConfigurationError, match="topic_admin"):
            open_kafka_log(url, storage_options=options)
        with pytest.raises(ConfigurationError, match="topic_admin"):
            open_checkpoint_log(url, storage_options=options)
    assert not marker.exists()

    class Admin:
        def ensure_topic(self, topic, *, partitions, replication_factor):
            return None

    admin = Admin()
    assert parse_kafka_url("kafka://h:1/t", {"topic_admin": admin}).topic_admin is admin
    assert parse_kafka_url("kafka://h:1/t?topic_admin=NONE").topic_admin == "none"


def test_kafka_missing_kafka_python_is_reported_with_the_install_hint(monkeypatch):
    """kafka-python is imported where the factory lives, so a missing extra fails at resolution, the one way."""
    import sys

    from blobstate.errors import MissingDependencyError

    for name in [m for m in sys.modules if m == "kafka" or m.startswith(("kafka.", "blobstate.plugins.kafka"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "kafka", None)  # import kafka -> ImportError
    with pytest.raises(MissingDependencyError, match=r"kafka.*pip install -e \"\S+\[kafka\]\""):
        open_checkpoint_log("kafka://127.0.0.1:9/t")
