"""The snapshot index (Samza's ``IndexBlob`` schema: ``SnapshotIndex`` / ``DirIndex`` / ``FileIndex``), in camelCase
JSON with ``schemaVersion`` first: the tree of a store's files at one checkpoint and the blobs that hold them.

Schema version 2 (version 1 stays readable) adds, all optional so a version-1 index parses as before:

- on a file: ``mode`` (permission bits, ``st_mode & 0o7777``), ``mtimeNs`` (ns since the epoch) and
  ``contentHash`` (``"xxh3-128:<32 hex>"``, for files that can change in place; immutable files have CRC32C only);
- on a directory: ``mode``, ``mtimeNs``, and ``symlinksPresent`` [{``linkName``, ``target``, ``mtimeNs``}]
  (symbolic links, restored as links, never followed);
- a directory listed in ``subDirectoriesPresent`` is present even when it holds nothing (version 1 left empty
  directories out).

Schema version 3 (written now; versions 1 and 2 stay readable) adds ``codec`` on a chunk (``{"blobId", "offset",
"codec": "zstd"}``): how that blob is stored (``blobstate.codec.frame``); left out, the blob holds the file's bytes
as they are. Sizes and CRC32C are always those of the plain bytes. The version number goes up for it because a
reader that ignored ``codec`` would take a compressed blob for the file's bytes: a blobstate that reads up to
version 2 refuses a version-3 index instead. ``retentionPolicy`` (``SnapshotIndex``) is optional in every version
and needed no new one: a reader that ignores it keeps every checkpoint.

The classes are the schema: msgspec ``Struct`` types (frozen; JSON names in camelCase), decoded by msgspec with the
types and limits declared on their fields (integers in range, no ``1e999`` or ``NaN``, string and list lengths; see
``Count``, ``Name``, ``MAX_ENTRIES``). What a type cannot say is checked by one pass after decoding (``_Check``):
every name is one valid path component (``blobstate.model.names.check_name``) and every path fits ``PATH_MAX``, a
directory holds each name once (files, subdirectories and links together), nesting is at most ``names.MAX_DEPTH``
levels, chunk offsets ascend from 0, and every blob id lies under the index's own store key,
``<job>/<task>/<store>/blobs/<32 hex>`` (``prevSnapshotIndexBlobId`` under its ``indexes/``): an index can never
make blobstate read or delete another store's objects. Parsing (``SnapshotIndex.from_bytes``) trusts nothing: any
defect is a ``CorruptIndexError`` (exit code 3), never another exception. A field left out takes its default (a
missing ``schemaVersion`` is the current version, a missing ``filesPresent`` an empty list).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta, field

from blobstate.errors import ConfigurationError, CorruptIndexError, UnsafePathError
from blobstate.model import layout
from blobstate.model.names import MAX_DEPTH, PATH_MAX, check_name, name_bytes
from blobstate.model.records import BatchId, StoreKey

INDEX_SCHEMA_VERSION = 3
SchemaVersion = Literal[1, 2, 3]
READABLE_SCHEMA_VERSIONS: tuple[int, ...] = get_args(SchemaVersion)

# Entries in one list (a directory's files, subdirectories or links, a file's chunks): 4 Mi. Refuses nothing a
# writer could make: that many real entries (about 250 bytes each) already fill ``records.MAX_INDEX_BYTES``.
MAX_ENTRIES = 1 << 22
_I64_MAX = (1 << 63) - 1
Count = Annotated[int, Meta(ge=0, le=_I64_MAX)]  # bytes, offsets, ms since the epoch: 0 .. 2^63-1
Int64 = Annotated[int, Meta(ge=-(1 << 63), le=_I64_MAX)]  # times that may precede the epoch (mtime, ctime, ns)
Crc32c = Annotated[int, Meta(ge=0, le=0xFFFFFFFF)]  # unsigned
Mode = Annotated[int, Meta(ge=0, le=0o7777)]  # permission bits
Name = Annotated[str, Meta(max_length=1000)]  # names and keys (characters; names are checked further)
CheckpointId = Annotated[str, Meta(pattern=r"\A[A-Za-z0-9][A-Za-z0-9._:=-]{0,127}\Z")]
ContentHash = Annotated[str, Meta(pattern=r"\Axxh3-128:[0-9a-f]{32}\Z")]
BlobId = Annotated[str, Meta(max_length=3100, pattern=layout.ANY_BLOB_ID)]
LinkTarget = Annotated[str, Meta(min_length=1, max_length=PATH_MAX)]
Attribs = Annotated[dict[str, Any], Meta(max_length=1000)]


class _Node(msgspec.Struct, frozen=True, rename="camel"):
    """A part of the index: frozen, camelCase on the wire."""

    def to_json(self) -> dict[str, Any]:
        """The JSON document (plain dicts and lists) this part is written as."""
        return _sparse(msgspec.to_builtins(self))


#: How a blob's bytes are stored (``blobstate.codec``): zstd, or as they are (the field left out).
Codec = Literal["zstd"]


class FileBlob(_Node):
    """One chunk of a file: the blob holding bytes ``[offset, offset + size)`` of the file; since version 3 how
    it is stored (``codec``: ``"zstd"``, or None for the bytes as they are), so compressed and plain blobs mix."""

    blob_id: BlobId
    offset: Count
    codec: Codec | None = None


class FileIndex(_Node):
    """A file of a snapshot: its name (relative to its directory), chunks, size in bytes, CRC32C (unsigned),
    mtime / ctime (ms), and since version 2 its permission bits, mtime in ns and 128-bit content hash.
    ``attribs`` (Samza's free-form attributes) is kept but takes no part in equality or hashing."""

    file_name: Name
    blobs: Annotated[tuple[FileBlob, ...], Meta(max_length=MAX_ENTRIES)]
    size_in_bytes: Count
    crc32c: Crc32c
    mtime: Int64 = 0
    ctime: Int64 = 0
    attribs: Attribs = {}
    mode: Mode | None = None
    mtime_ns: Int64 | None = None
    content_hash: ContentHash | None = None

    def _compared(self) -> tuple[Any, ...]:
        return (self.file_name, self.blobs, self.size_in_bytes, self.crc32c, self.mtime, self.ctime, self.mode,
                self.mtime_ns, self.content_hash)

    def __eq__(self, other: object) -> bool:
        if type(other) is not FileIndex:
            return NotImplemented
        return self._compared() == other._compared()

    def __hash__(self) -> int:
        return hash(self._compared())

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


class SymlinkIndex(_Node):
    """A symbolic link of a snapshot: its name, its target (as written, never resolved) and its mtime in ns."""

    link_name: Name
    target: LinkTarget
    mtime_ns: Int64 | None = None


class DirIndex(_Node):
    """A directory of a snapshot: files, subdirectories and links present, and the files and subdirectories this
    snapshot dropped; since version 2 its permission bits and mtime in ns."""

    dir_name: Name
    files_present: Annotated[tuple[FileIndex, ...], Meta(max_length=MAX_ENTRIES)] = ()
    files_removed: Annotated[tuple[FileIndex, ...], Meta(max_length=MAX_ENTRIES)] = ()
    sub_dirs_present: Annotated[tuple[DirIndex, ...], Meta(max_length=MAX_ENTRIES)] = field(
        default=(), name="subDirectoriesPresent")
    sub_dirs_removed: Annotated[tuple[DirIndex, ...], Meta(max_length=MAX_ENTRIES)] = field(
        default=(), name="subDirectoriesRemoved")
    symlinks_present: Annotated[tuple[SymlinkIndex, ...], Meta(max_length=MAX_ENTRIES)] = ()
    mode: Mode | None = None
    mtime_ns: Int64 | None = None

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


class SnapshotIndex(_Node):
    """A snapshot of one store at one checkpoint (Samza's ``SnapshotIndex``): the tree of files and their blobs.

    Beyond Samza's schema: ``batchId`` (the stream batch), ``storeType`` (the local store plugin that made it) and
    ``retainCheckpoints`` (the retention its writer applies, so cleanup elsewhere applies the same) or, for a
    retention policy beyond a count, ``retentionPolicy`` (``blobstate.model.retention.RetentionPolicy.text``; then
    ``retainCheckpoints`` is left out, so an older reader keeps everything rather than a count).
    """

    checkpoint_id: CheckpointId
    created_time_ms: Count
    job_name: Name
    job_instance: Name
    task_name: Name
    store_name: Name
    dir_index: DirIndex
    prev_snapshot_index_blob_id: Name | None = None
    batch_id: BatchId | None = None  # -1: an initial state (``blobstate.model.chain.INITIAL_BATCH``)
    store_type: Name | None = None
    retain: Count | None = field(default=None, name="retainCheckpoints")
    schema_version: SchemaVersion = INDEX_SCHEMA_VERSION
    retention_policy: Name | None = field(default=None, name="retentionPolicy")

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
        """The JSON document, ``schemaVersion`` first."""
        doc = super().to_json()
        return {"schemaVersion": doc.pop("schemaVersion"), **doc}

    def to_bytes(self) -> bytes:
        """Canonical JSON (stable key order, no whitespace, ASCII: names that are not UTF-8 keep their
        ``\\udcXX`` escapes)."""
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str = "index") -> SnapshotIndex:
        """Decode and validate (see the module docstring); raises ``CorruptIndexError`` naming ``source`` on any
        defect, and nothing else."""
        return _parsed(lambda: _decode(data), source)

    @classmethod
    def from_json(cls, doc: Any, *, source: str = "index") -> SnapshotIndex:
        """Validate a decoded JSON document; raises ``CorruptIndexError`` (see ``from_bytes``)."""
        return _parsed(lambda: _to_index(doc), source)


_DECODER = msgspec.json.Decoder(SnapshotIndex)
# Keys a writer leaves out when they are null (or an empty list): the optional fields of schema version 2 and of
# blobstate's additions; the rest (``prevSnapshotIndexBlobId`` included, as in Samza's schema) are always written.
_SPARSE_KEYS = frozenset({"mode", "mtimeNs", "contentHash", "symlinksPresent", "batchId", "storeType",
                          "retainCheckpoints", "retentionPolicy", "codec"})
_CHILD_KEYS = ("dirIndex", "filesPresent", "filesRemoved", "subDirectoriesPresent", "subDirectoriesRemoved",
               "symlinksPresent", "blobs")


def _sparse(doc: Any) -> Any:
    """``doc`` (a part of the index as plain JSON) without its null or empty optional keys, at every level."""
    if isinstance(doc, tuple | list):  # msgspec.to_builtins leaves tuples as they are; JSON writes them as lists
        return [_sparse(part) for part in doc]
    for key in [k for k in _SPARSE_KEYS.intersection(doc) if doc[k] is None or k == "symlinksPresent" and not doc[k]]:
        del doc[key]
    for key in _CHILD_KEYS:
        if key in doc:
            doc[key] = _sparse(doc[key])
    return doc


def _decode(data: bytes) -> SnapshotIndex:
    """The index ``data`` holds, typed but not yet checked by ``_Check``."""
    if not isinstance(data, bytes):
        data = data.encode() if isinstance(data, str) else bytes(data)
    # msgspec refuses the escaped lone surrogates a name that is not UTF-8 is written with (``\udcXX``), which
    # the standard library reads back: such an index is read by ``json``, then converted by msgspec.
    if b"\\ud" in data or b"\\uD" in data:
        return _to_index(json.loads(data, parse_constant=_no_constant))
    return _DECODER.decode(data)


def _to_index(doc: Any) -> SnapshotIndex:
    return msgspec.convert(doc, SnapshotIndex)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number")


def _parsed(decode: Any, source: str) -> SnapshotIndex:
    """``decode()``'s index once ``_Check`` passed; every defect is a ``CorruptIndexError`` naming ``source``."""
    try:
        index = decode()
        _Check(index).run()
        return index
    except RecursionError:
        raise CorruptIndexError(f"corrupt snapshot index {source}: nested too deeply") from None
    except (CorruptIndexError, UnsafePathError, msgspec.MsgspecError, ValueError) as exc:
        # ValueError: the standard library's JSONDecodeError and UnicodeDecodeError
        raise CorruptIndexError(f"corrupt snapshot index {source}: {exc}"[:2000]) from None
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError) as exc:
        raise CorruptIndexError(f"corrupt snapshot index {source}: {exc!r}"[:2000]) from None


class _Check:
    """The checks a type cannot express, over one decoded index (see the module docstring)."""

    def __init__(self, index: SnapshotIndex) -> None:
        self.index = index
        try:
            self.key = index.store_key
        except ConfigurationError as exc:
            raise CorruptIndexError(str(exc)) from None
        self.blobs = layout.blobs_prefix(self.key) + "/"
        self.blob_length = len(layout.blob_id(self.key, "0" * 32))

    def run(self) -> None:
        prev = self.index.prev_snapshot_index_blob_id
        if prev is not None and not self.key.owns_index(prev):
            raise CorruptIndexError(f"prevSnapshotIndexBlobId {prev[:200]!r} is not an index of {self.key}")
        self.directory(self.index.dir_index, depth=0, base=-1, removed=False)

    def directory(self, d: DirIndex, *, depth: int, base: int, removed: bool) -> None:
        """A directory ``depth`` levels down whose own path is ``base`` bytes long (-1 for the root)."""
        if depth > MAX_DEPTH:
            raise CorruptIndexError(f"directories nested deeper than {MAX_DEPTH} levels")
        if base >= 0:
            base += 1 + self.name(d.dir_name, base)
        else:
            base = 0
        for f in d.files_present:
            self.file(f, base)
        for f in d.files_removed:
            self.file(f, base)
        for s in d.symlinks_present:
            self.symlink(s, base)
        for sub in d.sub_dirs_present:
            self.directory(sub, depth=depth + 1, base=base, removed=removed)
        for sub in d.sub_dirs_removed:
            self.directory(sub, depth=depth + 1, base=base, removed=True)
        if not removed:
            seen: set[str] = set()
            for entry in ([f.file_name for f in d.files_present] + [s.dir_name for s in d.sub_dirs_present]
                          + [s.link_name for s in d.symlinks_present]):
                if entry in seen:
                    raise CorruptIndexError(f"the name {entry[:200]!r} appears twice in directory "
                                            f"{d.dir_name[:200]!r}")
                seen.add(entry)

    def file(self, f: FileIndex, base: int) -> None:
        self.name(f.file_name, base)
        last = -1
        for blob in f.blobs:  # the schema checked the shape <a>/<b>/<c>/blobs/<32 hex>; here: this store's own
            if not blob.blob_id.startswith(self.blobs) or len(blob.blob_id) != self.blob_length:
                raise CorruptIndexError(f"blob id {blob.blob_id[:200]!r} is not a blob of {self.key.prefix} "
                                        f"({layout.blob_id(self.key, '<32 hex>')})")
            if blob.offset <= last or (last < 0 and blob.offset):
                raise CorruptIndexError(f"bad chunk offsets {[b.offset for b in f.blobs][:10]} for a file of "
                                        f"{f.size_in_bytes} bytes")
            last = blob.offset
        if last > f.size_in_bytes or (last < 0 and f.size_in_bytes):
            raise CorruptIndexError(f"bad chunk offsets {[b.offset for b in f.blobs][:10]} for a file of "
                                    f"{f.size_in_bytes} bytes")

    def symlink(self, s: SymlinkIndex, base: int) -> None:
        target = s.target
        if "\x00" in target or len(name_bytes(target)) > PATH_MAX:
            raise CorruptIndexError(f"invalid symlink target {target[:200]!r}")
        self.name(s.link_name, base)

    def name(self, name: str, base: int) -> int:
        """The length in bytes of ``name``, a valid name whose path (``base`` bytes of parent directories before
        it) fits in ``PATH_MAX``."""
        size = len(name_bytes(check_name(name)))
        if base + 1 + size > PATH_MAX:
            raise CorruptIndexError(f"a path longer than {PATH_MAX} bytes ends in {name[:60]!r}")
        return size
