"""The snapshot index (Samza's ``IndexBlob`` schema: ``SnapshotIndex`` / ``DirIndex`` / ``FileIndex``), in camelCase
JSON with ``schemaVersion`` first: the tree of a store's files at one checkpoint and the blobs that hold them.

Schema version 2 (written now; version 1 stays readable) adds, all optional so a version-1 index parses as before:

- on a file: ``mode`` (permission bits, ``st_mode & 0o7777``), ``mtimeNs`` (ns since the epoch) and
  ``contentHash`` (``"xxh3-128:<32 hex>"``, for files that can change in place; immutable files have CRC32C only);
- on a directory: ``mode``, ``mtimeNs``, and ``symlinksPresent`` [{``linkName``, ``target``, ``mtimeNs``}]
  (symbolic links, restored as links, never followed);
- a directory listed in ``subDirectoriesPresent`` is present even when it holds nothing (version 1 left empty
  directories out).

Parsing (``SnapshotIndex.from_bytes``) trusts nothing: any defect is a ``CorruptIndexError`` (exit code 3), never
another exception. Every name is one valid path component (``blobstate.local.paths.check_name``), a directory holds each
name once (files, subdirectories and links together), nesting is at most ``paths.MAX_DEPTH`` levels, numbers are
integers in range (no ``1e999``, no ``NaN``), and every blob id lies under the index's own store key,
``<job>/<task>/<store>/blobs/<32 hex>`` (``prevSnapshotIndexBlobId`` under its ``indexes/``): an index can never
make blobstate read or delete another store's objects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from blobstate.errors import ConfigurationError, CorruptIndexError, UnsafePathError
from blobstate.local.paths import MAX_DEPTH, PATH_MAX, check_name, name_bytes
from blobstate.model.records import StoreKey

INDEX_SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)


@dataclass(frozen=True)
class FileBlob:
    """One chunk of a file: the blob holding bytes ``[offset, offset + size)`` of the file."""

    blob_id: str
    offset: int

    def to_json(self) -> dict[str, Any]:
        return {"blobId": self.blob_id, "offset": self.offset}


@dataclass(frozen=True)
class FileIndex:
    """A file of a snapshot: its name (relative to its directory), chunks, size in bytes, CRC32C (unsigned),
    mtime / ctime (ms), and since version 2 its permission bits, mtime in ns and 128-bit content hash."""

    file_name: str
    blobs: tuple[FileBlob, ...]
    size_in_bytes: int
    crc32c: int
    mtime: int = 0
    ctime: int = 0
    attribs: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    mode: int | None = None
    mtime_ns: int | None = None
    content_hash: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "fileName": self.file_name,
            "blobs": [b.to_json() for b in self.blobs],
            "mtime": self.mtime,
            "ctime": self.ctime,
            "sizeInBytes": self.size_in_bytes,
            "crc32c": self.crc32c,
            "attribs": self.attribs,
        }
        for key, value in (("mode", self.mode), ("mtimeNs", self.mtime_ns), ("contentHash", self.content_hash)):
            if value is not None:
                doc[key] = value
        return doc

    def chunk_ranges(self) -> Iterator[tuple[FileBlob, int]]:
        """Yield ``(blob, length in bytes)`` in file order."""
        for i, blob in enumerate(self.blobs):
            end = self.blobs[i + 1].offset if i + 1 < len(self.blobs) else self.size_in_bytes
            yield blob, end - blob.offset

    def same_content(self, size: int, crc: int, content_hash: str | None = None) -> bool:
        """True when a file of ``size`` bytes, CRC32C ``crc`` and (for files that change in place) content hash
        ``content_hash`` has this file's content: never by name alone, and a content hash on one side only
        (an entry written before version 2) is a difference."""
        return self.size_in_bytes == size and self.crc32c == crc and self.content_hash == content_hash


@dataclass(frozen=True)
class SymlinkIndex:
    """A symbolic link of a snapshot: its name, its target (as written, never resolved) and its mtime in ns."""

    link_name: str
    target: str
    mtime_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"linkName": self.link_name, "target": self.target}
        if self.mtime_ns is not None:
            doc["mtimeNs"] = self.mtime_ns
        return doc


@dataclass(frozen=True)
class DirIndex:
    """A directory of a snapshot: files, subdirectories and links present, and the files and subdirectories this
    snapshot dropped; since version 2 its permission bits and mtime in ns."""

    dir_name: str
    files_present: tuple[FileIndex, ...] = ()
    files_removed: tuple[FileIndex, ...] = ()
    sub_dirs_present: tuple[DirIndex, ...] = ()
    sub_dirs_removed: tuple[DirIndex, ...] = ()
    symlinks_present: tuple[SymlinkIndex, ...] = ()
    mode: int | None = None
    mtime_ns: int | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "dirName": self.dir_name,
            "filesPresent": [f.to_json() for f in self.files_present],
            "filesRemoved": [f.to_json() for f in self.files_removed],
            "subDirectoriesPresent": [d.to_json() for d in self.sub_dirs_present],
            "subDirectoriesRemoved": [d.to_json() for d in self.sub_dirs_removed],
        }
        if self.symlinks_present:
            doc["symlinksPresent"] = [s.to_json() for s in self.symlinks_present]
        if self.mode is not None:
            doc["mode"] = self.mode
        if self.mtime_ns is not None:
            doc["mtimeNs"] = self.mtime_ns
        return doc

    def walk_present(self, base: str = "") -> Iterator[tuple[str, FileIndex]]:
        """Yield ``(relative path with '/', file)`` for every file present, recursively."""
        for f in self.files_present:
            yield (f"{base}{f.file_name}", f)
        for d in self.sub_dirs_present:
            yield from d.walk_present(f"{base}{d.dir_name}/")

    def walk_entries(self, base: str = "") -> Iterator[tuple[str, FileIndex | SymlinkIndex | DirIndex]]:
        """Yield ``(relative path, entry)`` for every file, link and directory present (parents before their
        children; the root itself is not yielded)."""
        for f in self.files_present:
            yield (f"{base}{f.file_name}", f)
        for s in self.symlinks_present:
            yield (f"{base}{s.link_name}", s)
        for d in self.sub_dirs_present:
            yield (f"{base}{d.dir_name}", d)
            yield from d.walk_entries(f"{base}{d.dir_name}/")

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

    def entries(self) -> dict[str, FileIndex | SymlinkIndex | DirIndex]:
        """Every file, link and directory present, by relative path, parents before children."""
        return dict(self.dir_index.walk_entries())

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
        """Canonical JSON (stable key order, no whitespace, ASCII: names that are not UTF-8 keep their
        ``\\udcXX`` escapes)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "index") -> SnapshotIndex:
        """Parse and validate (see the module docstring); raises ``CorruptIndexError`` naming ``source`` on any
        defect, and nothing else."""
        try:
            doc = json.loads(data, parse_constant=_no_constant)
        except RecursionError:
            raise CorruptIndexError(f"corrupt snapshot index {source}: nested too deeply") from None
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise CorruptIndexError(f"corrupt snapshot index {source}: {exc}"[:2000]) from None
        return cls.from_json(doc, source=source)

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "index") -> SnapshotIndex:
        """Validate a decoded JSON document; raises ``CorruptIndexError`` (see ``from_bytes``)."""
        try:
            return _Parser().index(doc)
        except CorruptIndexError as exc:
            raise CorruptIndexError(f"corrupt snapshot index {source}: {exc}") from None
        except UnsafePathError as exc:
            raise CorruptIndexError(f"corrupt snapshot index {source}: {exc}") from None
        except RecursionError:
            raise CorruptIndexError(f"corrupt snapshot index {source}: nested too deeply") from None
        except (ValueError, KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
            raise CorruptIndexError(f"corrupt snapshot index {source}: {exc!r}"[:2000]) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


_HEX32 = "[0-9a-f]{32}"
_CHECKPOINT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:=-]{0,127}")
_CONTENT_HASH = re.compile(r"xxh3-128:[0-9a-f]{32}")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def _int(value: Any, low: int = 0, high: int = _INT64[1]) -> int:
    """``value`` when it is a JSON integer (not a bool) in ``[low, high]``; ``TypeError`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise TypeError(f"expected an integer in [{low}, {high}], got {str(value)[:40]}")
    return value


def _str(value: Any, limit: int = 1000) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise TypeError(f"expected a string of at most {limit} characters, got {type(value).__name__}")
    return value


def _opt(doc: dict[str, Any], key: str, convert: Any) -> Any:
    value = doc.get(key)
    return None if value is None else convert(value)


class _Parser:
    """One index's validation: the store key's prefix for blob ids, the depth and path length so far."""

    prefix: str = ""

    def index(self, doc: Any) -> SnapshotIndex:
        if not isinstance(doc, dict):
            raise TypeError("an index is a JSON object")
        version = doc["schemaVersion"]
        if isinstance(version, bool) or version not in READABLE_SCHEMA_VERSIONS:
            raise CorruptIndexError(f"unsupported snapshot index schemaVersion {str(version)[:20]}")
        try:
            key = StoreKey(_str(doc["jobName"]), _str(doc["taskName"]), _str(doc["storeName"]))
        except ConfigurationError as exc:
            raise CorruptIndexError(str(exc)) from None
        self.prefix = key.prefix
        checkpoint_id = _str(doc["checkpointId"])
        if not _CHECKPOINT_ID.fullmatch(checkpoint_id):
            raise CorruptIndexError(f"invalid checkpointId {checkpoint_id[:40]!r}")
        prev = doc.get("prevSnapshotIndexBlobId")
        if prev is not None and not re.fullmatch(f"{re.escape(self.prefix)}/indexes/{_HEX32}\\.json", _str(prev)):
            raise CorruptIndexError(f"prevSnapshotIndexBlobId {str(prev)[:200]!r} is not an index of {key}")
        return SnapshotIndex(
            schema_version=version,
            checkpoint_id=checkpoint_id,
            created_time_ms=_int(doc["createdTimeMs"]),
            job_name=key.job,
            job_instance=_str(doc["jobInstance"]),
            task_name=key.task,
            store_name=key.store,
            dir_index=self.directory(doc["dirIndex"], depth=0, base=-1),
            prev_snapshot_index_blob_id=prev,
            batch_id=_opt(doc, "batchId", _int),
            store_type=_opt(doc, "storeType", _str),
            retain=_opt(doc, "retainCheckpoints", _int),
        )

    def blob(self, doc: dict[str, Any]) -> FileBlob:
        blob_id = _str(doc["blobId"])
        if not blob_id.startswith(f"{self.prefix}/blobs/") or not re.fullmatch(_HEX32, blob_id[len(self.prefix) + 7:]):
            raise CorruptIndexError(f"blob id {blob_id[:200]!r} is not a blob of {self.prefix} "
                                    f"({self.prefix}/blobs/<32 hex>)")
        return FileBlob(blob_id, _int(doc["offset"]))

    def file(self, doc: dict[str, Any], base: int = 0) -> FileIndex:
        size = _int(doc["sizeInBytes"])
        blobs = tuple(self.blob(b) for b in doc["blobs"])
        offsets = [b.offset for b in blobs]
        if offsets != sorted(set(offsets)) or (blobs and offsets[0] != 0) or (offsets and offsets[-1] > size):
            raise TypeError(f"bad chunk offsets {offsets[:10]} for a file of {size} bytes")
        if not blobs and size:
            raise TypeError("a non-empty file without blobs")
        attribs = doc.get("attribs") or {}
        if not isinstance(attribs, dict):
            raise TypeError("attribs must be an object")
        content_hash = _opt(doc, "contentHash", _str)
        if content_hash is not None and not _CONTENT_HASH.fullmatch(content_hash):
            raise CorruptIndexError(f"unsupported contentHash {content_hash[:60]!r}")
        return FileIndex(
            file_name=self.name(doc["fileName"], base),
            blobs=blobs,
            size_in_bytes=size,
            crc32c=_int(doc["crc32c"], 0, 0xFFFFFFFF),
            mtime=_int(doc.get("mtime", 0), *_INT64),
            ctime=_int(doc.get("ctime", 0), *_INT64),
            attribs=attribs,
            mode=_opt(doc, "mode", lambda v: _int(v, 0, 0o7777)),
            mtime_ns=_opt(doc, "mtimeNs", lambda v: _int(v, *_INT64)),
            content_hash=content_hash,
        )

    def symlink(self, doc: dict[str, Any], base: int) -> SymlinkIndex:
        target = _str(doc["target"], PATH_MAX)
        if not target or "\x00" in target or len(name_bytes(target)) > PATH_MAX:
            raise CorruptIndexError(f"invalid symlink target {target[:200]!r}")
        return SymlinkIndex(self.name(doc["linkName"], base), target,
                            _opt(doc, "mtimeNs", lambda v: _int(v, *_INT64)))

    def name(self, value: Any, base: int) -> str:
        """A valid name whose path (``base`` bytes of parent directories before it) fits in ``PATH_MAX``."""
        name = check_name(_str(value, 1000))
        if base + 1 + len(name_bytes(name)) > PATH_MAX:
            raise CorruptIndexError(f"a path longer than {PATH_MAX} bytes ends in {name[:60]!r}")
        return name

    def directory(self, doc: dict[str, Any], *, depth: int, base: int, removed: bool = False) -> DirIndex:
        """A directory ``depth`` levels down whose own path is ``base`` bytes long (-1 for the root)."""
        if depth > MAX_DEPTH:
            raise CorruptIndexError(f"directories nested deeper than {MAX_DEPTH} levels")
        if not isinstance(doc, dict):
            raise TypeError("a directory is a JSON object")
        name = _str(doc["dirName"])
        if base >= 0:
            self.name(name, base)
            base += 1 + len(name_bytes(name))
        else:
            base = 0
        files = tuple(self.file(f, base) for f in doc["filesPresent"])
        dirs = tuple(self.directory(d, depth=depth + 1, base=base, removed=removed)
                     for d in doc.get("subDirectoriesPresent", ()))
        links = tuple(self.symlink(s, base) for s in doc.get("symlinksPresent", ()))
        if not removed:
            seen: set[str] = set()
            for entry in [f.file_name for f in files] + [d.dir_name for d in dirs] + [s.link_name for s in links]:
                if entry in seen:
                    raise CorruptIndexError(f"the name {entry[:200]!r} appears twice in directory {name[:200]!r}")
                seen.add(entry)
        return DirIndex(
            dir_name=name,
            files_present=files,
            files_removed=tuple(self.file(f, base) for f in doc.get("filesRemoved", ())),
            sub_dirs_present=dirs,
            sub_dirs_removed=tuple(self.directory(d, depth=depth + 1, base=base, removed=True)
                                   for d in doc.get("subDirectoriesRemoved", ())),
            symlinks_present=links,
            mode=_opt(doc, "mode", lambda v: _int(v, 0, 0o7777)),
            mtime_ns=_opt(doc, "mtimeNs", lambda v: _int(v, *_INT64)),
        )
