"""``KafkaCheckpointLog``: the ``CheckpointLog`` contract on a compacted Kafka topic (see the package docstring).

``append`` is three steps, each deciding by the acceptance rule (``acceptance``) what the partition says:

1. In transactional mode, make the store's transactional producer ready first (``init_transactions`` fences
   every older producer of the store and ends its open transaction: Kafka aborts it, tansu commits it). Then read
   the partition to its end: the answer is the accepted record when an earlier attempt of this checkpoint already
   holds generation ``expected + 1`` (a re-append after an unknown outcome), ``FencedError`` when the store is not
   at ``expected``; otherwise go on.
2. Produce the record (``acks=all``; in transactional mode inside a transaction, committed).
3. Read the partition past the record's offset: the append succeeded only if the accepted record of the
   generation is this checkpoint's; another writer's record there means ``FencedError``.

When the answer to a produce or commit never came, the record may land later: when its offset is known the read
past it decides; otherwise ``AppendOutcomeUnknown`` is raised and the core re-appends the same checkpoint, which
step 1 answers for certain (in transactional mode the new producer's epoch bump ends the old attempt first; without
transactions a late copy of the old attempt can only be rejected, or be the accepted record, which is ours too).
When the broker fences the producer (a newer producer of the store initialised), its transaction is already
ended, so reading the partition to its end decides.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import kafka  # noqa: F401 - this backend's dependency: a missing extra fails at resolution (blobstate.plugin.records)

from blobstate.errors import AppendOutcomeUnknown, CorruptIndexError, FencedError, StorageError
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.interfaces import CheckpointLog
from blobstate.plugins.kafka.acceptance import (
    PartitionView,
    decide_after_read,
    decide_before_produce,
    record_key,
)
from blobstate.plugins.kafka.client import BrokerFenced, KafkaClients, OutcomeUnknown
from blobstate.plugins.kafka.config import KafkaLogConfig, parse_kafka_url


class KafkaCheckpointLog(CheckpointLog):
    """``CheckpointLog`` on a compacted Kafka topic; fencing by the acceptance rule (+ transactions if available).

    Thread-safe (one lock per instance). Every Kafka failure surfaces as ``StorageError`` naming the topic, never
    the credentials; an append that may still land as ``AppendOutcomeUnknown``; a malformed record as
    ``CorruptIndexError``; a lost race as ``FencedError``.
    """

    def __init__(self, config: KafkaLogConfig) -> None:
        self.config = config
        self.url = config.display_url
        self.clients = KafkaClients(config)
        self._lock = threading.RLock()
        self._views: dict[int, PartitionView] = {}

    @property
    def transactional(self) -> bool | None:
        """Whether appends go through transactional producers (None until the first call connects)."""
        return self.clients.transactional if self.clients.partitions is not None else None

    def _read(self, partition: int, *, past_offset: int = -1) -> PartitionView:
        view = self._views.setdefault(partition, PartitionView(self.config.topic, partition))
        return self.clients.read(view, past_offset=past_offset)

    def _view_for(self, key: StoreKey) -> tuple[int, PartitionView]:
        partition = self.clients.partition_of(key)
        return partition, self._read(partition)

    # -- the contract ------------------------------------------------------------------------------------------
    def latest(self, key: StoreKey) -> Checkpoint | None:
        with self._lock:
            state = self._view_for(key)[1].state(key)
            return state.accepted[max(state.accepted)][1] if state.accepted else None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        with self._lock:
            state = self._view_for(key)[1].state(key)
            return [state.accepted[g][1] for g in sorted(state.accepted)]

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        key = checkpoint.store_key
        record = checkpoint.with_generation(expected_generation + 1)
        with self._lock:
            partition = self.clients.partition_of(key)
            self.clients.writer(key)
            earlier = decide_before_produce(self._read(partition).state(key), record, expected_generation)
            if earlier is not None:
                return earlier
            rkey = record_key(key, record.generation, uuid.uuid4().hex)
            what = f"append of generation {record.generation} of {key} to {self.url}"
            try:
                offset = self.clients.produce(key, partition, [(rkey, record.to_bytes())])
            except BrokerFenced as exc:  # this producer's transaction is over: the partition's end decides
                return self._decide(record, expected_generation, partition, exc.offset, what,
                                    f"the broker fenced this producer, a newer producer of the store took over: "
                                    f"{exc}", fenced=True)
            except OutcomeUnknown as exc:
                if exc.offset is None:
                    raise AppendOutcomeUnknown(f"{what}: outcome unknown ({exc})",
                                               checkpoint_id=record.checkpoint_id) from None
                return self._decide(record, expected_generation, partition, exc.offset, what, str(exc))
            return self._decide(record, expected_generation, partition, offset, what, "produced")

    def _decide(self, record: Checkpoint, expected: int, partition: int, offset: int | None, what: str,
                cause: str, *, fenced: bool = False) -> Checkpoint:
        """Read past ``offset`` (or to the end) and answer for ``record`` by the acceptance rule.

        Raises ``FencedError`` (another writer's record holds the generation, or the broker ``fenced`` this
        producer and nothing of it landed), ``StorageError`` (the transaction was aborted: nothing landed) or
        ``AppendOutcomeUnknown`` (the read did not get there in time).
        """
        try:
            state = self._read(partition, past_offset=-1 if offset is None else offset).state(record.store_key)
        except (StorageError, CorruptIndexError) as exc:  # the record may be in the log: never a plain failure
            raise AppendOutcomeUnknown(f"{what}: outcome unknown ({cause}; then {exc})",
                                       checkpoint_id=record.checkpoint_id) from None
        try:
            ours = decide_after_read(state, record, expected)
        except FencedError as exc:
            if not fenced:
                raise
            raise FencedError(f"{exc}; {cause}", expected=expected, actual=state.last_generation) from None
        if ours is not None:
            return ours
        if fenced:
            raise FencedError(f"fenced: a newer producer of {record.store_key} took over ({cause})",
                              expected=expected, actual=state.last_generation)
        raise StorageError(f"{what} failed: its transaction was aborted ({cause})")

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        keep = max(1, keep)
        with self._lock:
            partition, view = self._view_for(key)
            state = view.state(key)
            generations = sorted(state.accepted)
            retired = [state.accepted[g] for g in generations[:-keep] if below is None or g < below]
            live = {rk for rk, _ in state.accepted.values()}
            tombstones = [rk for rk, _ in retired] + sorted(rk for rk in state.rejected if rk not in live)
            if not tombstones:
                return []
            try:
                offset = self.clients.tombstones(partition, tombstones)
            except OutcomeUnknown as exc:
                raise StorageError(f"pruning {key} on {self.url}: {exc} (prune again)") from None
            self._read(partition, past_offset=offset)
            return [cp for _, cp in retired]

    def keys(self) -> list[StoreKey]:
        with self._lock:
            self.clients.connect()
            assert self.clients.partitions is not None
            found: set[StoreKey] = set()
            for partition in range(self.clients.partitions):
                found.update(k for k, st in self._read(partition).keys.items() if st.accepted)
            return sorted(found)

    def close(self) -> None:
        with self._lock:
            self.clients.close()


def open_kafka_log(url: str, *, storage_options: dict[str, Any] | None = None) -> KafkaCheckpointLog:
    """Open the Kafka checkpoint log at ``url`` (nothing is contacted until the first call).

    Raises ``ConfigurationError`` for a bad URL or option (a ``topic_admin`` string naming code included). A
    missing kafka-python fails when this module is imported, which ``blobstate.plugin.records`` reports with the
    registration record's install hint.
    """
    return KafkaCheckpointLog(parse_kafka_url(url, storage_options))
