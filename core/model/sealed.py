"""The sealed checkpoint record: how a checkpoint log holds a record of an encrypted repository.

A checkpoint log fences, orders and prunes by store key and generation, makes a re-append idempotent by checkpoint
id, and the SQL log keeps the creation time in a column of its own: those stay in the clear. Everything else (the
index or changelog it names, sizes and CRC32C, batch, query, writer, partitions) is sealed in ``sealed``, base64 of
``nonce | AES-256-GCM(zstd(record JSON)) | tag`` bound to the repository, the store key, the generation and the
checkpoint id (``blobstate.codec.log.SealedCheckpointLog`` seals and opens it; a log plugin stores it like any
record, through ``Checkpoint.to_bytes`` and ``Checkpoint.from_bytes``, which hands a record of ``kind`` ``sealed``
to this module)::

    {"schemaVersion": 3, "kind": "sealed", "checkpointId": "...", "generation": 7, "jobName": "...",
     "taskName": "...", "storeName": "...", "createdTimeMs": 1700000000000, "sealed": "<base64>"}

Its schema is ``SealedDoc`` (msgspec, with the limits of ``blobstate.model.records``' own fields; the sealed body
at most ``MAX_RECORD_BYTES`` characters of base64).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from blobstate.model.records import (
    MAX_RECORD_BYTES,
    SEALED,
    Checkpoint,
    CheckpointId,
    Count,
    Generation,
    StoreKey,
    Text,
)

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


_DECODER = msgspec.json.Decoder(SealedDoc)


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
        doc = _DECODER.decode(data)
        try:
            base64.b64decode(doc.sealed, validate=True)
        except binascii.Error:
            raise ValueError("the sealed body is not base64") from None
        return cls(StoreKey(doc.job_name, doc.task_name, doc.store_name), doc.checkpoint_id, doc.generation, "", 0, 0,
                   doc.created_time_ms, kind=SEALED, schema_version=doc.schema_version, sealed=doc.sealed)
