"""Faults where they happen, on both Kafka brokers (0.9.0.1 and tansu 0.6.0), each reached only through a
``KafkaProxy`` (``tests/support/kafka_proxy.py``) that loses the broker's answers on purpose:

- an append whose answer is lost after the broker applied it raises ``AppendOutcomeUnknown`` (never a plain
  failure), and re-appending the same checkpoint (what the core does to resolve it) answers for certain: the
  record is ours, or, when a rival's record was accepted first, ``FencedError``;
- on tansu, a commit whose answer is lost is resolved inside ``append`` by reading the topic;
- a zombie ``blobstate backup`` (SIGSTOP while its produce request is in flight) resumes after a newer writer
  initialised the same transactional id: exit code 4; on tansu the broker itself refuses the zombie's record.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid

import pytest
from fixtures_core import run_cli, write_keys
from kafka_brokers import fresh_topic, read_partition
from kafka_proxy import END_TXN, INIT_PRODUCER_ID, PRODUCE
from log_cycles import start_backup

from blobstate.errors import EXIT_FENCED, AppendOutcomeUnknown, FencedError
from blobstate.model.records import Checkpoint
from blobstate.plugins.kafka import open_kafka_log
from blobstate.testing.checkpoint_logs import make_checkpoint, new_key

TIMEOUT_MS = "2500"  # how long an append waits for an answer the proxy will never pass on


@pytest.fixture
def topic(proxied_kafka_broker):
    broker, proxy = proxied_kafka_broker
    yield fresh_topic(broker, "faults")
    proxy.disarm()


def generation_records(broker, topic, key, generation, isolation_level="read_uncommitted"):
    """The distinct record keys of ``key``'s ``generation`` in the (one-partition) topic, as a raw reader sees
    them: one per produce attempt that reached the log (0.9 knows no isolation levels: it reads everything)."""
    records, _ = read_partition(broker, topic, 0,
                                isolation_level=isolation_level if broker.transactional else "read_uncommitted")
    prefix = f"{key.prefix}/{generation:020d}/".encode()
    return {r.key for r in records if r.key.startswith(prefix) and r.value is not None}


class BackgroundAppend:
    """``log.append(checkpoint, expected)`` on a thread; ``outcome()`` is its record or exception once done."""

    def __init__(self, log, checkpoint, expected):
        self._result: list[object] = []
        self._thread = threading.Thread(target=self._run, args=(log, checkpoint, expected))
        self._thread.start()

    def _run(self, log, checkpoint, expected):
        try:
            self._result.append(log.append(checkpoint, expected))
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self._result.append(exc)

    def outcome(self, timeout_s=60):
        self._thread.join(timeout_s)
        assert len(self._result) == 1, "the append did not finish"
        return self._result[0]


def held_append(proxy, api_key, log, checkpoint, expected):
    """Start ``log.append(checkpoint, expected)`` with its next ``api_key`` request held by the proxy; returns the
    gate (request held) and the running append."""
    gate = proxy.hold_next(api_key)
    append = BackgroundAppend(log, checkpoint, expected)
    assert gate.wait_held(30), "the append never sent the request"
    return gate, append


def writer_and_rival(broker, topic):
    """Two logs on ``topic`` (the first one waits ``TIMEOUT_MS`` for answers) and a store key at generation 1."""
    log = open_kafka_log(broker.url(topic, timeout_ms=TIMEOUT_MS))
    rival = open_kafka_log(broker.url(topic))
    key = new_key()
    log.append(make_checkpoint(key), 0)
    return log, rival, key


@pytest.mark.parametrize("loss", ["cut", "swallow"])
def test_kafka_lost_produce_answer_is_unknown_until_a_reappend_finds_it(proxied_kafka_broker, topic, loss):
    """The broker applies the produce; its answer is lost (connection broken, or never sent: the client times
    out). tansu differs from Kafka in how the re-append finds it: its init_transactions commits the abandoned
    transaction (Kafka would abort it, and the re-append would produce again); either way the answer is "ours"."""
    broker, proxy = proxied_kafka_broker
    log, reader, key = writer_and_rival(broker, topic)
    try:
        mine = make_checkpoint(key, writer="me")
        getattr(proxy, loss)(PRODUCE)
        with pytest.raises(AppendOutcomeUnknown) as info:
            log.append(mine, 1)
        assert info.value.checkpoint_id == mine.checkpoint_id
        assert not isinstance(info.value, FencedError)
        proxy.disarm()
        assert len(generation_records(broker, topic, key, 2)) == 1  # the broker applied it

        again = log.append(mine, 1)  # how the core resolves an unknown outcome
        assert again.checkpoint_id == mine.checkpoint_id and again.generation == 2
        assert len(generation_records(broker, topic, key, 2)) == 1  # found, not produced a second time
        assert [c.writer_id for c in reader.history(key)] == ["w", "me"]
    finally:
        log.close()
        reader.close()


def test_kafka_rival_accepted_first_resolves_an_unknown_append_to_fenced(proxied_kafka_broker, topic):
    """Our produce is held while a rival appends the same generation, then forwarded with its answer lost.
    On 0.9 the broker appends it after the rival's (the acceptance rule rejects it); on tansu the broker refuses
    it (the rival's init_transactions fenced our producer epoch)."""
    broker, proxy = proxied_kafka_broker
    log, rival, key = writer_and_rival(broker, topic)
    try:
        mine = make_checkpoint(key, writer="me")
        gate, append = held_append(proxy, PRODUCE, log, mine, 1)
        winner = rival.append(make_checkpoint(key, writer="rival"), 1)
        proxy.cut(PRODUCE)
        gate.release()
        assert isinstance(append.outcome(), AppendOutcomeUnknown)
        proxy.disarm()

        with pytest.raises(FencedError):
            log.append(mine, 1)
        assert [c.writer_id for c in rival.history(key)] == ["w", "rival"]
        assert log.latest(key).checkpoint_id == winner.checkpoint_id
        landed = generation_records(broker, topic, key, 2)
        assert len(landed) == (1 if broker.transactional else 2), landed  # tansu: fenced by the broker
    finally:
        log.close()
        rival.close()


def test_kafka_lost_commit_answer_is_resolved_by_reading_the_topic(proxied_kafka_broker, topic):
    """Transactional path only: the coordinator commits, the answer to EndTxn is lost; ``append`` reads the
    partition past its record (the commit marker moved the committed end) and answers "ours" at once."""
    broker, proxy = proxied_kafka_broker
    if not broker.transactional:
        pytest.skip("Kafka 0.9 has no transactions: no EndTxn to lose (see the produce tests)")
    log = open_kafka_log(broker.url(topic, timeout_ms=TIMEOUT_MS))
    try:
        key = new_key()
        log.append(make_checkpoint(key), 0)
        commits = proxy.seen[END_TXN]
        proxy.cut(END_TXN)
        mine = make_checkpoint(key, writer="me")
        record = log.append(mine, 1)
        assert isinstance(record, Checkpoint) and record.checkpoint_id == mine.checkpoint_id
        assert proxy.seen[END_TXN] > commits  # the commit was sent, its answer lost
        proxy.disarm()
        assert generation_records(broker, topic, key, 2, "read_committed")
    finally:
        log.close()


def test_kafka_zombie_backup_is_fenced_by_the_broker(proxied_kafka_broker, topic, tmp_path):
    """A ``blobstate backup`` is stopped (SIGSTOP) with its produce request in flight; a newer writer of the same
    store runs its own backup (its producer initialises the same transactional id); the zombie resumes and exits
    4. On tansu the broker refuses the zombie's record (producer epoch): read_committed holds only the new
    writer's. On 0.9 (no transactions) the zombie's record lands after the winner's and the acceptance rule
    rejects it."""
    broker, proxy = proxied_kafka_broker
    url = broker.url(topic, timeout_ms="30000")
    job = f"zombie{uuid.uuid4().hex[:8]}"
    key_opts = ["--repo", tmp_path / "repo", "--log", url, "--job", job, "--store", "s"]
    stores = {name: tmp_path / name / "s" for name in ("zombie", "new")}
    for seed, path in enumerate(stores.values(), start=1):
        write_keys(path, n=100, seed=seed)
    inits = proxy.seen[INIT_PRODUCER_ID]

    paused: list[int] = []
    gate = proxy.hold_next(PRODUCE, on_hold=lambda: (os.kill(paused[0], signal.SIGSTOP), paused.append(-1)))
    zombie = start_backup(stores["zombie"], key_opts, tmp_path / "host-zombie", 0)
    paused.append(zombie.pid)
    try:
        assert gate.wait_held(120), "the zombie never produced"
        new = run_cli("backup", stores["new"], *key_opts, "--expected-generation", "0", "-q",
                      work_base=tmp_path / "host-new")
        assert new.returncode == 0, new.stderr[-3000:]
        winner_id = new.stdout.strip()
    finally:
        gate.release()
        os.kill(zombie.pid, signal.SIGCONT)
    code = zombie.wait(timeout=120)
    err = zombie.communicate()[1]
    assert code == EXIT_FENCED, err[-3000:]
    assert "fenced" in err.lower()

    log = open_kafka_log(broker.url(topic))
    try:
        (key,) = [k for k in log.keys() if k.job == job]
        assert [c.checkpoint_id for c in log.history(key)] == [winner_id]
    finally:
        log.close()
    committed = generation_records(broker, topic, key, 1, "read_committed")
    if broker.transactional:
        assert proxy.seen[INIT_PRODUCER_ID] >= inits + 2  # both writers initialised the transactional id
        assert "the broker fenced this producer" in err  # it refused the zombie's epoch
        assert len(committed) == 1, committed
    else:
        assert len(committed) == 2, committed  # the zombie's record is there, rejected by the rule


def test_kafka_writer_fenced_mid_transaction_learns_from_the_topic_that_tansu_committed_it(proxied_kafka_broker, topic):
    """Writer A's record is in its open transaction, its commit held back, when writer B's producer initialises
    the same transactional id. tansu differs from Kafka twice here: it commits A's open transaction (Kafka aborts
    it, and B would win), and it never answers A's EndTxn (it closes the connection; kafka-python would retry
    forever). A learns its outcome from the topic, at once: its record holds the generation, and B is fenced."""
    broker, proxy = proxied_kafka_broker
    if not broker.transactional:
        pytest.skip("Kafka 0.9 has no transactions (the rival and zombie tests cover its path)")
    log_a, log_b, key = writer_and_rival(broker, topic)
    try:
        mine = make_checkpoint(key, writer="a")
        gate, append = held_append(proxy, END_TXN, log_a, mine, 1)
        with pytest.raises(FencedError):
            log_b.append(make_checkpoint(key, writer="b"), 1)
        gate.release()
        record = append.outcome()
        assert isinstance(record, Checkpoint) and record.checkpoint_id == mine.checkpoint_id, record
        assert log_b.latest(key).writer_id == "a"
    finally:
        log_a.close()
        log_b.close()


def test_kafka_open_transaction_on_tansu_holds_readers_until_the_stores_next_writer(proxied_kafka_broker, topic):
    """A writer stopped mid-append leaves its transaction open. tansu differs from Kafka: it answers 0 for the
    read_committed end while any transaction is open, and never times a transaction out
    (``transaction.timeout.ms``), so readers wait (and fail after ``timeout_ms`` with a clear error) until the
    store's next writer initialises the transactional id, which, on tansu, commits the stopped writer's record."""
    from kafka import KafkaProducer

    from blobstate.errors import StorageError
    from blobstate.plugins.kafka.acceptance import record_key

    broker, _ = proxied_kafka_broker
    if not broker.transactional:
        pytest.skip("Kafka 0.9 has no transactions: nothing can hold its readers back")
    key = new_key()
    stopped = KafkaProducer(transactional_id=f"blobstate-{key.prefix}", **broker.client_kwargs())
    try:
        stopped.init_transactions()
        stopped.begin_transaction()
        landed = make_checkpoint(key, writer="stopped").with_generation(1)
        stopped.send(topic, key=record_key(key, 1, "stopped"), value=landed.to_bytes(), partition=0).get(10)
        log = open_kafka_log(broker.url(topic, timeout_ms="1500"))
        try:
            with pytest.raises(StorageError, match="open transaction"):
                log.latest(key)
            with pytest.raises(FencedError):  # the next writer's init committed the stopped writer's record
                log.append(make_checkpoint(key, writer="next"), 0)
            assert log.latest(key).writer_id == "stopped"
        finally:
            log.close()
    finally:
        stopped.close(timeout=0)
