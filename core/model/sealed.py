"""The sealed checkpoint record: how a checkpoint log holds a record of an encrypted repository.

A checkpoint log fences, orders and prunes by store key and generation, makes a re-append idempotent by checkpoint
id, and the SQL log keeps the creation time in a column of its own: those stay in the clear. Everything else (the
index or changelog it names, sizes and CRC32C, batch, query, writer, partitions) is sealed in ``sealed``, base64 of
``nonce | AES-256-GCM(zstd(record JSON)) | tag`` bound to the repository, the store key, the generation and the
checkpoint id (``blobstate.codec.log.SealedCheckpointLog`` seals and opens it; a log plugin stores it like any
record, through ``Checkpoint.to_bytes`` and ``Checkpoint.from_bytes``)::

    {"schemaVersion": 3, "kind": "sealed", "checkpointId": "...", "generation": 7, "jobName": "...",
     "taskName": "...", "storeName": "...", "createdTimeMs": 1700000000000, "sealed": "<base64>"}
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from blobstate.model.records import (
    _CHECKPOINT_ID,
    CHECKPOINT_SCHEMA_VERSION,
    MAX_RECORD_BYTES,
    Checkpoint,
    StoreKey,
    json_int,
    json_str,
)

SEALED = "sealed"


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
        return {"schemaVersion": CHECKPOINT_SCHEMA_VERSION, "kind": SEALED, "checkpointId": self.checkpoint_id,
                "generation": self.generation, "jobName": self.store_key.job, "taskName": self.store_key.task,
                "storeName": self.store_key.store, "createdTimeMs": self.created_time_ms, "sealed": self.sealed}

    @classmethod
    def of(cls, key: StoreKey, checkpoint_id: str, generation: int, created_time_ms: int, body: bytes) -> SealedRecord:
        return cls(key, checkpoint_id, generation, "", 0, 0, created_time_ms, kind=SEALED,
                   schema_version=CHECKPOINT_SCHEMA_VERSION, sealed=base64.b64encode(body).decode())

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> SealedRecord:
        """The envelope in ``doc``; ``ValueError``, ``TypeError`` or ``KeyError`` on a wrong shape
        (``Checkpoint.from_bytes`` turns them into ``CorruptIndexError``)."""
        generation = json_int(doc["generation"])
        if generation < 1:
            raise ValueError("generation must be >= 1")
        checkpoint_id = json_str(doc["checkpointId"])
        if not _CHECKPOINT_ID.match(checkpoint_id):
            raise ValueError("the checkpoint id is not a printable token")
        sealed = json_str(doc["sealed"])
        if len(sealed) > MAX_RECORD_BYTES:
            raise ValueError("a sealed body larger than any checkpoint record")
        try:
            base64.b64decode(sealed, validate=True)
        except binascii.Error:
            raise ValueError("the sealed body is not base64") from None
        key = StoreKey(json_str(doc["jobName"]), json_str(doc["taskName"]), json_str(doc["storeName"]))
        return cls(key, checkpoint_id, generation, "", 0, 0, json_int(doc["createdTimeMs"]), kind=SEALED,
                   schema_version=json_int(doc["schemaVersion"]), sealed=sealed)
