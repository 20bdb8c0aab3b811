"""The simulated backends: an in-memory blob store and checkpoint log sharing one ``World``.

Both implement ``blobstate.plugin.interfaces`` (and pass the conformance kits in ``blobstate.testing``, see
``tests/fault/test_simulation.py``). Every call is a scheduling point: before it touches the world it calls
``World.point(label)``, where the scheduler may switch to another actor, pause or kill this one
(``blobstate.testing.simulation.scheduler``). Time is read through ``blobstate.model.layout`` (the virtual clock
while a simulation runs). Faults the world can inject:

- an unknown append outcome (``World.unknown_appends``): the log applies the append (or not) and the caller gets
  ``AppendOutcomeUnknown``, as after a timeout;
- a lost or damaged object (``World.lose`` / ``World.damage``), outside every API call;
- with ``World.torn_overwrites``, a ``put`` over an existing object writes it in place as file:// does (truncated,
  a scheduling point, then the bytes): a kill there leaves it empty. ``rewrite`` (the Rewrite door) is atomic and
  conditional on the version ``get_versioned`` gave.

The world also keeps what the invariants need without going through a scheduling point: every blob with its
content version, every record of every log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from blobstate.codec.cipher import ObjectCipher
from blobstate.codec.log import SealedCheckpointLog
from blobstate.errors import AppendOutcomeUnknown, BlobNotFound, CorruptIndexError, FencedError, ObjectChangedError
from blobstate.model import layout
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.interfaces import BlobInfo, BlobStore, BoundedSink, CheckpointLog, FileRange, PutRequest
from blobstate.repository.repo import Repository


@dataclass
class Blob:
    """One stored object: bytes, when it was written (ms, the store's clock) and its TTL expiry (ms) or None."""

    data: bytes
    modified_ms: int
    expires_ms: int | None = None
    version: int = 0  # which write of the world made it (``get_versioned``'s token)


@dataclass
class World:
    """Everything the simulated store and logs hold; ``point`` is the scheduler's hook (a no-op by default)."""

    blobs: dict[str, Blob] = field(default_factory=dict)
    logs: dict[str, dict[StoreKey, list[tuple[int, bytes, Checkpoint]]]] = field(default_factory=dict)
    point: Callable[[str], None] = lambda label: None
    #: ``{n: applied}``: the n-th append of the run (0-based) has an unknown outcome; applied or not.
    unknown_appends: dict[int, bool] = field(default_factory=dict)
    appends: int = 0
    damaged: set[str] = field(default_factory=set)  # ids a fault lost or damaged (the invariants know)
    server_clock: Callable[[], int] = field(default=lambda: layout.now_ms())
    lock: threading.Lock = field(default_factory=threading.Lock)  # never held across a scheduling point
    #: told of every change a call makes, after its scheduling point: ``(op, object id)``, a log change as
    #: ``(op, "<store prefix>/")`` (the simulation checks who changes what: a rescale never changes its source)
    on_mutation: Callable[[str, str], None] = lambda op, target: None
    #: a ``put`` over an existing object is torn by a kill between its truncation and its bytes (file://'s O_TRUNC)
    torn_overwrites: bool = False
    #: objects being written in place right now, by the actor writing them (``actor()``: the current one's name)
    in_place: dict[str, str] = field(default_factory=dict)
    actor: Callable[[], str] = lambda: ""
    writes: int = 0  # objects written so far (each write's ``Blob.version``)

    def stored(self, data: bytes, expires_ms: int | None = None) -> Blob:
        """A new object's ``Blob``, written now (the store's clock), with the next version."""
        self.writes += 1
        return Blob(data, self.server_clock(), expires_ms, self.writes)

    def lose(self, blob_id: str) -> None:
        """Fault: the object is gone (outside every API call)."""
        self.blobs.pop(blob_id, None)
        self.damaged.add(blob_id)

    def damage(self, blob_id: str) -> None:
        """Fault: one byte of the object flips (same size)."""
        blob = self.blobs.get(blob_id)
        if blob is not None and blob.data:
            data = bytearray(blob.data)
            data[len(data) // 2] ^= 0x5A
            blob.data = bytes(data)
            self.damaged.add(blob_id)


def _under(blob_id: str, prefix: str) -> bool:
    return not prefix or blob_id.startswith(prefix.rstrip("/") + "/")


class SimBlobStore(BlobStore):
    """An in-memory ``BlobStore`` over ``world`` (lease-mode TTLs kept beside each object, one call at a time)."""

    max_concurrency = 1  # batches run inline, one scheduling point per object: deterministic
    ttl_mode = "lease"

    def __init__(self, world: World, url: str = "sim://repo") -> None:
        self.world = world
        self.url = url

    def put(self, request: PutRequest) -> None:
        parts = request.blob_id.rsplit("/", 2)
        self.world.point(f"put {parts[-2] if len(parts) > 1 else parts[0]}")
        self.world.on_mutation("put", request.blob_id)
        src = request.source
        if isinstance(src, FileRange):
            with open(src.path, "rb") as fh:
                fh.seek(src.offset)
                data = fh.read(src.length)
        else:
            data = bytes(src)
        now = layout.now_ms()  # the writer's clock: a lease is written by the client
        expires = now + request.ttl_ms if request.ttl_ms is not None else None
        existing = self.world.blobs.get(request.blob_id)
        if existing is not None and self.world.torn_overwrites:  # in place: truncated before the bytes land
            existing.data = b""
            self.world.in_place[request.blob_id] = self.world.actor()
            self.world.point("put in place")
            self.world.in_place.pop(request.blob_id, None)
        self.world.blobs[request.blob_id] = self.world.stored(data, expires)
        self.world.damaged.discard(request.blob_id)

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        self.world.point("put_exclusive")
        self.world.on_mutation("put", blob_id)
        with self.world.lock:
            if blob_id in self.world.blobs:
                raise FileExistsError(blob_id)
            self.world.blobs[blob_id] = self.world.stored(bytes(data))

    def get_versioned(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        self.world.point("get")
        blob = self.world.blobs.get(blob_id)
        if blob is None:
            raise BlobNotFound(blob_id)
        sink.write(blob.data)
        return blob.data, f"v{blob.version}"

    conditional_rewrite = True

    def rewrite(self, blob_id: str, data: bytes, *, expected: str | None) -> None:
        """All or nothing, and only while the object is at version ``expected`` (None: absent)."""
        self.world.point("rewrite")
        self.world.on_mutation("put", blob_id)
        with self.world.lock:
            blob = self.world.blobs.get(blob_id)
            if (blob is None) != (expected is None) or (blob is not None and f"v{blob.version}" != expected):
                raise ObjectChangedError(f"{blob_id} changed since it was read")
            self.world.blobs[blob_id] = self.world.stored(bytes(data))

    def get(self, blob_id: str, sink: BinaryIO) -> int:
        self.world.point("get")
        blob = self.world.blobs.get(blob_id)
        if blob is None:
            raise BlobNotFound(blob_id)
        sink.write(blob.data)
        return len(blob.data)

    def delete(self, blob_id: str) -> None:
        self.world.point("delete")
        self.world.on_mutation("delete", blob_id)
        self.world.blobs.pop(blob_id, None)

    def remove_ttl(self, blob_id: str) -> None:
        self.world.point("remove_ttl")
        self.world.on_mutation("remove_ttl", blob_id)
        blob = self.world.blobs.get(blob_id)
        if blob is not None:
            blob.expires_ms = None

    def list(self, prefix: str) -> Iterator[BlobInfo]:
        self.world.point("list")
        items = [BlobInfo(k, len(b.data), b.modified_ms) for k, b in sorted(self.world.blobs.items())
                 if _under(k, prefix)]
        return iter(items)

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        self.world.point("expired")
        return sorted(k for k, b in self.world.blobs.items()
                      if _under(k, prefix) and b.expires_ms is not None and b.expires_ms < now_ms)

    def has_ttl(self, blob_id: str) -> bool:
        self.world.point("has_ttl")
        blob = self.world.blobs.get(blob_id)
        return blob is not None and blob.expires_ms is not None


class SimCheckpointLog(CheckpointLog):
    """An in-memory ``CheckpointLog`` named ``name`` in ``world`` (records kept as their JSON, like a real log)."""

    def __init__(self, world: World, name: str = "log") -> None:
        self.world = world
        self.name = name
        self.url = f"sim-log://{name}"
        self.records = world.logs.setdefault(name, {})

    def _parsed(self, key: StoreKey) -> list[Checkpoint]:
        out = []
        for generation, data, _ in self.records.get(key, []):
            cp = Checkpoint.from_bytes(data, source=f"{self.url} {key} generation {generation}")
            if cp.generation != generation or cp.store_key != key:
                raise CorruptIndexError(f"{self.url}: the record at generation {generation} of {key} names another")
            out.append(cp)
        return out

    def latest(self, key: StoreKey) -> Checkpoint | None:
        self.world.point("log latest")
        history = self._parsed(key)
        return history[-1] if history else None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        self.world.point("log history")
        return self._parsed(key)

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        self.world.point("log append")
        self.world.on_mutation("append", checkpoint.store_key.prefix + "/")
        n = self.world.appends
        self.world.appends += 1
        fault = self.world.unknown_appends.get(n)
        if fault is False:  # sent, lost on the way: nothing applied, the answer never came
            raise AppendOutcomeUnknown(f"{self.url}: append timed out (simulated)",
                                       checkpoint_id=checkpoint.checkpoint_id)
        with self.world.lock:
            return self._append(checkpoint, expected_generation, fault)

    def _append(self, checkpoint: Checkpoint, expected_generation: int, fault: bool | None) -> Checkpoint:
        key = checkpoint.store_key
        history = self._parsed(key)
        latest = history[-1].generation if history else 0
        same = next((cp for cp in history if cp.generation == expected_generation + 1), None)
        if same is not None and same.checkpoint_id == checkpoint.checkpoint_id:
            result = same
        elif latest != expected_generation:
            raise FencedError(f"{self.url}: {key} is at generation {latest}, expected {expected_generation}",
                              expected=expected_generation, actual=latest)
        else:
            result = checkpoint.with_generation(expected_generation + 1)
            self.records.setdefault(key, []).append((result.generation, result.to_bytes(), result))
        if fault is True:  # applied, then the answer was lost
            raise AppendOutcomeUnknown(f"{self.url}: append timed out (simulated)",
                                       checkpoint_id=checkpoint.checkpoint_id)
        return result

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        self.world.point("log prune")
        self.world.on_mutation("prune", key.prefix + "/")
        held = self.records.get(key, [])
        keep = max(1, keep)
        doomed = [r for r in held[:-keep] if below is None or r[0] < below]
        self.records[key] = [r for r in held if r not in doomed]
        return [cp for _, _, cp in doomed]

    def keys(self) -> list[StoreKey]:
        self.world.point("log keys")
        return sorted(k for k, v in self.records.items() if v)

    def raw_write(self, key: StoreKey, generation: int, payload: bytes) -> None:
        """Store ``payload`` as the record at ``generation`` (the conformance kit's malformed records)."""
        self.records.setdefault(key, []).append((generation, payload, None))  # type: ignore[arg-type]


def sim_repository(store: SimBlobStore, log: str, cipher: ObjectCipher | None = None) -> Repository:
    """The repository over ``store`` with its checkpoint log ``log``, assembled as ``Repository.open`` assembles one:
    every object through the codec (``blobstate.codec.store.CodecBlobStore``: indexes and changelogs compressed)
    and, with ``cipher`` (an encrypted repository), encrypted, the log's records sealed
    (``blobstate.codec.log.SealedCheckpointLog``). The key is given, not unwrapped from the marker: the simulator
    checks the commit protocol, not the key's path."""
    checkpoint_log: CheckpointLog = SimCheckpointLog(store.world, log)
    if cipher is not None:
        checkpoint_log = SealedCheckpointLog(checkpoint_log, cipher)
    return Repository(store, checkpoint_log, store.url, cipher=cipher)


def history_now(world: World, log: str, key: StoreKey) -> list[Checkpoint]:
    """``key``'s records in log ``log`` as they are, read without a scheduling point (for the invariants)."""
    return [cp for _, _, cp in world.logs.get(log, {}).get(key, []) if cp is not None]


def read_now(world: World, blob_id: str) -> bytes | None:
    """A blob's bytes without a scheduling point (None: missing)."""
    blob = world.blobs.get(blob_id)
    return None if blob is None else blob.data


__all__ = ["Blob", "SimBlobStore", "SimCheckpointLog", "World", "history_now", "read_now", "sim_repository"]
