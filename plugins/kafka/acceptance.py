"""The acceptance rule of the Kafka checkpoint log: a pure fold of one partition's records (no I/O).

Every reader and writer applies the same rule to the same partition order, so they all agree on which record
holds each generation, whatever the broker offers:

    Per store key, records are taken in partition order. The first record seen (after compaction) is accepted;
    after that a record of generation ``g`` is accepted only if ``g`` is exactly one more than the last accepted
    generation. Every other record (a second record for ``g``, a stale generation written by a zombie after a
    newer one, a gap) is rejected, permanently: acceptance depends only on the records before it.

A tombstone (null value) deletes the record with its key. Tombstones only ever remove records that precede the
oldest retained generation or were rejected, so compaction, which may drop tombstoned records and later the
tombstones, changes no answer. A record's key is ``job/task/store/<generation, 20 digits>/<token>`` with a fresh
token per produce, so two attempts never share a key (compaction keeps the last record of a key, which would move
it behind its successors).

An append's outcome is decided by the same rule (``decide_before_produce``, ``decide_after_read``): the record
accepted for ``g`` is "ours" when it carries our ``checkpoint_id``, whichever attempt of ours produced it; that is
what makes a re-append of the same checkpoint idempotent (the ``CheckpointLog.append`` contract).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from blobstate.errors import ConfigurationError, CorruptIndexError, FencedError
from blobstate.model.records import Checkpoint, StoreKey

GENERATION_DIGITS = 20


def record_key(key: StoreKey, generation: int, token: str) -> bytes:
    """The Kafka record key of one produce of ``generation`` for ``key`` (``token``: unique per produce)."""
    return f"{key.prefix}/{generation:0{GENERATION_DIGITS}d}/{token}".encode()


def parse_record_key(rkey: bytes) -> tuple[StoreKey, int] | None:
    """``(store key, generation)`` of a record key, or None when it is not one of ours."""
    try:
        job, task, store, gen, token = rkey.decode().split("/")
        if len(gen) != GENERATION_DIGITS or not gen.isdigit() or not token:
            return None
        return StoreKey(job, task, store), int(gen)
    except (ValueError, UnicodeDecodeError, ConfigurationError):
        return None


@dataclass
class KeyState:
    """What one partition's records say about one store key."""

    accepted: dict[int, tuple[bytes, Checkpoint]] = field(default_factory=dict)  # generation -> (record key, cp)
    last_generation: int = 0  # highest accepted generation ever (survives tombstones)
    rejected: set[bytes] = field(default_factory=set)
    corrupt: dict[bytes, str] = field(default_factory=dict)  # record key -> what is wrong

    def holder(self, generation: int) -> Checkpoint | None:
        """The accepted checkpoint of ``generation``, if it is retained."""
        held = self.accepted.get(generation)
        return held[1] if held is not None else None


@dataclass
class PartitionView:
    """The folded state of one partition up to ``next_offset`` (exclusive)."""

    topic: str
    partition: int
    next_offset: int = 0
    keys: dict[StoreKey, KeyState] = field(default_factory=dict)
    foreign: dict[bytes, str] = field(default_factory=dict)  # records whose key is not a blobstate record key

    def apply(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """Fold one record (``value`` None: a tombstone) into the view."""
        where = f"kafka topic {self.topic} partition {self.partition} offset {offset}"
        rkey = key or b""
        parsed = parse_record_key(rkey)
        if parsed is None:
            if value is None:
                self.foreign.pop(rkey, None)
            else:
                self.foreign[rkey] = f"{where}: record key {rkey[:80]!r} is not job/task/store/generation/token"
            return
        store_key, generation = parsed
        state = self.keys.setdefault(store_key, KeyState())
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

    def state(self, key: StoreKey) -> KeyState:
        """The key's state; raises ``CorruptIndexError`` when a malformed record sits in its way."""
        if self.foreign:
            raise CorruptIndexError(next(iter(self.foreign.values())))
        state = self.keys.get(key, KeyState())
        if state.corrupt:
            raise CorruptIndexError(next(iter(state.corrupt.values())))
        return state


def decide_before_produce(state: KeyState, record: Checkpoint, expected_generation: int) -> Checkpoint | None:
    """Before producing ``record`` (already at generation ``expected_generation + 1``): the accepted record when
    an earlier attempt of the same checkpoint holds that generation (a re-append resolving an unknown outcome),
    None when the key is at ``expected_generation`` (go ahead). Raises ``FencedError`` otherwise."""
    held = state.holder(record.generation)
    if held is not None and held.checkpoint_id == record.checkpoint_id:
        return held
    if state.last_generation != expected_generation:
        raise FencedError(f"fenced: {record.store_key} is at generation {state.last_generation}, this writer "
                          f"expected {expected_generation}", expected=expected_generation,
                          actual=state.last_generation)
    return None


def decide_after_read(state: KeyState, record: Checkpoint, expected_generation: int) -> Checkpoint | None:
    """Once the partition has been read past every attempt of ``record``: the accepted record when it is ours
    (same ``checkpoint_id``), None when no retained record holds the generation (nothing of ours landed).
    Raises ``FencedError`` when another writer's record holds it."""
    held = state.holder(record.generation)
    if held is None:
        if state.last_generation > expected_generation:  # held once and pruned since, like the file and SQL logs
            raise FencedError(f"fenced: {record.store_key} is at generation {state.last_generation}; generation "
                              f"{record.generation} is no longer retained", expected=expected_generation,
                              actual=state.last_generation)
        return None
    if held.checkpoint_id == record.checkpoint_id:
        return held
    raise FencedError(f"fenced: writer {held.writer_id!r} appended generation {record.generation} of "
                      f"{record.store_key} first", expected=expected_generation, actual=state.last_generation)


def read_target(committed_end: int, high_watermark: int, next_offset: int) -> int:
    """The offset a read must reach to see every record decided when the read began.

    ``committed_end`` is the broker's end offset for ``read_committed`` (Kafka's last stable offset: it stops at
    the first open transaction and never moves back), ``high_watermark`` its end for ``read_uncommitted``,
    ``next_offset`` where this reader stands. Kafka's answer is trusted when it is plausible; tansu 0.6 answers 0
    for ``read_committed`` while any transaction is open in the partition, and a committed end below what was
    already read (or 0 with records present) can only be that: then the high watermark is the target, and the
    read waits for the open transactions to end.
    """
    if committed_end >= max(next_offset, 1) or high_watermark == 0:
        return committed_end
    return high_watermark
