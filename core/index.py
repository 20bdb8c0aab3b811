"""The snapshot index (Samza's ``IndexBlob`` schema: ``SnapshotIndex`` / ``DirIndex`` / ``FileIndex``), in camelCase
JSON with ``schemaVersion`` first: the tree of a store's files at one checkpoint and the blobs that hold them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import CorruptIndexError
from blobstate.model import StoreKey, json_int, json_str

INDEX_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FileBlob:
    """One chunk of a file: the blob holding bytes ``[offset, offset + size)`` of the file."""

    blob_id: str
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {"blobId": self.blob_id, "offset": self.offset}


@dataclass(frozen=True)
class FileIndex:
    """A file of a snapshot: its name (relative to its directory), chunks, size in bytes and CRC32C (unsigned)."""

    file_name: str
    blobs: tuple[FileBlob, ...]
    size_in_bytes: int
    crc32c: int
    mtime: int = 0
    ctime: int = 0
    attribs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "fileName": self.file_name,
            "blobs": [b.to_json() for b in self.blobs],
            "mtime": self.mtime,
            "ctime": self.ctime,
            "sizeInBytes": self.size_in_bytes,
            "crc32c": self.crc32c,
            "attribs": self.attribs,
        }

    def chunk_ranges(self) -> Iterator[tuple[FileBlob, int]]:
        """Yield ``(blob, length in bytes)`` in file order."""
        for i, blob in enumerate(self.blobs):
            end = self.blobs[i + 1].offset if i + 1 < len(self.blobs) else self.size_in_bytes
            yield blob, end - blob.offset

    def same_content(self, size: int, crc: int) -> bool:
        """True when a file of ``size`` bytes and CRC32C ``crc`` has this file's content (never by name alone)."""
        return self.size_in_bytes == size and self.crc32c == crc


@dataclass(frozen=True)
class DirIndex:
    """A directory of a snapshot: files and subdirectories present, and those this snapshot dropped."""

    dir_name: str
    files_present: tuple[FileIndex, ...] = ()
    files_removed: tuple[FileIndex, ...] = ()
    sub_dirs_present: tuple[DirIndex, ...] = ()
    sub_dirs_removed: tuple[DirIndex, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "dirName": self.dir_name,
            "filesPresent": [f.to_json() for f in self.files_present],
            "filesRemoved": [f.to_json() for f in self.files_removed],
            "subDirectoriesPresent": [d.to_json() for d in self.sub_dirs_present],
            "subDirectoriesRemoved": [d.to_json() for d in self.sub_dirs_removed],
        }

    def walk_present(self, base: str = "") -> Iterator[tuple[str, FileIndex]]:
        """Yield ``(relative path with '/', file)`` for every file present, recursively."""
        for f in self.files_present:
            yield (f"{base}{f.file_name}", f)
        for d in self.sub_dirs_present:
            yield from d.walk_present(f"{base}{d.dir_name}/")

    def walk_removed(self) -> Iterator[FileIndex]:
        """Yield every file this snapshot dropped: removed files, and all files of removed subdirectories."""
        yield from self.files_removed
        for d in self.sub_dirs_present:
            yield from d.walk_removed()
        for d in self.sub_dirs_removed:
            yield from (f for _, f in d.walk_present())
            yield from d.walk_removed()


@dataclass(frozen=True)
class SnapshotIndex:
    """A snapshot of one store at one checkpoint (Samza's ``SnapshotIndex``): the tree of files and their blobs.

    Beyond Samza's schema: ``batchId`` (the stream batch), ``storeType`` (the local store plugin that made it) and
    ``retainCheckpoints`` (the retention its writer applies, so cleanup elsewhere applies the same).
    """

    checkpoint_id: str
    created_time_ms: int
    job_name: str
    job_instance: str
    task_name: str
    store_name: str
    dir_index: DirIndex
    prev_snapshot_index_blob_id: str | None = None
    batch_id: int | None = None
    store_type: str | None = None
    retain: int | None = None
    schema_version: int = INDEX_SCHEMA_VERSION

    @property
    def store_key(self) -> StoreKey:
        return StoreKey(self.job_name, self.task_name, self.store_name)

    def files(self) -> dict[str, FileIndex]:
        """Every file present, by relative path (``/``-separated)."""
        return dict(self.dir_index.walk_present())

    def referenced_blob_ids(self) -> set[str]:
        """Blob ids of every chunk of every file present (not the index itself)."""
        return {b.blob_id for _, f in self.dir_index.walk_present() for b in f.blobs}

    def removed_blob_ids(self) -> set[str]:
        """Blob ids of the files this snapshot dropped relative to its predecessor."""
        return {b.blob_id for f in self.dir_index.walk_removed() for b in f.blobs}

    def total_bytes(self) -> int:
        return sum(f.size_in_bytes for _, f in self.dir_index.walk_present())

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "schemaVersion": self.schema_version,
            "checkpointId": self.checkpoint_id,
            "createdTimeMs": self.created_time_ms,
            "jobName": self.job_name,
            "jobInstance": self.job_instance,
            "taskName": self.task_name,
            "storeName": self.store_name,
            "dirIndex": self.dir_index.to_json(),
            "prevSnapshotIndexBlobId": self.prev_snapshot_index_blob_id,
        }
        if self.batch_id is not None:
            doc["batchId"] = self.batch_id
        if self.store_type is not None:
            doc["storeType"] = self.store_type
        if self.retain is not None:
            doc["retainCheckpoints"] = self.retain
        return doc

    def to_bytes(self) -> bytes:
        """Canonical UTF-8 JSON (stable key order, no whitespace)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "index") -> SnapshotIndex:
        """Parse and validate; raises ``CorruptIndexError`` naming ``source`` on any defect."""
        try:
            doc = json.loads(data)
            return cls.from_json(doc)
        except CorruptIndexError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CorruptIndexError(f"corrupt snapshot index {source}: {exc!r}") from None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> SnapshotIndex:
        version = doc["schemaVersion"]
        if not isinstance(version, int) or version > INDEX_SCHEMA_VERSION:
            raise CorruptIndexError(f"unsupported snapshot index schemaVersion {version!r}")
        batch = doc.get("batchId")
        return cls(
            schema_version=version,
            checkpoint_id=json_str(doc["checkpointId"]),
            created_time_ms=json_int(doc["createdTimeMs"]),
            job_name=json_str(doc["jobName"]),
            job_instance=json_str(doc["jobInstance"]),
            task_name=json_str(doc["taskName"]),
            store_name=json_str(doc["storeName"]),
            dir_index=_dir_from_json(doc["dirIndex"]),
            prev_snapshot_index_blob_id=doc.get("prevSnapshotIndexBlobId"),
            batch_id=None if batch is None else json_int(batch),
            store_type=None if doc.get("storeType") is None else json_str(doc["storeType"]),
            retain=None if doc.get("retainCheckpoints") is None else json_int(doc["retainCheckpoints"]),
        )


def _file_from_json(doc: dict[str, Any]) -> FileIndex:
    size = json_int(doc["sizeInBytes"])
    blobs = tuple(FileBlob(json_str(b["blobId"]), json_int(b["offset"])) for b in doc["blobs"])
    offsets = [b.offset for b in blobs]
    if offsets != sorted(set(offsets)) or (blobs and offsets[0] != 0) or (offsets and offsets[-1] > size):
        raise TypeError(f"bad chunk offsets {offsets} for a file of {size} bytes")
    if not blobs and size:
        raise TypeError("a non-empty file without blobs")
    return FileIndex(
        file_name=json_str(doc["fileName"]),
        blobs=blobs,
        size_in_bytes=size,
        crc32c=json_int(doc["crc32c"]),
        mtime=int(doc.get("mtime", 0)),
        ctime=int(doc.get("ctime", 0)),
        attribs=dict(doc.get("attribs") or {}),
    )


def _dir_from_json(doc: dict[str, Any]) -> DirIndex:
    return DirIndex(
        dir_name=json_str(doc["dirName"]),
        files_present=tuple(_file_from_json(f) for f in doc["filesPresent"]),
        files_removed=tuple(_file_from_json(f) for f in doc.get("filesRemoved", ())),
        sub_dirs_present=tuple(_dir_from_json(d) for d in doc.get("subDirectoriesPresent", ())),
        sub_dirs_removed=tuple(_dir_from_json(d) for d in doc.get("subDirectoriesRemoved", ())),
    )


