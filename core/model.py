"""The data model: store keys and checkpoint records, with their JSON forms (snapshot indexes: ``blobstate.index``).

A checkpoint record carries the index's blob id, size (bytes) and CRC32C, so a corrupt or swapped index is
detected before it is used.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from blobstate.errors import ConfigurationError, CorruptIndexError

CHECKPOINT_SCHEMA_VERSION = 1
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
    schema_version: int = CHECKPOINT_SCHEMA_VERSION

    def with_generation(self, generation: int) -> Checkpoint:
        return replace(self, generation=generation)

    def to_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": self.schema_version,
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

    def to_bytes(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    def summary_json(self) -> dict[str, Any]:
        """``checkpointId``, ``generation`` and ``batchId``: how results of a verb name the checkpoint."""
        return {"checkpointId": self.checkpoint_id, "generation": self.generation, "batchId": self.batch_id}

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "checkpoint") -> Checkpoint:
        """Parse and validate; raises ``CorruptIndexError`` naming ``source`` on any defect.

        Beyond the JSON types: the index must be an index of the record's own store (``owns_index``), the
        checkpoint id a printable token, the declared index size at most ``MAX_INDEX_BYTES``, the record itself at
        most ``MAX_RECORD_BYTES``: a record pointing at another store's objects is never trusted.
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
            )
            if not _CHECKPOINT_ID.match(record.checkpoint_id):
                raise ValueError("the checkpoint id is not a printable token")
            if not record.store_key.owns_index(record.index_blob_id):
                raise ValueError(f"its index {record.index_blob_id[:200]!r} is not an index of store "
                                 f"{record.store_key}")
            if record.index_size > MAX_INDEX_BYTES:
                raise ValueError(f"it declares an index of {record.index_size} bytes")
            if len(record.writer_id) > 200 or not record.writer_id.isprintable():
                raise ValueError("the writer id is not printable text of at most 200 characters")
            return record
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError, ConfigurationError) as exc:
            raise CorruptIndexError(f"corrupt checkpoint record {source}: {exc}") from None
