"""The data model: store keys and checkpoint records, with their JSON forms (snapshot indexes: ``blobstate.index``).

A checkpoint record is one of two kinds. A **snapshot** record carries its index's blob id, size (bytes) and
CRC32C, so a corrupt or swapped index is detected before it is used. A **delta** record (Spark's RocksDB changelog
checkpointing, Flink's changelog state backend) carries one changelog blob instead: the writes of one batch,
applied in order on top of the newest snapshot below it (``blobstate.chain``). Both may name the query and the
batch they belong to.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from blobstate.errors import ConfigurationError, CorruptIndexError

CHECKPOINT_SCHEMA_VERSION = 2  # 2: ``kind``, the changelog fields and ``queryId`` (records without them stay 1)
SNAPSHOT = "snapshot"
DELTA = "delta"
MAX_CHANGELOG_BYTES = 1 << 30  # the largest changelog blob a delta record may declare (reads are bounded by it)
MAX_RECORD_BYTES = 64 << 10  # a checkpoint record is a few hundred bytes; anything larger is not one of ours
MAX_INDEX_BYTES = 1 << 30  # the largest snapshot index a record may declare (reads are bounded by the declaration)
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

    @property
    def is_delta(self) -> bool:
        return self.kind == DELTA

    def with_generation(self, generation: int) -> Checkpoint:
        return replace(self, generation=generation)

    def to_json(self) -> dict[str, Any]:
        extended = self.kind != SNAPSHOT or bool(self.query_id)
        doc: dict[str, Any] = {
            "schemaVersion": max(self.schema_version, 2) if extended else self.schema_version,
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
        if self.is_delta:
            doc.update({"changelogBlobId": self.changelog_blob_id, "changelogCrc32c": self.changelog_crc32c,
                        "changelogSizeInBytes": self.changelog_size})
        return doc

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    def summary_json(self) -> dict[str, Any]:
        """``checkpointId``, ``generation`` and ``batchId`` (and ``kind`` of a delta): how results of a verb name the
        checkpoint."""
        doc: dict[str, Any] = {"checkpointId": self.checkpoint_id, "generation": self.generation,
                               "batchId": self.batch_id}
        if self.is_delta:
            doc["kind"] = DELTA
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
            )
            if not _CHECKPOINT_ID.match(record.checkpoint_id):
                raise ValueError("the checkpoint id is not a printable token")
            _check_kind(record)
            for name, text in (("writer id", record.writer_id), ("query id", record.query_id)):
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
    else:
        raise ValueError(f"unknown record kind {record.kind[:40]!r}")
