"""The planner of a commit: scan the local checkpoint, diff it against the previous snapshot index, build the new
index's tree. Pure apart from reading the local files; no blob store, no journal.

Never decide by name alone that a file is unchanged (the lesson of the peers' trackers): size and CRC32C must
match, and for a file that can change in place its XXH3-128 too. The CRC32C of an immutable file (a RocksDB SST)
may come from the checksum cache, keyed by inode and ctime, so an unchanged hard-linked SST is read once; a file
that can change in place is always read.

The scan records directories (empty ones too), symbolic links (as links, never followed), permission bits and
mtimes, and refuses at backup, with ``UnsafePathError``, whatever a restore would refuse
(``blobstate.model.names.check_relpath``: over-long names and paths, nesting deeper than ``names.MAX_DEPTH``) and
what it cannot give back (sockets, FIFOs, devices).
"""

from __future__ import annotations

import contextvars
import os
import stat
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec.structs import replace

from blobstate.errors import UnsafePathError
from blobstate.local.checksum import ChecksumCache
from blobstate.model.index import DirIndex, FileBlob, FileIndex, SnapshotIndex, SymlinkIndex
from blobstate.model.layout import new_blob_id
from blobstate.model.names import PATH_MAX, check_relpath, name_bytes
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import FileRange, PutRequest


# The scan's own records are msgspec Structs, not dataclasses: ~0.05 ms each to create against ~0.5 ms (the exec of
# a dataclass's generated methods), at every CLI command's start-up (issue 31).
class ScannedFile(msgspec.Struct, frozen=True):
    """A file of a local checkpoint: path relative to its root (``/``-separated), absolute path, size in bytes,
    CRC32C, mtime / ctime in ms, permission bits, mtime in ns, and XXH3-128 (``xxh3-128:<hex>``, files that can
    change in place only)."""

    relpath: str
    path: str
    size: int
    crc32c: int
    mtime: int
    ctime: int
    mode: int | None = None
    mtime_ns: int | None = None
    content_hash: str | None = None


class ScannedDir(msgspec.Struct, frozen=True):
    """A directory of a local checkpoint: permission bits and mtime in ns."""

    mode: int
    mtime_ns: int


class Scan(msgspec.Struct):
    """A scanned local checkpoint: its files (iterating a ``Scan`` gives them), directories by relative path
    (``""`` is the root) and symbolic links by relative path."""

    files: list[ScannedFile] = msgspec.field(default_factory=list)
    dirs: dict[str, ScannedDir] = msgspec.field(default_factory=dict)
    links: dict[str, SymlinkIndex] = msgspec.field(default_factory=dict)

    def __iter__(self) -> Iterator[ScannedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


class Plan(msgspec.Struct):
    """What a commit writes: every file of the new snapshot, the files it drops, the blobs to upload, and the
    directories and links of the new tree."""

    files: dict[str, FileIndex] = msgspec.field(default_factory=dict)
    removed: dict[str, FileIndex] = msgspec.field(default_factory=dict)
    puts: list[PutRequest] = msgspec.field(default_factory=list)
    uploaded: list[str] = msgspec.field(default_factory=list)
    dirs: dict[str, ScannedDir] = msgspec.field(default_factory=dict)
    links: dict[str, SymlinkIndex] = msgspec.field(default_factory=dict)

    @property
    def files_uploaded(self) -> int:
        """How many files get fresh blobs (new or changed)."""
        return len(self.uploaded)

    def dir_index(self) -> DirIndex:
        """The new snapshot's ``DirIndex`` tree."""
        return build_dir_index(self.files, self.removed, dirs=self.dirs, links=self.links)


def _walk(root: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """``(relative path, absolute path, lstat)`` of everything under ``root``, sorted, symlinks not followed."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        base = os.path.join(root, *rel_dir.split("/")) if rel_dir else root
        with os.scandir(base) as it:
            entries = sorted(it, key=lambda e: e.name)
        subdirs = []
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            st = entry.stat(follow_symlinks=False)
            yield rel, entry.path, st
            if stat.S_ISDIR(st.st_mode):
                subdirs.append(rel)
        stack.extend(reversed(subdirs))


def scan_directory(root: str, cache: ChecksumCache, *, workers: int = 4,
                   is_mutable: Callable[[str], bool] = lambda rel: False) -> Scan:
    """Every file, directory and symbolic link under ``root``, files with size, CRC32C and (mutable ones)
    XXH3-128.

    The CRC32C of an immutable file may come from the checksum cache; a mutable file is always read in full,
    since a file rewritten in place can keep its inode, size and (coarse) mtime. Raises ``UnsafePathError`` for a
    name or a kind of file a restore could not give back (see the module docstring).
    """
    scan = Scan()
    top = os.stat(root)
    scan.dirs[""] = ScannedDir(stat.S_IMODE(top.st_mode), top.st_mtime_ns)
    paths: list[tuple[str, str, os.stat_result]] = []
    for rel, full, st in _walk(root):
        check_relpath(rel)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            if len(name_bytes(target)) > PATH_MAX:
                raise UnsafePathError(f"symbolic link {rel!r}: target longer than {PATH_MAX} bytes")
            scan.links[rel] = SymlinkIndex(rel.rsplit("/", 1)[-1], target, st.st_mtime_ns)
        elif stat.S_ISDIR(st.st_mode):
            scan.dirs[rel] = ScannedDir(stat.S_IMODE(st.st_mode), st.st_mtime_ns)
        elif stat.S_ISREG(st.st_mode):
            paths.append((rel, full, st))
        else:
            raise UnsafePathError(f"{rel!r} is not a regular file, directory or symbolic link (a socket, FIFO or "
                                  "device): a restore could not give it back; move it out of the store")

    def one(item: tuple[str, str, os.stat_result]) -> ScannedFile:
        rel, full, st = item
        digest = cache.digest(full, mutable=is_mutable(rel))
        return ScannedFile(rel, full, digest.size, digest.crc32c, st.st_mtime_ns // 1_000_000,
                           st.st_ctime_ns // 1_000_000, stat.S_IMODE(st.st_mode), st.st_mtime_ns,
                           digest.content_hash)

    if len(paths) <= 1:
        scan.files = [one(p) for p in paths]
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            scan.files = [f.result() for f in [pool.submit(contextvars.copy_context().run, one, p) for p in paths]]
    return scan


def diff(scanned: Scan | list[ScannedFile], prev: SnapshotIndex | None, *, key: StoreKey, chunk_size: int,
         ttl_ms: int, codec_of: Callable[[str, int], str | None] | None = None) -> Plan:
    """The plan of a commit: a scanned file is unchanged (its previous blobs reused, its attributes refreshed)
    only when the previous snapshot has it with the same size, CRC32C and content hash, never by name alone;
    everything else gets fresh blobs of at most ``chunk_size`` bytes, uploaded with a TTL of ``ttl_ms``, each
    stored as ``codec_of(local path, size)`` decides for its file (the repository's compression:
    ``Repository.choose_codec``; None: as they are), which the index records per blob."""
    prev_files = prev.files() if prev else {}
    plan = Plan()
    if isinstance(scanned, Scan):
        plan.dirs, plan.links = scanned.dirs, scanned.links
    for f in scanned:
        old = prev_files.get(f.relpath)
        name = f.relpath.rsplit("/", 1)[-1]
        if old is not None and old.same_content(f.size, f.crc32c, f.content_hash):
            plan.files[f.relpath] = replace(old, mtime=f.mtime, ctime=f.ctime, mode=f.mode, mtime_ns=f.mtime_ns)
            continue
        blobs = []
        codec = codec_of(f.path, f.size) if codec_of is not None else None
        for offset in range(0, f.size, chunk_size):
            length = min(chunk_size, f.size - offset)
            blob_id = new_blob_id(key)
            blobs.append(FileBlob(blob_id, offset, codec))
            plan.puts.append(PutRequest(blob_id, FileRange(f.path, offset, length), ttl_ms, codec))
        plan.files[f.relpath] = FileIndex(name, tuple(blobs), f.size, f.crc32c, f.mtime, f.ctime, mode=f.mode,
                                          mtime_ns=f.mtime_ns, content_hash=f.content_hash)
        plan.uploaded.append(f.relpath)
        if old is not None:
            plan.removed[f.relpath] = old
    for rel, old in prev_files.items():
        if rel not in plan.files:
            plan.removed[rel] = old
    return plan


def build_dir_index(present: dict[str, FileIndex], removed: dict[str, FileIndex], *,
                    dirs: dict[str, ScannedDir] | None = None,
                    links: dict[str, SymlinkIndex] | None = None) -> DirIndex:
    """The ``DirIndex`` tree of flat ``relative path -> entry`` maps: files present, files dropped, directories
    present (``""`` the root; empty ones kept) and links present. Without ``dirs`` a directory is present when it
    holds a file (what version 1 of the schema recorded)."""
    dirs = dirs or {}
    links = links or {}

    def new_node() -> dict[str, Any]:
        return {"files": {}, "removed": {}, "dirs": {}, "links": {}, "present": False}

    tree = new_node()

    def node_for(rel: str, *, present: bool) -> tuple[dict[str, Any], str]:
        parts = rel.split("/")
        node = tree
        for part in parts[:-1]:
            node = node["dirs"].setdefault(part, new_node())
            node["present"] = node["present"] or present
        return node, parts[-1]

    for rel, f in present.items():
        node, name = node_for(rel, present=True)
        node["files"][name] = f
    for rel, link in links.items():
        node, name = node_for(rel, present=True)
        node["links"][name] = link
    for rel in dirs:
        if rel:
            node, name = node_for(rel, present=True)
            node["dirs"].setdefault(name, new_node())["present"] = True
    for rel, f in removed.items():
        node, name = node_for(rel, present=False)
        node["removed"][name] = f

    def removed_tree(name: str, node: dict[str, Any]) -> DirIndex:
        return DirIndex(name, files_present=tuple(node["removed"][k] for k in sorted(node["removed"])),
                        sub_dirs_present=tuple(removed_tree(k, node["dirs"][k]) for k in sorted(node["dirs"])))

    def convert(name: str, rel: str, node: dict[str, Any]) -> DirIndex:
        names = sorted(node["dirs"])
        attrs = dirs.get(rel)
        return DirIndex(
            name,
            files_present=tuple(node["files"][k] for k in sorted(node["files"])),
            files_removed=tuple(node["removed"][k] for k in sorted(node["removed"])),
            sub_dirs_present=tuple(convert(k, f"{rel}/{k}" if rel else k, node["dirs"][k]) for k in names
                                   if node["dirs"][k]["present"]),
            sub_dirs_removed=tuple(removed_tree(k, node["dirs"][k]) for k in names
                                   if not node["dirs"][k]["present"]),
            symlinks_present=tuple(node["links"][k] for k in sorted(node["links"])),
            mode=attrs.mode if attrs else None,
            mtime_ns=attrs.mtime_ns if attrs else None,
        )

    return convert("", "", tree)


@dataclass(frozen=True)
class BackupPreview:
    """What a backup would do (``backup --dry-run``), against the latest snapshot: files to upload (new or
    changed), files unchanged, files the snapshot would drop; bytes to upload."""

    files_total: int
    upload: tuple[str, ...]
    unchanged: int
    removed: tuple[str, ...]
    bytes_total: int
    bytes_upload: int
    previous_checkpoint_id: str | None

    @classmethod
    def of(cls, plan: Plan, prev: SnapshotIndex | None) -> BackupPreview:
        return cls(
            files_total=len(plan.files), upload=tuple(sorted(plan.uploaded)),
            unchanged=len(plan.files) - len(plan.uploaded),
            removed=tuple(sorted(r for r in plan.removed if r not in plan.files)),
            bytes_total=sum(f.size_in_bytes for f in plan.files.values()),
            bytes_upload=sum(r.size for r in plan.puts),
            previous_checkpoint_id=prev.checkpoint_id if prev else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {"dryRun": True, "previousCheckpointId": self.previous_checkpoint_id, "filesTotal": self.files_total,
                "filesToUpload": list(self.upload), "filesUnchanged": self.unchanged,
                "filesRemoved": list(self.removed), "bytesTotal": self.bytes_total,
                "bytesToUpload": self.bytes_upload}

