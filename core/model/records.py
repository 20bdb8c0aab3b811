"""Store keys and checkpoint records, with their JSON forms (snapshot indexes: ``blobstate.model.index``).

A checkpoint record is one of three kinds. A **snapshot** record carries its index's blob id, size (bytes) and
CRC32C, so a corrupt or swapped index is detected before it is used. A **delta** record (Spark's RocksDB changelog
checkpointing, Flink's changelog state backend) carries one changelog blob instead: the writes of one batch,
applied in order on top of the newest snapshot below it (``blobstate.model.chain``); a small changelog (at most
``MAX_INLINE_CHANGELOG_BYTES``) is carried in the record itself (``changelogInline``, schema version 4), which makes
it durable with the commit point: no blob, so no TTL to remove and nothing to heal or orphan. A **group** record (a
group checkpoint: the one commit point of a micro-batch across the N partitions of a partitioned store) carries a
manifest, one ``PartitionEntry`` per partition it commits, each a delta or a snapshot of that partition; it
``expand``s into the per-partition records the chain planning works on. A *void* record is a group record that
commits no partition and names earlier group records of its store that count for nothing (``voids``, schema
version 5: a group that landed after gc took parts nobody can put back, ``blobstate.commit.parts.void_group``).
All may name the query and the batch they belong to, and the run of the query (``lineageId``: one lineage of
Spark's offsets log, see ``blobstate.spark.committed.alignment``); a group record may name its partitioning's key
columns and their Spark types (``keyColumns``). Both fields are optional: records written before them still parse.
A group record of a key-grouped store names its number of key groups (``keyGroups``, schema version 6: an older
blobstate refuses the record rather than hash its keys into partitions by another rule; ``blobstate.model.keygroups``),
fixed for the store's life; a group record without it is a store of Spark's plain hash partitioning. A group record
may say where each partition's copies are kept (``replicas``, ``Replica``: the primary's executor and a warm
standby's, with the batch the standby is at): metadata for an operator (``blobstate list``), read by no commit,
restore or plan, so it takes no schema version (an older blobstate ignores it, as any unknown field).

The JSON form is declared once, as msgspec schemas (``RecordDoc``, ``PartitionEntry``, ``KeyColumn``): camelCase,
``schemaVersion`` first, each field decoded within the limits its type declares (integers in range and never a
bool, text and lists bounded, the checkpoint id a token, the kinds a closed set); fields a record leaves out take
their defaults and unknown fields are ignored (a later version may add some). What a type cannot say is checked by
one pass after decoding (``_check``). Records are written as they always were (the same keys in the same order, the
same bytes): a repository written by an older blobstate reads, and an older blobstate reads what this one writes.

An encrypted repository's log holds a record sealed (``SealedRecord``, ``kind`` ``sealed``): store key, generation,
checkpoint id and creation time stay in the clear (a log fences, orders, prunes and de-duplicates by them);
everything else is ``sealed``, base64 of ``nonce | AES-256-GCM(zstd(record JSON)) | tag``, which only
``blobstate.codec.log.SealedCheckpointLog`` seals and opens. ``Checkpoint.from_bytes`` hands such a record back
unopened; its schema is ``SealedDoc``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from blobstate.errors import ConfigurationError, CorruptIndexError, InvalidRecordError
from blobstate.model.keygroups import MAX_KEY_GROUPS
from blobstate.model.layout import StoreKey

CHECKPOINT_SCHEMA_VERSION = 6  # 2: ``kind``, the changelog fields, ``queryId``; 3: groups; 4: inline deltas; 5: voids;
# 6: ``keyGroups``
SNAPSHOT = "snapshot"
DELTA = "delta"
GROUP = "group"
SEALED = "sealed"  # a record of an encrypted repository's log, its body sealed (``SealedRecord``)
MAX_PARTITIONS = 200  # partitions of a group: its record (about 250 bytes per entry) stays under MAX_RECORD_BYTES
MAX_CHANGELOG_BYTES = 1 << 30  # the largest changelog blob a delta record may declare (reads are bounded by it)
MAX_RECORD_BYTES = 64 << 10  # a checkpoint record is a few hundred bytes; anything larger is not one of ours
#: The largest changelog a delta record carries inline (``changelogInline``, bytes before base64) instead of naming a
#: blob (Flink's ``state.storage.fs.memory-threshold``: state below it lives in the checkpoint metadata file). 32 KiB
#: is 43.7 KiB of base64, so the record stays under ``MAX_RECORD_BYTES`` in the clear and sealed (zstd, AES-GCM and
#: base64 again: at most 4/3 of the clear record even when zstd gains nothing), and every log's bounded read,
#: Kafka's fetch of 2 records included, stays as it is. A batch's changelog below it is a few hundred keys.
MAX_INLINE_CHANGELOG_BYTES = 32 << 10
MAX_INDEX_BYTES = 1 << 30  # the largest snapshot index a record may declare (reads are bounded by the declaration)
MAX_KEY_COLUMNS = 32  # key columns a group record may name
MAX_TEXT = 200  # characters of a writer, query or lineage id, a key column's name or type
MAX_VOIDS = 16  # group records one void record names

_I64_MAX = (1 << 63) - 1
Count = Annotated[int, Meta(ge=0, le=_I64_MAX)]  # partitions, ms since the epoch, attempts
# a batch id: -1 is the state before batch 0, an initial state (``blobstate.model.chain.INITIAL_BATCH``)
BatchId = Annotated[int, Meta(ge=-1, le=_I64_MAX)]
Crc32c = Annotated[int, Meta(ge=0, le=0xFFFFFFFF)]  # unsigned
CheckpointId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]  # a token
_ID_PATTERN_ERROR = re.compile(r"Expected `str` matching regex '[^']*'")  # msgspec's words for a bad token
_ERROR_PATH = re.compile(r" - at `\$\.?([^`]*)`$")  # where msgspec says a value is wrong: ``$.partitions[0].crc32c``
Text = Annotated[str, Meta(max_length=MAX_TEXT)]  # printable: ``_check``
ObjectId = Annotated[str, Meta(max_length=4096)]  # an object of the record's own store: ``_check``
Size = Annotated[int, Meta(ge=0, le=max(MAX_INDEX_BYTES, MAX_CHANGELOG_BYTES))]  # bytes of an index or changelog
Generation = Annotated[int, Meta(ge=1, le=_I64_MAX)]  # a record's place in its store's log: 1, 2, ...


class PartitionEntry(msgspec.Struct, frozen=True, rename="camel"):
    """One partition's part of a group record: partition ``partition`` committed a ``delta`` (``blob_id`` is its
    changelog blob) or a ``snapshot`` (``blob_id`` is its snapshot index), of ``size`` bytes with CRC32C ``crc32c``,
    covering batch ``batch_id``. ``checkpoint_id`` names that partition commit (a snapshot index carries it);
    ``attempt`` is the Spark task attempt that wrote it and ``base`` the group generation its writer started from
    (the prepare record's fields, kept for audit). A schema: its JSON form is its fields, in this order, in
    camelCase (``size`` as ``sizeInBytes``)."""

    partition: Count
    kind: Literal["delta", "snapshot"]
    checkpoint_id: CheckpointId
    batch_id: BatchId
    blob_id: ObjectId
    crc32c: Crc32c
    size: Size = msgspec.field(name="sizeInBytes")
    attempt: Count = 0
    base: Count = 0

    def to_json(self) -> dict[str, Any]:
        """The entry's JSON document (every field)."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]


class KeyColumn(msgspec.Struct, frozen=True):
    """A key column of a group's partitioning: its name and its Spark type (``keyColumns`` entries)."""

    name: Text
    type: Text


class Replica(msgspec.Struct, frozen=True, rename="camel"):
    """Where a group record's partition ``partition`` is kept (``replicas``; metadata only): the executor that wrote
    its part of the record (``primary``, a Spark executor location ``executor_<host>_<id>``; ``""``: unknown) and
    its warm standby's executor (``standby``, ``""``: none, ``blobstate.spark.placement.coordinator
    .choose_standbys``) with the batch the standby's copy was last reported at (``standby_batch_id``; None: not
    warm yet)."""

    partition: Count
    primary: Text = ""
    standby: Text = ""
    standby_batch_id: BatchId | None = None


class RecordDoc(msgspec.Struct, frozen=True, rename="camel"):
    """A checkpoint record as it is written (``Checkpoint.to_json``, ``Checkpoint.from_bytes``). The fields after
    ``writerId`` are ``UNSET`` when a record leaves them out: they are written only when they say something."""

    schema_version: Annotated[int, Meta(le=CHECKPOINT_SCHEMA_VERSION)]
    checkpoint_id: CheckpointId
    generation: Generation
    job_name: Text
    task_name: Text
    store_name: Text
    index_blob_id: ObjectId
    index_crc32c: Crc32c = msgspec.field(name="indexCrc32c")  # not camel's indexCrc32C
    index_size_in_bytes: Annotated[int, Meta(ge=0, le=MAX_INDEX_BYTES)]
    created_time_ms: Count
    batch_id: BatchId | None = None
    writer_id: Text = ""
    kind: Literal["snapshot", "delta", "group"] | UnsetType = UNSET
    query_id: Text | UnsetType = UNSET
    lineage_id: Text | UnsetType = UNSET
    changelog_blob_id: ObjectId | UnsetType = UNSET
    changelog_crc32c: Crc32c | UnsetType = msgspec.field(default=UNSET, name="changelogCrc32c")
    changelog_size_in_bytes: Annotated[int, Meta(ge=0, le=MAX_CHANGELOG_BYTES)] | UnsetType = UNSET
    changelog_inline: Annotated[bytes, Meta(max_length=MAX_INLINE_CHANGELOG_BYTES)] | UnsetType = UNSET  # base64
    num_partitions: Count | UnsetType = UNSET
    partitions: Annotated[tuple[PartitionEntry, ...], Meta(max_length=2 * MAX_PARTITIONS)] | UnsetType = UNSET
    key_columns: Annotated[tuple[KeyColumn, ...], Meta(max_length=MAX_KEY_COLUMNS)] | UnsetType = UNSET
    voids: Annotated[tuple[CheckpointId, ...], Meta(max_length=MAX_VOIDS)] | UnsetType = UNSET
    key_groups: Annotated[int, Meta(ge=1, le=MAX_KEY_GROUPS)] | UnsetType = UNSET
    replicas: Annotated[tuple[Replica, ...], Meta(max_length=MAX_PARTITIONS)] | UnsetType = UNSET


class _Kind(msgspec.Struct, frozen=True):
    """A record's ``kind`` alone (every other field skipped, and any value taken): which schema decodes it."""

    kind: Any = None


_DECODER = msgspec.json.Decoder(RecordDoc)
_KIND = msgspec.json.Decoder(_Kind)


def _given(value: Any, default: Any) -> Any:
    return default if value is UNSET else value


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint record in a checkpoint log: which snapshot index is the store's state at ``generation``.

    ``generation`` starts at 1 and grows by one per append; ``index_crc32c`` and ``index_size`` (bytes) protect the
    index blob. ``batch_id`` is the Spark micro-batch the snapshot belongs to, when there is one.
    """

    store_key: StoreKey
    checkpoint_id: str
    generation: int
    index_blob_id: str
    index_crc32c: int
    index_size: int
    created_time_ms: int
    batch_id: int | None = None
    writer_id: str = ""
    schema_version: int = 1
    kind: str = SNAPSHOT
    changelog_blob_id: str = ""
    changelog_crc32c: int = 0
    changelog_size: int = 0
    query_id: str = ""
    num_partitions: int = 0
    partitions: tuple[PartitionEntry, ...] = ()
    lineage_id: str = ""
    key_columns: tuple[tuple[str, str], ...] = ()
    #: a delta's changelog carried in the record itself (``changelog_blob_id`` empty): None when it names a blob
    changelog_inline: bytes | None = None
    #: a void record's: the checkpoint ids of earlier group records of its store that count for nothing
    #: (``blobstate.commit.parts.void_group``: a group landed after gc took parts nobody holds, issue 39 case 7)
    voids: tuple[str, ...] = ()
    #: a group record's number of key groups (``blobstate.model.keygroups``); 0: not a key-grouped store
    key_groups: int = 0
    #: a group record's ``Replica`` per partition (where its primary and standby copies are): metadata only
    replicas: tuple[Replica, ...] = ()

    @property
    def run(self) -> tuple[str, str]:
        """``(query id, lineage id)``: the run of a query this record belongs to (``("", "")``: none named)."""
        return self.query_id, self.lineage_id

    @property
    def is_delta(self) -> bool:
        return self.kind == DELTA

    @property
    def is_group(self) -> bool:
        return self.kind == GROUP

    @property
    def is_inline(self) -> bool:
        """A delta whose changelog the record carries (``changelog_inline``): it references no blob."""
        return self.changelog_inline is not None

    def expand(self) -> list[Checkpoint]:
        """The records this one stands for: a group record's per-partition records (a delta or snapshot record
        each, at the group's generation, ``partition`` set), anything else itself."""
        if not self.is_group:
            return [self]
        out = []
        for e in self.partitions:
            common = dict(store_key=self.store_key, checkpoint_id=e.checkpoint_id, generation=self.generation,
                          created_time_ms=self.created_time_ms, batch_id=e.batch_id, writer_id=self.writer_id,
                          schema_version=self.schema_version, query_id=self.query_id, partition=e.partition,
                          lineage_id=self.lineage_id)
            if e.kind == DELTA:
                out.append(PartitionRecord(index_blob_id="", index_crc32c=0, index_size=0, kind=DELTA,
                                           changelog_blob_id=e.blob_id, changelog_crc32c=e.crc32c,
                                           changelog_size=e.size, **common))
            else:
                out.append(PartitionRecord(index_blob_id=e.blob_id, index_crc32c=e.crc32c, index_size=e.size,
                                           **common))
        return out

    def entry(self, partition: int, kind: str = DELTA) -> PartitionEntry | None:
        """A group record's ``kind`` entry of ``partition`` (None: it commits none)."""
        return next((e for e in self.partitions if e.partition == partition and e.kind == kind), None)

    def with_generation(self, generation: int) -> Checkpoint:
        return replace(self, generation=generation)

    def to_doc(self) -> RecordDoc:
        """The record's JSON document as its schema (``RecordDoc``): the fields of its kind's oldest schema version,
        and the later ones only when they say something (``kind`` and ``queryId`` for anything but a plain snapshot,
        ``lineageId`` when set, a delta's changelog, a group's manifest and key columns)."""
        extended = self.kind != SNAPSHOT or bool(self.query_id)
        version = max(self.schema_version, 3 if self.is_group else 2) if extended else self.schema_version
        later: dict[str, Any] = {"kind": self.kind, "query_id": self.query_id} if extended else {}
        if self.lineage_id:
            later["lineage_id"] = self.lineage_id
        if self.is_inline:  # schema 4: an older blobstate refuses the record rather than misread it
            version = max(version, 4)
            later.update(changelog_crc32c=self.changelog_crc32c, changelog_size_in_bytes=self.changelog_size,
                         changelog_inline=self.changelog_inline)
        elif self.is_delta:
            later.update(changelog_blob_id=self.changelog_blob_id, changelog_crc32c=self.changelog_crc32c,
                         changelog_size_in_bytes=self.changelog_size)
        if self.is_group:
            later.update(num_partitions=self.num_partitions, partitions=self.partitions)
            if self.key_columns:
                later["key_columns"] = tuple(KeyColumn(n, t) for n, t in self.key_columns)
            if self.voids:  # schema 5: an older blobstate refuses a void rather than read a group of no partition
                version = max(version, 5)
                later["voids"] = self.voids
            if self.key_groups:  # schema 6: an older blobstate refuses a key-grouped group rather than misroute keys
                version = max(version, 6)
                later["key_groups"] = self.key_groups
            if self.replicas:  # metadata no reader needs: no schema version, an older blobstate ignores it
                later["replicas"] = self.replicas
        key = self.store_key
        return RecordDoc(version, self.checkpoint_id, self.generation, key.job, key.task, key.store,
                         self.index_blob_id, self.index_crc32c, self.index_size, self.created_time_ms, self.batch_id,
                         self.writer_id, **later)

    def to_json(self) -> dict[str, Any]:
        """The record's JSON document (``to_doc``)."""
        return msgspec.to_builtins(self.to_doc())  # type: ignore[no-any-return]

    def validate(self) -> None:
        """Check this record against its schema before it is written or appended: ``RecordDoc``'s types and limits
        (its document converted by ``msgspec.convert``: an integer in range and never a bool, a token, a bounded
        text or list), then what the schema cannot say (``_check``), then its size (at most ``MAX_RECORD_BYTES``).
        A record not appended yet (``generation`` 0) is checked as the first generation would be. Raises
        ``InvalidRecordError`` naming the first field at fault (``field``: its JSON path, ``partitions[0].crc32c``).
        """
        what = f"{self.kind} checkpoint record {self.checkpoint_id!r}"[:300]
        try:
            doc = msgspec.to_builtins(self.with_generation(self.generation or 1).to_doc())
            msgspec.convert(doc, RecordDoc)
            _check(self)
        except msgspec.ValidationError as exc:
            found = _ERROR_PATH.search(str(exc))
            field = found.group(1) if found else ""
            reason = _ID_PATTERN_ERROR.sub("not a printable token", _ERROR_PATH.sub("", str(exc)))
            raise InvalidRecordError(f"a malformed {what}: {field or 'the record'}: {reason}"[:2000],
                                     field=field) from None
        except _Defect as exc:
            raise InvalidRecordError(f"a malformed {what}: {exc.field}: {exc}"[:2000], field=exc.field) from None
        except (TypeError, ValueError, ConfigurationError) as exc:  # a value no JSON form has (to_builtins)
            raise InvalidRecordError(f"a malformed {what}: {exc}"[:2000]) from None
        size = len(json.dumps(doc, separators=(",", ":")).encode())
        if size > MAX_RECORD_BYTES:
            raise InvalidRecordError(f"a malformed {what}: {size} bytes, larger than any checkpoint record "
                                     f"({MAX_RECORD_BYTES})")

    def to_bytes(self) -> bytes:
        """The record as written: compact JSON in ASCII (the bytes every blobstate version wrote)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    def summary_json(self) -> dict[str, Any]:
        """``checkpointId``, ``generation`` and ``batchId`` (and ``kind`` of a delta): how results of a verb name the
        checkpoint."""
        doc: dict[str, Any] = {"checkpointId": self.checkpoint_id, "generation": self.generation,
                               "batchId": self.batch_id}
        if self.kind != SNAPSHOT:
            doc["kind"] = self.kind
        return doc

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "checkpoint") -> Checkpoint:
        """Decode (``RecordDoc``) and check (``_check``); raises ``CorruptIndexError`` naming ``source`` on any
        defect, and nothing else.

        Beyond the schema's types and limits: the index must be an index of the record's own store (``owns_index``;
        a delta's changelog a blob of it, ``owns_blob``, and its index fields empty), the record itself at most
        ``MAX_RECORD_BYTES``: a record pointing at another store's objects is never trusted.
        """
        try:
            if len(data) > MAX_RECORD_BYTES:
                raise ValueError(f"{len(data)} bytes: larger than any checkpoint record")
            if _KIND.decode(data).kind == SEALED:  # an encrypted repository's (issue 33): SealedRecord
                return SealedRecord.decode(data)
            doc = _DECODER.decode(data)
            record = cls(
                store_key=StoreKey(doc.job_name, doc.task_name, doc.store_name), checkpoint_id=doc.checkpoint_id,
                generation=doc.generation, index_blob_id=doc.index_blob_id, index_crc32c=doc.index_crc32c,
                index_size=doc.index_size_in_bytes, created_time_ms=doc.created_time_ms, batch_id=doc.batch_id,
                writer_id=doc.writer_id, schema_version=doc.schema_version, kind=_given(doc.kind, SNAPSHOT),
                changelog_blob_id=_given(doc.changelog_blob_id, ""), changelog_crc32c=_given(doc.changelog_crc32c, 0),
                changelog_size=_given(doc.changelog_size_in_bytes, 0), query_id=_given(doc.query_id, ""),
                num_partitions=_given(doc.num_partitions, 0), partitions=_given(doc.partitions, ()),
                lineage_id=_given(doc.lineage_id, ""),
                key_columns=tuple((c.name, c.type) for c in _given(doc.key_columns, ())),
                changelog_inline=_given(doc.changelog_inline, None), voids=_given(doc.voids, ()),
                key_groups=_given(doc.key_groups, 0), replicas=_given(doc.replicas, ()))
            _check(record)
            return record
        except (ValueError, TypeError, RecursionError, msgspec.MsgspecError, ConfigurationError) as exc:
            # msgspec's DecodeError and ValidationError are ValueErrors too; an id's pattern is said in words
            reason = _ID_PATTERN_ERROR.sub("not a printable token", str(exc))
            raise CorruptIndexError(f"corrupt checkpoint record {source}: {reason}"[:2000]) from None


class _Defect(ValueError):
    """What ``_check`` finds wrong, naming the ``field`` at fault (its JSON path)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


#: a part's field -> its entry's in a group's manifest (``PartitionEntry``)
_ENTRY_FIELDS = {"indexBlobId": "blobId", "changelogBlobId": "blobId", "batchId": "batchId"}


def _check(record: Checkpoint) -> None:
    """What the schema cannot say (``_Defect``, a ``ValueError``): every text printable, the record's objects those
    of its kind and of its own store, a group's manifest well formed."""
    texts = [("writerId", "writer id", record.writer_id), ("queryId", "query id", record.query_id),
             ("lineageId", "lineage id", record.lineage_id)]
    texts += [("keyColumns", "key column", t) for c in record.key_columns for t in c]
    texts += [("replicas", "replica's executor", t) for r in record.replicas for t in (r.primary, r.standby)]
    for field, name, text in texts:
        if not text.isprintable():
            raise _Defect(field, f"the {name} is not printable text")
    if (record.key_columns or record.voids or record.key_groups or record.replicas) and not record.is_group:
        field = ("keyColumns" if record.key_columns else "keyGroups" if record.key_groups else
                 "replicas" if record.replicas else "voids")
        raise _Defect(field, f"a {record.kind} record names key columns, key groups, replicas or voids")
    if record.is_group:
        _check_group(record)
        return
    _check_part(record)
    if record.partitions or record.num_partitions:
        raise _Defect("partitions", f"a {record.kind} record names partitions")


def _check_part(record: Checkpoint) -> None:
    """A snapshot names an index of its own store and no changelog; a delta a blob of its own store, no index, and
    its batch."""
    key = record.store_key
    if record.kind == SNAPSHOT:
        if not key.owns_index(record.index_blob_id):
            raise _Defect("indexBlobId", f"its index {record.index_blob_id[:200]!r} is not an index of store {key}")
        if record.changelog_blob_id or record.changelog_size or record.changelog_crc32c or record.is_inline:
            raise _Defect("changelogBlobId", "a snapshot record names a changelog")
        return
    if record.is_inline:
        if record.changelog_blob_id or len(record.changelog_inline or b"") != record.changelog_size:
            raise _Defect("changelogInline", "an inline changelog names a blob too or is not of its declared size")
    elif not key.owns_blob(record.changelog_blob_id):
        raise _Defect("changelogBlobId",
                      f"its changelog {record.changelog_blob_id[:200]!r} is not a blob of store {key}")
    if record.index_blob_id or record.index_size or record.index_crc32c:
        raise _Defect("indexBlobId", "a delta record names an index")
    if record.batch_id is None:
        raise _Defect("batchId", "a delta record has no batch id")


def _check_group(record: Checkpoint) -> None:
    """A group record's manifest: 1..MAX_PARTITIONS partitions, each entry of a partition below ``num_partitions``
    (none in a void record, which voids at least one other group),
    at most one delta and one snapshot per partition (a snapshot of the state after an earlier batch), every entry
    valid as the record it expands into; no index or changelog of its own."""
    if record.index_blob_id or record.index_size or record.index_crc32c or record.changelog_blob_id \
            or record.changelog_size or record.changelog_crc32c or record.is_inline:
        raise _Defect("indexBlobId" if record.index_blob_id or record.index_size or record.index_crc32c
                      else "changelogBlobId", "a group record names an index or a changelog of its own")
    if not 1 <= record.num_partitions <= MAX_PARTITIONS:
        raise _Defect("numPartitions", f"a group of {record.num_partitions} partitions (1..{MAX_PARTITIONS})")
    if record.key_groups and not record.num_partitions <= record.key_groups <= MAX_KEY_GROUPS:
        raise _Defect("keyGroups", f"a group of {record.num_partitions} partitions in {record.key_groups} key groups "
                      f"(num_partitions..{MAX_KEY_GROUPS})")
    if not record.partitions and not record.voids:
        raise _Defect("partitions", "a group record commits no partition and voids nothing")
    if record.checkpoint_id in record.voids:
        raise _Defect("voids", "a group record voids itself")
    seen: set[tuple[int, str]] = set()
    for i, e in enumerate(record.partitions):
        if e.partition >= record.num_partitions or (e.partition, e.kind) in seen:
            raise _Defect(f"partitions[{i}].partition",
                          f"partition {e.partition} is out of range or has two {e.kind} entries")
        seen.add((e.partition, e.kind))
    placed = [r.partition for r in record.replicas]
    if any(p >= record.num_partitions for p in placed) or len(set(placed)) != len(placed):
        raise _Defect("replicas", "a replica's partition is out of range or named twice")
    for i, part in enumerate(record.expand()):
        try:
            _check_part(part)
        except _Defect as exc:
            raise _Defect(f"partitions[{i}].{_ENTRY_FIELDS.get(exc.field, 'blobId')}", str(exc)) from None


@dataclass(frozen=True)
class PartitionRecord(Checkpoint):
    """A record of one partition of a group (``Checkpoint.expand``): a delta or snapshot record with ``partition``
    set, never appended by itself."""

    partition: int = 0


# -- the sealed record: how a checkpoint log holds a record of an encrypted repository (issue 33) ---------------
#: The version a sealed envelope is written with: its shape has not changed since version 3 (what it seals may be
#: of a later version), so an older blobstate with the key still reads the envelopes of the records it can open.
SEALED_SCHEMA_VERSION = 3


class SealedDoc(msgspec.Struct, frozen=True, rename="camel"):
    """A sealed record as it is written (``SealedRecord.to_json``, ``SealedRecord.decode``): every field
    required, in this order."""

    schema_version: Annotated[int, Meta(le=SEALED_SCHEMA_VERSION)]
    kind: Literal["sealed"]
    checkpoint_id: CheckpointId
    generation: Generation
    job_name: Text
    task_name: Text
    store_name: Text
    created_time_ms: Count
    sealed: Annotated[str, Meta(max_length=MAX_RECORD_BYTES)]


_SEALED_DECODER = msgspec.json.Decoder(SealedDoc)


@dataclass(frozen=True)
class SealedRecord(Checkpoint):
    """A record as an encrypted repository's log stores it: ``sealed`` holds the record (see the module
    docstring); only ``blobstate.codec.log.SealedCheckpointLog`` opens it, and nothing else ever sees one."""

    sealed: str = ""

    @property
    def body(self) -> bytes:
        """The sealed bytes (``nonce | ciphertext | tag``)."""
        return base64.b64decode(self.sealed, validate=True)

    def to_json(self) -> dict[str, Any]:
        key = self.store_key
        doc = SealedDoc(SEALED_SCHEMA_VERSION, SEALED, self.checkpoint_id, self.generation, key.job, key.task,
                        key.store, self.created_time_ms, self.sealed)
        return msgspec.to_builtins(doc)  # type: ignore[no-any-return]

    @classmethod
    def of(cls, key: StoreKey, checkpoint_id: str, generation: int, created_time_ms: int, body: bytes) -> SealedRecord:
        return cls(key, checkpoint_id, generation, "", 0, 0, created_time_ms, kind=SEALED,
                   schema_version=SEALED_SCHEMA_VERSION, sealed=base64.b64encode(body).decode())

    @classmethod
    def decode(cls, data: bytes) -> SealedRecord:
        """The envelope ``data`` holds (``SealedDoc``); ``ValueError`` (msgspec's errors are ones),
        ``ConfigurationError`` (a store key part) on a wrong shape: ``Checkpoint.from_bytes``, which calls it, turns
        them into ``CorruptIndexError``."""
        doc = _SEALED_DECODER.decode(data)
        try:
            base64.b64decode(doc.sealed, validate=True)
        except binascii.Error:
            raise ValueError("the sealed body is not base64") from None
        return cls(StoreKey(doc.job_name, doc.task_name, doc.store_name), doc.checkpoint_id, doc.generation, "", 0, 0,
                   doc.created_time_ms, kind=SEALED, schema_version=doc.schema_version, sealed=doc.sealed)
