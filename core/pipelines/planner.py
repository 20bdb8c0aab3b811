"""The planner of a commit: scan the local checkpoint, diff it against the previous snapshot index, build the new
index's tree. Pure apart from reading the local files; no blob store, no journal.

Never decide by name alone that a file is unchanged (the lesson of the peers' trackers): size and CRC32C must
match. The CRC32C of an immutable file (a RocksDB SST) may come from the checksum cache, keyed by inode, so an
unchanged hard-linked SST is read once; a file that can change in place is always read.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from blobstate import workdir
from blobstate.checksum import ChecksumCache
from blobstate.index import DirIndex, FileBlob, FileIndex, SnapshotIndex
from blobstate.interfaces import FileRange, PutRequest
from blobstate.layout import new_blob_id
from blobstate.model import StoreKey


@dataclass(frozen=True)
class ScannedFile:
    """A file of a local checkpoint: path relative to its root (``/``-separated), absolute path, size in bytes,
    CRC32C, and mtime / ctime in ms."""

    relpath: str
    path: str
    size: int
    crc32c: int
    mtime: int
    ctime: int


@dataclass
class Plan:
    """What a commit writes: every file of the new snapshot, the files it drops, and the blobs to upload."""

    files: dict[str, FileIndex] = field(default_factory=dict)
    removed: dict[str, FileIndex] = field(default_factory=dict)
    puts: list[PutRequest] = field(default_factory=list)
    files_uploaded: int = 0


def scan_directory(root: str, cache: ChecksumCache, *, workers: int = 4,
                   is_mutable: Callable[[str], bool] = lambda rel: False) -> list[ScannedFile]:
    """Every regular file under ``root`` (symlinks and the checkpoint marker skipped), with size and CRC32C.

    The CRC32C of an immutable file may come from the checksum cache; a mutable file's is always computed, since
    a file rewritten in place can keep its inode, size and (coarse) mtime.
    """
    paths: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == workdir.MARKER or os.path.islink(full) or not os.path.isfile(full):
                continue
            paths.append((rel, full))

    def one(item: tuple[str, str]) -> ScannedFile:
        rel, full = item
        size, crc = cache.crc32c(full, trust_cache=not is_mutable(rel))
        st = os.stat(full)
        return ScannedFile(rel, full, size, crc, st.st_mtime_ns // 1_000_000, st.st_ctime_ns // 1_000_000)

    if len(paths) <= 1:
        return [one(p) for p in paths]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, paths))


def diff(scanned: list[ScannedFile], prev: SnapshotIndex | None, *, key: StoreKey, chunk_size: int,
         ttl_ms: int) -> Plan:
    """The plan of a commit: a scanned file is unchanged (its previous entry and blobs reused) only when the
    previous snapshot has it with the same size and CRC32C, never by name alone; everything else gets fresh
    blobs of at most ``chunk_size`` bytes, uploaded with a TTL of ``ttl_ms``."""
    prev_files = prev.files() if prev else {}
    plan = Plan()
    for f in scanned:
        old = prev_files.get(f.relpath)
        name = f.relpath.rsplit("/", 1)[-1]
        if old is not None and old.same_content(f.size, f.crc32c):
            plan.files[f.relpath] = old
            continue
        blobs = []
        for offset in range(0, f.size, chunk_size):
            length = min(chunk_size, f.size - offset)
            blob_id = new_blob_id(key)
            blobs.append(FileBlob(blob_id, offset))
            plan.puts.append(PutRequest(blob_id, FileRange(f.path, offset, length), ttl_ms))
        plan.files[f.relpath] = FileIndex(name, tuple(blobs), f.size, f.crc32c, f.mtime, f.ctime)
        plan.files_uploaded += 1
        if old is not None:
            plan.removed[f.relpath] = old
    for rel, old in prev_files.items():
        if rel not in plan.files:
            plan.removed[rel] = old
    return plan


def build_dir_index(present: dict[str, FileIndex], removed: dict[str, FileIndex]) -> DirIndex:
    """The ``DirIndex`` tree of flat ``relative path -> file`` maps (files present and files dropped)."""
    tree: dict[str, Any] = {"files": {}, "removed": {}, "dirs": {}}

    def node_for(rel: str) -> tuple[dict[str, Any], str]:
        parts = rel.split("/")
        node = tree
        for part in parts[:-1]:
            node = node["dirs"].setdefault(part, {"files": {}, "removed": {}, "dirs": {}})
        return node, parts[-1]

    for rel, f in present.items():
        node, name = node_for(rel)
        node["files"][name] = f
    for rel, f in removed.items():
        node, name = node_for(rel)
        node["removed"][name] = f

    def has_present(node: dict[str, Any]) -> bool:
        return bool(node["files"]) or any(has_present(c) for c in node["dirs"].values())

    def removed_tree(name: str, node: dict[str, Any]) -> DirIndex:
        return DirIndex(name, files_present=tuple(node["removed"][k] for k in sorted(node["removed"])),
                        sub_dirs_present=tuple(removed_tree(k, node["dirs"][k]) for k in sorted(node["dirs"])))

    def convert(name: str, node: dict[str, Any]) -> DirIndex:
        dirs = sorted(node["dirs"])
        return DirIndex(
            name,
            files_present=tuple(node["files"][k] for k in sorted(node["files"])),
            files_removed=tuple(node["removed"][k] for k in sorted(node["removed"])),
            sub_dirs_present=tuple(convert(k, node["dirs"][k]) for k in dirs if has_present(node["dirs"][k])),
            sub_dirs_removed=tuple(removed_tree(k, node["dirs"][k]) for k in dirs
                                   if not has_present(node["dirs"][k])),
        )

    return convert("", tree)
