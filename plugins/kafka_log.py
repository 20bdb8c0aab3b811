"""The Kafka checkpoint log (``kafka://HOST:PORT[,HOST:PORT...]/TOPIC?option=value``), on kafka-python.

Layout. One compacted topic holds the checkpoints of many stores. A store's records all go to the partition
chosen by its store key (``job/task/store``) with Kafka's default partitioner (murmur2 of the key, so Java
clients agree), which keeps them in one total order. A record's key is
``job/task/store/<generation, 20 digits>/<token>`` (``token``: a fresh UUID per append) and its value is
``Checkpoint.to_bytes()``, the checkpoint with its generation. Because every record key is unique, compaction
never drops a record by itself: ``prune`` deletes the generations it retires with tombstones (null values), so
``history`` is exactly the retained generations. ``latest`` reads the key's partition to its end (the high
watermark); each log instance keeps what it has read and only reads new records afterwards.

The acceptance rule (fencing without broker support). A 0.9 broker has neither idempotence nor transactions,
so "read, check the expected generation, append" alone lets two writers that read the same state both append
generation ``g``. The log order decides instead, and every reader applies the same rule to it:

    Per store key, records are taken in partition order. The first record seen (after compaction) is accepted;
    after that a record of generation ``g`` is accepted only if ``g`` is exactly one more than the last accepted
    generation. Every other record (a second record for ``g``, a stale generation written by a zombie after a
    newer one, a gap) is rejected, permanently: acceptance depends only on the records before it.

``append`` therefore (1) reads to the end and raises ``FencedError`` unless the latest accepted generation is
the expected one, (2) produces its record with ``acks=all`` and (3) reads the partition back past its record's
offset: the append succeeded only if its own record is the accepted one for ``g``; otherwise it raises
``FencedError``. Readers never return a rejected record, so ``latest()`` never returns a loser. ``prune`` also
tombstones rejected records. Tombstones only ever remove records that precede the oldest retained generation
or were rejected, so the rule gives the same answer before and after compaction.

Transactions (modern brokers). Where the broker supports idempotence and transactions (>= 0.11) and
``transactional`` is ``auto`` (default) or ``true``, each store key gets a transactional producer whose
transactional id is derived from the store key (``blobstate-job/task/store``): ``init_transactions`` fences any
older producer of the same store (a zombie's next commit fails with ``ProducerFencedError`` ->
``FencedError``), and readers use ``isolation_level=read_committed``. The acceptance rule still applies on top.

Options (URL query or ``storage_options``; ``storage_options`` win): ``api_version`` (``0.9``, ``2.8``...;
``auto`` probes the broker), ``transactional`` (``auto``/``true``/``false``), ``timeout_ms`` (every blocking call,
default 10000), ``partitions`` and ``replication_factor`` (topic creation), ``topic_admin`` (``auto``: the admin
API where the broker has it (>= 0.10.1), else the topic must exist; ``none``; or a ``TopicAdmin`` object or a
dotted path to a factory ``(config) -> TopicAdmin``), and any kafka-python client setting (``security_protocol``,
``sasl_mechanism``, ``ssl_cafile``...). ``kafka://user:password@host/topic`` sets the SASL PLAIN credentials;
the password never appears in ``url``, logs or errors.

Broker versions: the tests run against Apache Kafka 0.9.0.1 (the only broker installable on the test machines);
the transactional path follows kafka-python's documented API and is untested here. The topic's
``cleanup.policy`` must be ``compact`` (never ``delete``: time retention would drop checkpoints).
Limitation on brokers without transactions: if a produce call fails ambiguously (timeout), the record may still
land later; ``append`` then raises ``StorageError`` and the core's recovery compares with ``latest()``.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit

from blobstate.errors import (
    ConfigurationError,
    CorruptIndexError,
    FencedError,
    MissingDependencyError,
    StorageError,
)
from blobstate.interfaces import CheckpointLog
from blobstate.model import Checkpoint, StoreKey
from blobstate.specs import resolve_factory

GENERATION_DIGITS = 20
DEFAULT_TIMEOUT_MS = 10_000
INSTALL_HINT = "pip install 'blobstate[kafka]'"
TRANSACTIONS_SINCE = (0, 11)
ADMIN_API_SINCE = (0, 10, 1)
_OWN_OPTIONS = {"api_version", "transactional", "timeout_ms", "partitions", "replication_factor", "topic_admin"}


# -- configuration ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class KafkaLogConfig:
    """A parsed ``kafka://`` URL plus options.

    ``api_version`` None means "probe the broker"; ``transactional`` None means "where the broker supports it";
    ``client_options`` are passed to every kafka-python client (credentials included, never printed).
    """

    bootstrap_servers: tuple[str, ...]
    topic: str
    api_version: tuple[int, ...] | None = None
    transactional: bool | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    partitions: int = 1
    replication_factor: int = 1
    topic_admin: Any = "auto"
    client_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def display_url(self) -> str:
        """The URL without credentials."""
        return f"kafka://{','.join(self.bootstrap_servers)}/{self.topic}"


def parse_api_version(value: Any) -> tuple[int, ...] | None:
    """``"0.9"`` -> ``(0, 9)``; ``None``/``"auto"`` -> None (probe). Raises ``ConfigurationError``."""
    if value is None or value == "auto" or value == "":
        return None
    if isinstance(value, (tuple, list)):
        return tuple(int(v) for v in value)
    try:
        return tuple(int(p) for p in str(value).split("."))
    except ValueError:
        raise ConfigurationError(f"kafka api_version must look like 0.9 or 2.8, got {value!r}") from None


def _parse_bool(name: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    text = str(value).lower()
    if text == "auto":
        return None
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"kafka option {name} must be auto, true or false, got {value!r}")


def parse_kafka_url(url: str, storage_options: dict[str, Any] | None = None) -> KafkaLogConfig:
    """Parse ``kafka://[user:password@]host:port[,host:port]/topic?opt=value``; raises ``ConfigurationError``."""
    parts = urlsplit(url)
    if parts.scheme.lower() != "kafka":
        raise ConfigurationError(f"not a kafka:// URL: {parts.scheme}://...")
    netloc = parts.netloc
    userinfo, _, hosts = netloc.rpartition("@")
    servers = tuple(h for h in hosts.split(",") if h)
    topic = unquote(parts.path.lstrip("/"))
    if not servers or not topic or "/" in topic:
        raise ConfigurationError("a Kafka checkpoint log URL is kafka://HOST:PORT[,HOST:PORT]/TOPIC")
    opts: dict[str, Any] = dict(parse_qsl(parts.query))
    opts.update(storage_options or {})
    client = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
    if userinfo:
        user, _, password = userinfo.partition(":")
        client.setdefault("sasl_plain_username", unquote(user))
        client.setdefault("sasl_plain_password", unquote(password))
        client.setdefault("sasl_mechanism", "PLAIN")
        client.setdefault("security_protocol", "SASL_PLAINTEXT")
    try:
        timeout_ms = int(opts.get("timeout_ms", DEFAULT_TIMEOUT_MS))
        partitions = int(opts.get("partitions", 1))
        replication = int(opts.get("replication_factor", 1))
    except ValueError as exc:
        raise ConfigurationError(f"bad numeric kafka option: {exc}") from None
    return KafkaLogConfig(
        bootstrap_servers=servers, topic=topic, api_version=parse_api_version(opts.get("api_version")),
        transactional=_parse_bool("transactional", opts.get("transactional")), timeout_ms=timeout_ms,
        partitions=partitions, replication_factor=replication, topic_admin=opts.get("topic_admin", "auto"),
        client_options=client,
    )


# -- topic creation ----------------------------------------------------------------------------------------------
class TopicAdmin(Protocol):
    """Creates the checkpoint topic when it is missing (compacted). Implementations must be idempotent."""

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None: ...


class AdminClientTopics:
    """``TopicAdmin`` on kafka-python's ``KafkaAdminClient`` (brokers >= 0.10.1): creates a compacted topic."""

    def __init__(self, config: KafkaLogConfig, api_version: tuple[int, ...] | None) -> None:
        self.config = config
        self.api_version = api_version

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        admin = KafkaAdminClient(bootstrap_servers=list(self.config.bootstrap_servers),
                                 api_version=self.api_version, request_timeout_ms=self.config.timeout_ms,
                                 **self.config.client_options)
        try:
            if topic in set(admin.list_topics()):
                return
            new = NewTopic(name=topic, num_partitions=partitions, replication_factor=replication_factor,
                           topic_configs={"cleanup.policy": "compact"})
            try:
                admin.create_topics([new], timeout_ms=self.config.timeout_ms)
            except TopicAlreadyExistsError:
                pass  # created by a concurrent writer
        finally:
            admin.close()


class ExistingTopicOnly:
    """``TopicAdmin`` for brokers without an admin API: the topic must exist; nothing is created."""

    def ensure_topic(self, topic: str, *, partitions: int, replication_factor: int) -> None:
        return None


def make_topic_admin(config: KafkaLogConfig, api_version: tuple[int, ...] | None) -> TopicAdmin:
    """The ``TopicAdmin`` the ``topic_admin`` option asks for (see the module docstring)."""
    choice = config.topic_admin
    if choice in (None, "none"):
        return ExistingTopicOnly()
    if choice == "auto":
        if api_version is not None and api_version >= ADMIN_API_SINCE:
            return AdminClientTopics(config, api_version)
        return ExistingTopicOnly()
    if isinstance(choice, str):
        return resolve_factory(choice, what="kafka topic_admin")(config)
    if hasattr(choice, "ensure_topic"):
        return choice
    raise ConfigurationError(f"kafka topic_admin must be auto, none, a dotted path or a TopicAdmin: {choice!r}")


# -- the partition view: the acceptance rule -----------------------------------------------------------------------
def record_key(key: StoreKey, generation: int, token: str) -> bytes:
    return f"{key.prefix}/{generation:0{GENERATION_DIGITS}d}/{token}".encode()


def partition_for(key: StoreKey, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, positive) on the store key: the partition all its records go to."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key.prefix.encode()) & 0x7FFFFFFF) % partitions


@dataclass
class _KeyState:
    """What one partition's records say about one store key."""

    accepted: dict[int, tuple[bytes, Checkpoint]] = field(default_factory=dict)  # generation -> (record key, cp)
    last_generation: int = 0  # highest accepted generation ever (survives tombstones)
    rejected: set[bytes] = field(default_factory=set)
    corrupt: dict[bytes, str] = field(default_factory=dict)  # record key -> what is wrong


@dataclass
class _PartitionView:
    """The folded state of one partition up to ``next_offset`` (exclusive)."""

    topic: str
    partition: int
    next_offset: int = 0
    keys: dict[StoreKey, _KeyState] = field(default_factory=dict)
    foreign: dict[bytes, str] = field(default_factory=dict)  # records whose key is not a blobstate record key

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Fold one record (``value`` None: a tombstone) into the view."""
        where = f"kafka topic {self.topic} partition {self.partition} offset {offset}"
        rkey = key or b""
        parsed = _parse_record_key(rkey)
        if parsed is None:
            if value is None:
                self.foreign.pop(rkey, None)
            else:
                self.foreign[rkey] = f"{where}: record key {rkey[:80]!r} is not job/task/store/generation/token"
            return
        store_key, generation = parsed
        state = self.keys.setdefault(store_key, _KeyState())
        if value is None:  # tombstone: the record is deleted
            state.corrupt.pop(rkey, None)
            state.rejected.discard(rkey)
            held = state.accepted.get(generation)
            if held is not None and held[0] == rkey:
                del state.accepted[generation]
            return
        try:
            cp = Checkpoint.from_bytes(value, source=where)
            if cp.store_key != store_key or cp.generation != generation:
                raise CorruptIndexError(f"corrupt checkpoint record {where}: holds generation {cp.generation} of "
                                        f"{cp.store_key} under record key {rkey.decode()}")
        except CorruptIndexError as exc:
            state.corrupt[rkey] = str(exc)
            return
        held = state.accepted.get(generation)
        if held is not None and held[0] == rkey:
            return  # a producer retry duplicated the accepted record
        if state.last_generation == 0 or generation == state.last_generation + 1:
            state.accepted[generation] = (rkey, cp)
            state.last_generation = generation
        else:
            state.rejected.add(rkey)

    def state(self, key: StoreKey) -> _KeyState:
        """The key's state; raises ``CorruptIndexError`` when a malformed record sits in its way."""
        if self.foreign:
            raise CorruptIndexError(next(iter(self.foreign.values())))
        state = self.keys.get(key, _KeyState())
        if state.corrupt:
            raise CorruptIndexError(next(iter(state.corrupt.values())))
        return state


def _parse_record_key(rkey: bytes) -> tuple[StoreKey, int] | None:
    try:
        job, task, store, gen, token = rkey.decode().split("/")
        if len(gen) != GENERATION_DIGITS or not gen.isdigit() or not token:
            return None
        return StoreKey(job, task, store), int(gen)
    except (ValueError, UnicodeDecodeError, ConfigurationError):
        return None


# -- the log -----------------------------------------------------------------------------------------------------------
class KafkaCheckpointLog(CheckpointLog):
    """``CheckpointLog`` on a compacted Kafka topic; fencing by the acceptance rule (+ transactions if available).

    Thread-safe (one lock per instance). Every Kafka failure surfaces as ``StorageError`` naming the topic,
    never the credentials; a malformed record as ``CorruptIndexError``; a lost race as ``FencedError``.
    """

    def __init__(self, config: KafkaLogConfig) -> None:
        self.config = config
        self.url = config.display_url
        self._lock = threading.RLock()
        self._meta_producer: Any = None
        self._producers: dict[StoreKey, Any] = {}
        self._consumer: Any = None
        self._partitions: int | None = None
        self._api_version: tuple[int, ...] | None = config.api_version
        self._transactional: bool = False
        self._views: dict[int, _PartitionView] = {}
        self._secrets = [str(v) for k, v in config.client_options.items()
                         if v and any(s in k for s in ("password", "secret", "token"))]

    # -- plumbing --------------------------------------------------------------------------------------------
    @contextmanager
    def _kafka_errors(self, what: str) -> Iterator[None]:
        """Turn kafka-python's exceptions into ``StorageError`` with credentials scrubbed."""
        from kafka.errors import KafkaError

        try:
            yield
        except (KafkaError, OSError) as exc:
            text = str(exc) if str(exc).startswith(type(exc).__name__) else f"{type(exc).__name__}: {exc}"
            for secret in self._secrets:
                text = text.replace(secret, "***")
            raise StorageError(f"{what} on {self.url} failed: {text}") from None

    def _client_kwargs(self) -> dict[str, Any]:
        return {"bootstrap_servers": list(self.config.bootstrap_servers), "api_version": self._api_version,
                **self.config.client_options}

    def _connect(self) -> None:
        """Create the metadata producer, learn the broker version, ensure the topic, count its partitions."""
        if self._partitions is not None:
            return
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        with self._kafka_errors("connecting"):
            if self._meta_producer is None:
                kwargs = self._client_kwargs()
                for probe_timeout in ("bootstrap_timeout_ms", "api_version_auto_timeout_ms"):  # 3.x / 2.x
                    if probe_timeout in KafkaProducer.DEFAULT_CONFIG:
                        kwargs.setdefault(probe_timeout, self.config.timeout_ms)
                self._meta_producer = KafkaProducer(
                    enable_idempotence=False, acks="all", max_block_ms=self.config.timeout_ms,
                    request_timeout_ms=self.config.timeout_ms, **kwargs)
                self._api_version = tuple(self._meta_producer.config["api_version"])
            supported = self._api_version >= TRANSACTIONS_SINCE
            if self.config.transactional and not supported:
                raise ConfigurationError(f"kafka transactional=true needs a broker >= 0.11; {self.url} speaks "
                                         f"{'.'.join(map(str, self._api_version))}")
            self._transactional = supported if self.config.transactional is None else self.config.transactional
            admin = make_topic_admin(self.config, self._api_version)
            admin.ensure_topic(self.config.topic, partitions=self.config.partitions,
                               replication_factor=self.config.replication_factor)
            try:
                partitions = self._meta_producer.partitions_for(self.config.topic)
            except KafkaTimeoutError:
                metadata = getattr(self._meta_producer, "_metadata", None)
                if metadata is not None and metadata.brokers():
                    raise ConfigurationError(
                        f"the Kafka checkpoint topic {self.config.topic!r} does not exist on {self.url}; create it "
                        "compacted (cleanup.policy=compact), e.g. kafka-topics.sh --create --topic "
                        f"{self.config.topic} --partitions 1 --config cleanup.policy=compact") from None
                raise
            self._partitions = len(partitions)

    def _consumer_for(self) -> Any:
        if self._consumer is None:
            from kafka import KafkaConsumer

            self._consumer = KafkaConsumer(
                group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                isolation_level="read_committed" if self._transactional else "read_uncommitted",
                request_timeout_ms=max(self.config.timeout_ms, 1000), **self._client_kwargs())
        return self._consumer

    def _refresh(self, partition: int, *, past_offset: int = -1) -> _PartitionView:
        """Read ``partition`` from where this instance stopped to its end (and past ``past_offset``)."""
        from kafka import TopicPartition

        view = self._views.setdefault(partition, _PartitionView(self.config.topic, partition))
        tp = TopicPartition(self.config.topic, partition)
        consumer = self._consumer_for()
        deadline = time.monotonic() + self.config.timeout_ms / 1000
        with self._kafka_errors(f"reading partition {partition}"):
            if consumer.assignment() != {tp}:
                consumer.assign([tp])
            end = consumer.end_offsets([tp], timeout_ms=self.config.timeout_ms)[tp]
            target = max(end, past_offset + 1)
            consumer.seek(tp, view.next_offset)
            while view.next_offset < target:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    raise StorageError(f"reading partition {partition} of {self.url} to offset {target} timed "
                                       f"out at offset {view.next_offset}")
                batches = consumer.poll(timeout_ms=min(remaining_ms, 1000), max_records=10_000)
                for record in batches.get(tp, []):
                    if record.offset >= view.next_offset:
                        view.apply(record.offset, record.key, record.value)
                        view.next_offset = record.offset + 1
                view.next_offset = max(view.next_offset, consumer.position(tp, timeout_ms=self.config.timeout_ms))
        return view

    def _view_for(self, key: StoreKey) -> tuple[int, _PartitionView]:
        self._connect()
        assert self._partitions is not None
        partition = partition_for(key, self._partitions)
        return partition, self._refresh(partition)

    def _producer_for(self, key: StoreKey) -> Any:
        """The producer appends for ``key`` go through: transactional (id from the store key) or the shared one."""
        if not self._transactional:
            return self._meta_producer
        producer = self._producers.get(key)
        if producer is None:
            from kafka import KafkaProducer

            producer = KafkaProducer(transactional_id=f"blobstate-{key.prefix}", enable_idempotence=True,
                                     acks="all", max_block_ms=self.config.timeout_ms, **self._client_kwargs())
            producer.init_transactions()  # bumps the epoch: fences every older producer of this store
            self._producers[key] = producer
        return producer

    def _send(self, key: StoreKey, records: list[tuple[bytes, bytes | None]], partition: int) -> int:
        """Produce ``records`` (record key, value or None) to ``partition``; return the last offset."""
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError

        producer = self._producer_for(key)
        timeout_s = self.config.timeout_ms / 1000
        try:
            if self._transactional:
                producer.begin_transaction()
            futures = [producer.send(self.config.topic, key=k, value=v, partition=partition) for k, v in records]
            offsets = [f.get(timeout=timeout_s).offset for f in futures]
            if self._transactional:
                producer.commit_transaction()
            return offsets[-1]
        except (ProducerFencedError, InvalidProducerEpochError) as exc:
            self._drop_producer(key)
            raise FencedError(f"fenced: a newer producer of {key} took over ({type(exc).__name__})") from None
        except Exception:
            if self._transactional:
                self._drop_producer(key)  # aborts by closing: the records never become visible
            raise

    def _drop_producer(self, key: StoreKey) -> None:
        producer = self._producers.pop(key, None)
        if producer is not None:
            try:
                producer.close(timeout=1)
            except Exception:  # noqa: BLE001 - closing a fenced producer may fail; it is gone anyway
                pass

    # -- the contract ------------------------------------------------------------------------------------------
    def latest(self, key: StoreKey) -> Checkpoint | None:
        with self._lock:
            _, view = self._view_for(key)
            state = view.state(key)
            return state.accepted[max(state.accepted)][1] if state.accepted else None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        with self._lock:
            _, view = self._view_for(key)
            state = view.state(key)
            return [state.accepted[g][1] for g in sorted(state.accepted)]

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        key = checkpoint.store_key
        with self._lock:
            partition, view = self._view_for(key)
            current = view.state(key).last_generation
            if current != expected_generation:
                raise FencedError(f"fenced: {key} is at generation {current}, this writer expected "
                                  f"{expected_generation}", expected=expected_generation, actual=current)
            record = checkpoint.with_generation(expected_generation + 1)
            rkey = record_key(key, record.generation, uuid.uuid4().hex)
            with self._kafka_errors(f"appending generation {record.generation} of {key}"):
                offset = self._send(key, [(rkey, record.to_bytes())], partition)
            state = self._refresh(partition, past_offset=offset).state(key)
            winner = state.accepted.get(record.generation)
            if winner is None or winner[0] != rkey:
                raise FencedError(f"fenced: another writer appended generation {record.generation} of {key} "
                                  "first", expected=expected_generation, actual=state.last_generation)
            return record

    def prune(self, key: StoreKey, keep: int) -> list[Checkpoint]:
        keep = max(1, keep)
        with self._lock:
            partition, view = self._view_for(key)
            state = view.state(key)
            generations = sorted(state.accepted)
            retired = [state.accepted[g] for g in generations[:-keep]]
            live = {rk for rk, _ in state.accepted.values()}
            tombstones = [rk for rk, _ in retired] + sorted(rk for rk in state.rejected if rk not in live)
            if not tombstones:
                return []
            with self._kafka_errors(f"pruning {key}"):
                offset = self._send(key, [(rk, None) for rk in tombstones], partition)
            self._refresh(partition, past_offset=offset)
            return [cp for _, cp in retired]

    def keys(self) -> list[StoreKey]:
        with self._lock:
            self._connect()
            assert self._partitions is not None
            found: set[StoreKey] = set()
            for partition in range(self._partitions):
                view = self._refresh(partition)
                found.update(k for k, st in view.keys.items() if st.accepted)
            return sorted(found)

    def close(self) -> None:
        with self._lock:
            for key in list(self._producers):
                self._drop_producer(key)
            for client in (self._meta_producer, self._consumer):
                if client is not None:
                    try:
                        client.close(timeout=2) if client is self._meta_producer else client.close()
                    except Exception:  # noqa: BLE001 - best effort on shutdown
                        pass
            self._meta_producer = self._consumer = None
            self._partitions = None


def open_kafka_log(url: str, *, storage_options: dict[str, Any] | None = None) -> KafkaCheckpointLog:
    """Open the Kafka checkpoint log at ``url`` (nothing is contacted until the first call).

    Raises ``MissingDependencyError`` without kafka-python, ``ConfigurationError`` for a bad URL or option.
    """
    try:
        import kafka  # noqa: F401
    except ImportError:
        raise MissingDependencyError(f"the Kafka checkpoint log needs kafka-python; install it with: {INSTALL_HINT}"
                                     ) from None
    return KafkaCheckpointLog(parse_kafka_url(url, storage_options))
