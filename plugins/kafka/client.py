"""The kafka-python side of the Kafka checkpoint log: clients, reading a partition, producing records.

One ``KafkaClients`` per log instance holds a non-transactional producer (metadata, tombstones, and appends where
the broker has no transactions), a consumer (``read_committed`` when appends are transactional), a second
``read_uncommitted`` consumer for the high watermark (transactional mode only) and one transactional producer per
store key (transactional id ``blobstate-<job/task/store>``), created by the store's first append: its
``init_transactions`` bumps the producer epoch, which fences every older producer of the store and closes its open
transaction (Kafka's zombie fencing, KIP-98).

Producing never guesses. ``produce`` returns the offset of a record that is in the log (committed), raises
``StorageError`` when nothing can have reached the log, ``BrokerFenced`` when the broker refused this producer's
epoch, and ``OutcomeUnknown`` when a request was sent and its answer never came (the caller resolves both by
reading the partition). The non-transactional producer sends once (``retries=0``) so that a broker's refusal is
certain; the transactional one retries under its idempotence sequence numbers up to ``timeout_ms``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.consumer.fetcher import RecordTooLargeError
from kafka.partitioner.default import murmur2

from blobstate.errors import ConfigurationError, CorruptIndexError, StorageError
from blobstate.model.records import MAX_RECORD_BYTES, StoreKey
from blobstate.plugins.kafka.acceptance import PartitionView, read_target
from blobstate.plugins.kafka.admin import make_topic_admin, missing_topic
from blobstate.plugins.kafka.config import KafkaLogConfig

TRANSACTIONS_SINCE = (0, 11)
#: bytes a consumer fetches from a partition at once (issue 27 case 7: a record is read bounded). A checkpoint record
#: is at most ``MAX_RECORD_BYTES``: a fetch holds several. An old fetch protocol (the 0.9 broker) refuses a larger
#: record instead of returning it (``RecordTooLargeError``, a ``CorruptIndexError`` here); a modern broker still
#: returns one whole record that is larger (so that a consumer makes progress), which the topic's
#: ``max.message.bytes`` bounds, and ``Checkpoint.from_bytes`` refuses it by its size before parsing.
FETCH_MAX_BYTES = 2 * MAX_RECORD_BYTES


def _kafka_errors(*names: str) -> tuple[type[BaseException], ...]:
    """The named kafka-python error classes this release defines (older releases lack some)."""
    return tuple(getattr(kafka_errors, name) for name in names if hasattr(kafka_errors, name))


#: Produce errors a broker returns before appending anything: with a single attempt, the record is not in the log.
NOT_APPENDED = _kafka_errors("NotLeaderForPartitionError", "UnknownTopicOrPartitionError", "NotEnoughReplicasError",
                             "MessageSizeTooLargeError", "RecordListTooLargeError", "TopicAuthorizationFailedError",
                             "InvalidTopicError")
#: The broker refused this producer's epoch: a newer producer with the same transactional id exists.
FENCED = _kafka_errors("ProducerFencedError", "InvalidProducerEpochError")


class OutcomeUnknown(Exception):
    """A produce or commit request was sent and no answer came; ``offset`` is the record's, if it was acked."""

    def __init__(self, cause: str, offset: int | None = None) -> None:
        super().__init__(cause)
        self.offset = offset


class BrokerFenced(Exception):
    """The broker refused this producer's epoch: a newer producer of the store key ran ``init_transactions``,
    which closed this producer's transaction; ``offset`` is the record's, if it was acked before."""

    def __init__(self, cause: str, offset: int | None = None) -> None:
        super().__init__(cause)
        self.offset = offset


def partition_for(key: StoreKey, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, positive) on the store key: the partition all its records go to."""
    return (murmur2(key.prefix.encode()) & 0x7FFFFFFF) % partitions


def supported(client: type, **options: Any) -> dict[str, Any]:
    """``options`` minus those the installed kafka-python's ``client`` class does not know (older releases)."""
    return {k: v for k, v in options.items() if k in client.DEFAULT_CONFIG}


def call_within(call: Callable[[], None], timeout_s: float, settled: Callable[[], bool] | None = None,
                poll_s: float = 0.2) -> BaseException | None:
    """Run ``call`` for at most ``timeout_s`` seconds: None when it returned, its exception when it raised.

    Still running at the deadline, or once ``settled()`` (checked every ``poll_s``) says its answer no longer
    matters: a ``KafkaTimeoutError``. kafka-python's ``commit_transaction`` has no timeout of its own; its thread
    is a daemon and ends with the producer's request.
    """
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append(exc)

    thread = threading.Thread(target=run, name="blobstate-kafka-commit", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while True:
        thread.join(max(0.0, min(poll_s, deadline - time.monotonic())))
        if outcome:
            return outcome[0]
        if time.monotonic() >= deadline:
            return kafka_errors.KafkaTimeoutError(f"no answer within {timeout_s:.1f} s")
        if settled is not None and settled():
            return kafka_errors.KafkaTimeoutError("no answer, but the transaction has ended (read it)")


class KafkaClients:
    """The kafka-python clients of one log instance (not thread-safe: the log holds its lock around calls)."""

    def __init__(self, config: KafkaLogConfig) -> None:
        self.config = config
        self.url = config.display_url
        self.api_version: tuple[int, ...] | None = config.api_version
        self.transactional = False
        self.partitions: int | None = None
        self._meta: Any = None
        self._consumer: Any = None
        self._watermarks: Any = None
        self._producers: dict[StoreKey, Any] = {}
        self._unclosed: list[Any] = []
        self._timeout_s = config.timeout_ms / 1000

    # -- errors ------------------------------------------------------------------------------------------------
    def describe(self, exc: BaseException) -> str:
        """``exc`` as text naming its type, with every credential replaced by ``***``."""
        text = str(exc) if str(exc).startswith(type(exc).__name__) else f"{type(exc).__name__}: {exc}"
        for secret in self.config.secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def errors(self, what: str) -> Iterator[None]:
        """Turn kafka-python's exceptions into ``StorageError`` naming the log, never its credentials."""
        try:
            yield
        except (kafka_errors.KafkaError, OSError) as exc:
            raise StorageError(f"{what} on {self.url} failed: {self.describe(exc)}") from None

    def _kwargs(self) -> dict[str, Any]:
        return {"bootstrap_servers": list(self.config.bootstrap_servers), "api_version": self.api_version,
                **self.config.client_options}

    def _producer_options(self) -> dict[str, Any]:
        ms = self.config.timeout_ms
        return {"acks": "all", "max_block_ms": ms, "request_timeout_ms": ms,
                **supported(KafkaProducer, delivery_timeout_ms=ms, allow_auto_create_topics=False),
                **self._kwargs()}

    # -- connecting --------------------------------------------------------------------------------------------
    def connect(self) -> None:
        """Create the non-transactional producer, learn the broker version, pick the append path, ensure the
        topic and count its partitions. Raises ``StorageError``, or ``ConfigurationError`` for a missing topic
        or ``transactional=true`` on a broker (or kafka-python) without transactions."""
        if self.partitions is not None:
            return
        with self.errors("connecting"):
            if self._meta is None:
                kwargs = self._producer_options()
                for probe_timeout in ("bootstrap_timeout_ms", "api_version_auto_timeout_ms"):  # 3.x / 2.x
                    if probe_timeout in KafkaProducer.DEFAULT_CONFIG:
                        kwargs.setdefault(probe_timeout, self.config.timeout_ms)
                self._meta = KafkaProducer(enable_idempotence=False, retries=0, **kwargs)
                self.api_version = tuple(self._meta.config["api_version"])
            able = self.api_version >= TRANSACTIONS_SINCE and "transactional_id" in KafkaProducer.DEFAULT_CONFIG
            if self.config.transactional and not able:
                raise ConfigurationError(f"kafka transactional=true needs a broker >= 0.11 and kafka-python >= 2.1; "
                                         f"{self.url} speaks {'.'.join(map(str, self.api_version))}")
            self.transactional = able if self.config.transactional is None else self.config.transactional
            make_topic_admin(self.config, self.api_version).ensure_topic(
                self.config.topic, partitions=self.config.partitions,
                replication_factor=self.config.replication_factor)
            try:
                partitions = self._meta.partitions_for(self.config.topic)
            except kafka_errors.KafkaTimeoutError:
                metadata = getattr(self._meta, "_metadata", None)
                if metadata is not None and metadata.brokers():
                    raise ConfigurationError(missing_topic(self.config)) from None
                raise
            self.partitions = len(partitions)

    def partition_of(self, key: StoreKey) -> int:
        """The partition of ``key``'s records (connects first)."""
        self.connect()
        assert self.partitions is not None
        return partition_for(key, self.partitions)

    # -- reading -----------------------------------------------------------------------------------------------
    def _consumer_for(self, isolation_level: str) -> Any:
        return KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
                             isolation_level=isolation_level, request_timeout_ms=max(self.config.timeout_ms, 1000),
                             max_partition_fetch_bytes=FETCH_MAX_BYTES,
                             **supported(KafkaConsumer, allow_auto_create_topics=False,
                                         fetch_max_bytes=FETCH_MAX_BYTES), **self._kwargs())

    def _end_offsets(self, tp: TopicPartition) -> tuple[int, int]:
        """``(committed end, high watermark)`` of ``tp``: equal unless appends are transactional."""
        if self._consumer is None:
            self._consumer = self._consumer_for("read_committed" if self.transactional else "read_uncommitted")
        committed = self._consumer.end_offsets([tp], timeout_ms=self.config.timeout_ms)[tp]
        if not self.transactional:
            return committed, committed
        if self._watermarks is None:
            self._watermarks = self._consumer_for("read_uncommitted")
        return committed, self._watermarks.end_offsets([tp], timeout_ms=self.config.timeout_ms)[tp]

    def read(self, view: PartitionView, *, past_offset: int = -1) -> PartitionView:
        """Fold ``view``'s partition from where it stopped to its end, and past ``past_offset``.

        The end is ``acceptance.read_target`` of the broker's end offsets, so every record decided when the read
        began is seen; a transaction still open there holds ``read_committed`` back until it ends. Raises
        ``StorageError`` when the end is not reached within ``timeout_ms``.
        """
        tp = TopicPartition(self.config.topic, view.partition)
        deadline = time.monotonic() + self._timeout_s
        with self.errors(f"reading partition {view.partition}"):
            committed, high_watermark = self._end_offsets(tp)
            target = max(read_target(committed, high_watermark, view.next_offset), past_offset + 1)
            consumer = self._consumer
            if consumer.assignment() != {tp}:
                consumer.assign([tp])
            consumer.seek(tp, view.next_offset)
            while view.next_offset < target:
                remaining_ms = int((deadline - time.monotonic()) * 1000)
                if remaining_ms <= 0:
                    raise StorageError(f"reading partition {view.partition} of {self.url} to offset {target} timed "
                                       f"out at offset {view.next_offset} (an open transaction holds read_committed "
                                       "readers back until it ends or times out)")
                try:
                    batches = consumer.poll(timeout_ms=min(remaining_ms, 1000), max_records=10_000)
                except RecordTooLargeError:
                    raise CorruptIndexError(f"corrupt checkpoint record: kafka topic {self.config.topic} partition "
                                            f"{view.partition} offset {view.next_offset} holds a record larger than "
                                            f"{FETCH_MAX_BYTES} bytes, larger than any checkpoint record") from None
                for record in batches.get(tp, []):
                    if record.offset >= view.next_offset:
                        view.apply(record.offset, record.key, record.value)
                        view.next_offset = record.offset + 1
                view.next_offset = max(view.next_offset, consumer.position(tp, timeout_ms=self.config.timeout_ms))
        return view

    # -- producing ---------------------------------------------------------------------------------------------
    def writer(self, key: StoreKey) -> None:
        """Make ``key``'s transactional producer ready (transactional mode): creating it runs
        ``init_transactions``, which fences older producers of the store and ends their open transaction, so a
        read after this call sees every record they can ever add. Raises ``StorageError`` (nothing was sent)."""
        if not self.transactional or key in self._producers:
            return
        with self.errors(f"starting the transactional producer of {key}"):
            producer = KafkaProducer(transactional_id=f"blobstate-{key.prefix}", enable_idempotence=True,
                                     **supported(KafkaProducer,
                                                 transaction_timeout_ms=self.config.transaction_timeout_ms),
                                     **self._producer_options())
            try:
                producer.init_transactions()
            except BaseException:
                self._close_quietly(producer)
                raise
        self._producers[key] = producer

    def produce(self, key: StoreKey, partition: int, records: list[tuple[bytes, bytes]]) -> int:
        """Append ``records`` (record key, value) to ``partition`` for ``key``; the offset of the last one.

        Transactional mode uses ``key``'s producer (see ``writer``) in one transaction. Raises ``StorageError``
        (nothing reached the log), ``BrokerFenced`` or ``OutcomeUnknown`` (see the module docstring).
        """
        if not self.transactional:
            return self._send_plain(partition, records)
        self.writer(key)
        producer = self._producers[key]
        try:  # a send that raises queued nothing: the record cannot reach the log
            producer.begin_transaction()
            futures = [producer.send(self.config.topic, key=k, value=v, partition=partition) for k, v in records]
        except FENCED as exc:
            self.drop_writer(key)
            raise BrokerFenced(self.describe(exc)) from None
        except (kafka_errors.KafkaError, OSError) as exc:
            self.drop_writer(key)
            raise StorageError(f"producing to partition {partition} of {self.url} failed: "
                               f"{self.describe(exc)}") from None
        offset: int | None = None
        try:
            offset = [f.get(timeout=self._timeout_s) for f in futures][-1].offset
            # Stop waiting once the partition's committed end passes the record: the transaction is over (tansu
            # never answers the EndTxn of a producer fenced mid-transaction, whose transaction the newer
            # producer's init_transactions committed; kafka-python would retry it forever).
            tp = TopicPartition(self.config.topic, partition)
            failure = call_within(producer.commit_transaction, self._timeout_s,
                                  settled=lambda: self._end_offsets(tp)[0] > offset)
            if failure is None:
                return offset
            raise failure
        except FENCED as exc:
            self.drop_writer(key)
            raise BrokerFenced(self.describe(exc), offset) from None
        except (kafka_errors.KafkaError, OSError) as exc:
            self.drop_writer(key)
            raise OutcomeUnknown(self.describe(exc), offset) from None

    def _send_plain(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        with self.errors(f"producing to partition {partition}"):  # nothing queued yet: a failure is certain
            futures = [self._meta.send(self.config.topic, key=k, value=v, partition=partition) for k, v in records]
        try:
            return [f.get(timeout=self._timeout_s + 1) for f in futures][-1].offset
        except NOT_APPENDED as exc:
            raise StorageError(f"producing to partition {partition} of {self.url} failed: "
                               f"{self.describe(exc)}") from None
        except (kafka_errors.KafkaError, OSError) as exc:
            raise OutcomeUnknown(self.describe(exc)) from None

    def tombstones(self, partition: int, record_keys: list[bytes]) -> int:
        """Produce a tombstone (null value) for each record key, outside any transaction (retention must not
        fence the store's writer); the last offset. Raises ``StorageError`` or ``OutcomeUnknown``; pruning is
        idempotent, so the caller may simply retry."""
        return self._send_plain(partition, [(rk, None) for rk in record_keys])

    # -- closing -----------------------------------------------------------------------------------------------
    def _close_quietly(self, client: Any, timeout_s: float = 0) -> None:
        """Close ``client``; a producer whose last batch is still pending (its answer lost) refuses to close
        until the batch expires (``delivery_timeout_ms``), so it is kept and closed again by ``close()``."""
        try:
            client.close(timeout=timeout_s) if isinstance(client, KafkaProducer) else client.close()
        except Exception:  # noqa: BLE001 - best effort: a broken client is dropped anyway
            if isinstance(client, KafkaProducer) and client not in self._unclosed:
                self._unclosed.append(client)

    def drop_writer(self, key: StoreKey) -> None:
        """Forget ``key``'s transactional producer (after a failure); the next append starts a new one."""
        producer = self._producers.pop(key, None)
        if producer is not None:
            self._close_quietly(producer)

    def close(self) -> None:
        """Close every client; the next call connects again."""
        for key in list(self._producers):
            self.drop_writer(key)
        for client in (self._meta, self._consumer, self._watermarks):
            if client is not None:
                self._close_quietly(client)
        unclosed, self._unclosed = self._unclosed, []
        for producer in unclosed:
            self._close_quietly(producer, timeout_s=self._timeout_s)
        self._meta = self._consumer = self._watermarks = None
        self.partitions = None
