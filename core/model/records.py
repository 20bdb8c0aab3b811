"""Store keys and checkpoint records, with their JSON forms (snapshot indexes: ``blobstate.model.index``).

A checkpoint record is one of three kinds. A **snapshot** record carries its index's blob id, size (bytes) and
CRC32C, so a corrupt or swapped index is detected before it is used. A **delta** record (Spark's RocksDB changelog
checkpointing, Flink's changelog state backend) carries one changelog blob instead: the writes of one batch,
applied in order on top of the newest snapshot below it (``blobstate.model.chain``). A **group** record (a group
checkpoint: the one commit point of a micro-batch across the N partitions of a partitioned store) carries a
manifest, one ``PartitionEntry`` per partition it commits, each a delta or a snapshot of that partition; it
``expand``s into the per-partition records the chain planning works on. All may name the query and the batch they
belong to, and the run of the query (``lineageId``: one lineage of Spark's offsets log, see
``blobstate.spark.alignment``); a group record may name its partitioning's key columns and their Spark types
(``keyColumns``). Both fields are optional: records written before them still parse.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from blobstate.errors import ConfigurationError, CorruptIndexError

CHECKPOINT_SCHEMA_VERSION = 3  # 2: ``kind``, the changelog fields and ``queryId``; 3: group records
SNAPSHOT = "snapshot"
DELTA = "delta"
GROUP = "group"
MAX_PARTITIONS = 200  # partitions of a group: its record (about 250 bytes per entry) stays under MAX_RECORD_BYTES
MAX_CHANGELOG_BYTES = 1 << 30  # the largest changelog blob a delta record may declare (reads are bounded by it)
MAX_RECORD_BYTES = 64 << 10  # a checkpoint record is a few hundred bytes; anything larger is not one of ours
MAX_INDEX_BYTES = 1 << 30  # the largest snapshot index a record may declare (reads are bounded by the declaration)
MAX_KEY_COLUMNS = 32  # key columns a group record may name
_CHECKPOINT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

_KEY_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,199}$")


@dataclass(frozen=True, order=True)
class StoreKey:
    """Identifies one store: ``job / task / store``. Every object a store writes lives under ``prefix``."""

    job: str
    task: str
    store: str

    def __post_init__(self) -> None:
        for part in (self.job, self.task, self.store):
            if not _KEY_PART.match(part) or part in (".", ".."):
                raise ConfigurationError(
                    f"invalid store key part {part!r}: use letters, digits, '.', '_', '=', '-' (at most 200)"
                )

    @property
    def prefix(self) -> str:
        """The store's folder inside a repository, ``job/task/store``."""
        return f"{self.job}/{self.task}/{self.store}"

    def __str__(self) -> str:
        return self.prefix

    def owns_blob(self, blob_id: str) -> bool:
        """True for a blob id of this store's own ``blobs/`` folder (``<prefix>/blobs/<32 hex>``)."""
        return re.fullmatch(f"{re.escape(self.prefix)}/blobs/[0-9a-f]{{32}}", blob_id) is not None

    def owns_index(self, blob_id: str) -> bool:
        """True for an index id of this store's own ``indexes/`` folder (``<prefix>/indexes/<32 hex>.json``)."""
        return re.fullmatch(f"{re.escape(self.prefix)}/indexes/[0-9a-f]{{32}}\\.json", blob_id) is not None

    @classmethod
    def parse(cls, text: str) -> StoreKey:
        """Parse ``job/task/store``; raises ``ConfigurationError`` on another shape."""
        parts = text.split("/")
        if len(parts) != 3:
            raise ConfigurationError(f"store key must be job/task/store, got {text!r}")
        return cls(*parts)

    @classmethod
    def for_directory(cls, directory: str, *, job: str = "default", task: str = "0",
                      store: str | None = None) -> StoreKey:
        """The key of the store kept in ``directory``: ``store`` defaults to the directory's name."""
        import os

        return cls(job, task, store or os.path.basename(os.path.abspath(directory).rstrip("/")))


def json_str(value: Any) -> str:
    """``value`` when it is a JSON string; ``TypeError`` otherwise (parsers turn it into their typed error)."""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def json_int(value: Any) -> int:
    """``value`` when it is a non-negative JSON integer (not a bool); ``TypeError`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"expected a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True)
class PartitionEntry:
    """One partition's part of a group record: partition ``partition`` committed a ``delta`` (``blob_id`` is its
    changelog blob) or a ``snapshot`` (``blob_id`` is its snapshot index), of ``size`` bytes with CRC32C ``crc32c``,
    covering batch ``batch_id``. ``checkpoint_id`` names that partition commit (a snapshot index carries it);
    ``attempt`` is the Spark task attempt that wrote it and ``base`` the group generation its writer started from
    (the prepare record's fields, kept for audit)."""

    partition: int
    kind: str
    checkpoint_id: str
    batch_id: int
    blob_id: str
    crc32c: int
    size: int
    attempt: int = 0
    base: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "kind": self.kind, "checkpointId": self.checkpoint_id,
                "batchId": self.batch_id, "blobId": self.blob_id, "crc32c": self.crc32c, "sizeInBytes": self.size,
                "attempt": self.attempt, "base": self.base}

    @classmethod
    def from_json(cls, doc: Any) -> PartitionEntry:
        """Parse one manifest entry; ``TypeError``/``KeyError`` on a wrong shape (the record parser reports it)."""
        if not isinstance(doc, dict):
            raise TypeError("a partition entry is not an object")
        return cls(json_int(doc["partition"]), json_str(doc["kind"]), json_str(doc["checkpointId"]),
                   json_int(doc["batchId"]), json_str(doc["blobId"]), json_int(doc["crc32c"]),
                   json_int(doc["sizeInBytes"]), json_int(doc.get("attempt", 0)), json_int(doc.get("base", 0)))


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

    def to_json(self) -> dict[str, Any]:
        extended = self.kind != SNAPSHOT or bool(self.query_id)
        version = max(self.schema_version, 3 if self.is_group else 2) if extended else self.schema_version
        doc: dict[str, Any] = {
            "schemaVersion": version,
            "checkpointId": self.checkpoint_id,
            "generation": self.generation,
            "jobName": self.store_key.job,
            "taskName": self.store_key.task,
            "storeName": self.store_key.store,
            "indexBlobId": self.index_blob_id,
            "indexCrc32c": self.index_crc32c,
            "indexSizeInBytes": self.index_size,
            "createdTimeMs": self.created_time_ms,
            "batchId": self.batch_id,
            "writerId": self.writer_id,
        }
        if extended:
            doc.update({"kind": self.kind, "queryId": self.query_id})
        if self.lineage_id:
            doc["lineageId"] = self.lineage_id
        if self.is_delta:
            doc.update({"changelogBlobId": self.changelog_blob_id, "changelogCrc32c": self.changelog_crc32c,
                        "changelogSizeInBytes": self.changelog_size})
        if self.is_group:
            doc.update({"numPartitions": self.num_partitions, "partitions": [e.to_json() for e in self.partitions]})
            if self.key_columns:
                doc["keyColumns"] = [{"name": n, "type": t} for n, t in self.key_columns]
        return doc

    def to_bytes(self) -> bytes:
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
        """Parse and validate; raises ``CorruptIndexError`` naming ``source`` on any defect.

        Beyond the JSON types: the index must be an index of the record's own store (``owns_index``; a delta's
        changelog a blob of it, ``owns_blob``, and its index fields empty), the checkpoint id a printable token,
        the declared index size at most ``MAX_INDEX_BYTES`` (a changelog's ``MAX_CHANGELOG_BYTES``), the record
        itself at most ``MAX_RECORD_BYTES``: a record pointing at another store's objects is never trusted.
        """
        try:
            if len(data) > MAX_RECORD_BYTES:
                raise ValueError(f"{len(data)} bytes: larger than any checkpoint record")
            doc = json.loads(data)
            if isinstance(doc, dict) and doc.get("kind") == "sealed":  # an encrypted repository's (issue 33)
                from blobstate.model.sealed import SealedRecord

                return SealedRecord.from_doc(doc)
            version = doc["schemaVersion"]
            if not isinstance(version, int) or version > CHECKPOINT_SCHEMA_VERSION:
                raise ValueError(f"unsupported schemaVersion {version!r}")
            batch = doc.get("batchId")
            generation = json_int(doc["generation"])
            if generation < 1:
                raise ValueError("generation must be >= 1")
            record = cls(
                store_key=StoreKey(json_str(doc["jobName"]), json_str(doc["taskName"]), json_str(doc["storeName"])),
                checkpoint_id=json_str(doc["checkpointId"]),
                generation=generation,
                index_blob_id=json_str(doc["indexBlobId"]),
                index_crc32c=json_int(doc["indexCrc32c"]),
                index_size=json_int(doc["indexSizeInBytes"]),
                created_time_ms=json_int(doc["createdTimeMs"]),
                batch_id=None if batch is None else json_int(batch),
                writer_id=json_str(doc.get("writerId", "")),
                schema_version=version,
                kind=json_str(doc.get("kind", SNAPSHOT)),
                changelog_blob_id=json_str(doc.get("changelogBlobId", "")),
                changelog_crc32c=json_int(doc.get("changelogCrc32c", 0)),
                changelog_size=json_int(doc.get("changelogSizeInBytes", 0)),
                query_id=json_str(doc.get("queryId", "")),
                num_partitions=json_int(doc.get("numPartitions", 0)),
                partitions=tuple(PartitionEntry.from_json(e) for e in _json_list(doc.get("partitions", []))),
                lineage_id=json_str(doc.get("lineageId", "")),
                key_columns=_key_columns(doc.get("keyColumns", [])),
            )
            if not _CHECKPOINT_ID.match(record.checkpoint_id):
                raise ValueError("the checkpoint id is not a printable token")
            _check_kind(record)
            if record.key_columns and not record.is_group:
                raise ValueError(f"a {record.kind} record names key columns")
            texts = [("writer id", record.writer_id), ("query id", record.query_id),
                     ("lineage id", record.lineage_id)] + [("key column", t) for c in record.key_columns for t in c]
            for name, text in texts:
                if len(text) > 200 or not text.isprintable():
                    raise ValueError(f"the {name} is not printable text of at most 200 characters")
            return record
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, ConfigurationError) as exc:
            raise CorruptIndexError(f"corrupt checkpoint record {source}: {exc}") from None


def _check_kind(record: Checkpoint) -> None:
    """``ValueError`` unless the record's objects match its kind and belong to its own store."""
    key = record.store_key
    if record.kind == SNAPSHOT:
        if not key.owns_index(record.index_blob_id):
            raise ValueError(f"its index {record.index_blob_id[:200]!r} is not an index of store {key}")
        if record.index_size > MAX_INDEX_BYTES:
            raise ValueError(f"it declares an index of {record.index_size} bytes")
        if record.changelog_blob_id or record.changelog_size or record.changelog_crc32c:
            raise ValueError("a snapshot record names a changelog")
    elif record.kind == DELTA:
        if not key.owns_blob(record.changelog_blob_id):
            raise ValueError(f"its changelog {record.changelog_blob_id[:200]!r} is not a blob of store {key}")
        if record.changelog_size > MAX_CHANGELOG_BYTES:
            raise ValueError(f"it declares a changelog of {record.changelog_size} bytes")
        if record.index_blob_id or record.index_size or record.index_crc32c:
            raise ValueError("a delta record names an index")
        if record.batch_id is None:
            raise ValueError("a delta record has no batch id")
    elif record.kind == GROUP:
        _check_group(record)
    else:
        raise ValueError(f"unknown record kind {record.kind[:40]!r}")
    if record.kind != GROUP and (record.partitions or record.num_partitions):
        raise ValueError(f"a {record.kind} record names partitions")


def _check_group(record: Checkpoint) -> None:
    """``ValueError`` unless a group record's manifest is well formed: 1..MAX_PARTITIONS partitions, each entry of
    a partition below ``num_partitions``, at most one delta and one snapshot per partition (a snapshot of the state
    after an earlier batch), every entry valid as the record it expands into."""
    if record.index_blob_id or record.index_size or record.index_crc32c or record.changelog_blob_id \
            or record.changelog_size or record.changelog_crc32c:
        raise ValueError("a group record names an index or a changelog of its own")
    if not 1 <= record.num_partitions <= MAX_PARTITIONS:
        raise ValueError(f"a group of {record.num_partitions} partitions (1..{MAX_PARTITIONS})")
    if not record.partitions:
        raise ValueError("a group record commits no partition")
    seen: set[tuple[int, str]] = set()
    for e in record.partitions:
        if e.partition >= record.num_partitions or (e.partition, e.kind) in seen:
            raise ValueError(f"partition {e.partition} is out of range or has two {e.kind[:40]} entries")
        seen.add((e.partition, e.kind))
        if e.kind not in (DELTA, SNAPSHOT):
            raise ValueError(f"partition {e.partition} has the entry kind {e.kind[:40]!r}")
        if not _CHECKPOINT_ID.match(e.checkpoint_id):
            raise ValueError(f"the checkpoint id of partition {e.partition} is not a printable token")
    for part in record.expand():
        _check_kind(part)


def _key_columns(value: Any) -> tuple[tuple[str, str], ...]:
    """A group record's ``keyColumns``: ``[{"name": ..., "type": ...}]`` in partitioning order."""
    columns = _json_list(value)
    if len(columns) > MAX_KEY_COLUMNS:
        raise ValueError(f"{len(columns)} key columns (at most {MAX_KEY_COLUMNS})")
    out = []
    for c in columns:
        if not isinstance(c, dict):
            raise TypeError("a key column is not an object")
        out.append((json_str(c["name"]), json_str(c["type"])))
    return tuple(out)


def _json_list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class PartitionRecord(Checkpoint):
    """A record of one partition of a group (``Checkpoint.expand``): a delta or snapshot record with ``partition``
    set, never appended by itself."""

    partition: int = 0
