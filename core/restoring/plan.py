"""What a restore changes: the destination compared with a snapshot, entry by entry, never following a link.

A file already in the destination with the snapshot's size, CRC32C and (when the index has one) XXH3-128 is kept;
its CRC32C may come from the checksum cache only for an immutable file (the cache key holds ctime), a file that
can change in place is read. Every other file is staged: hard-linked or copied from a local checkpoint of the same
store that holds it (host affinity), or downloaded. Swap steps sit at the topmost paths that differ: an entry the
snapshot lacks, a file whose content differs, a link whose target differs, and any change of kind (a file where
the snapshot has a directory, at any depth, moves out whole and the directory moves in whole).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from blobstate.local.checksum import ChecksumCache, digest_file
from blobstate.model.index import DirIndex, FileIndex, SymlinkIndex
from blobstate.restoring.swap import RESTORED_MODE_BITS, SwapStep

Entry = FileIndex | SymlinkIndex | DirIndex


@dataclass
class RestorePlan:
    """The steps of a restore. Paths are relative, ``/``-separated.

    ``keep``: files and links already right; ``reuse``: file -> local checkpoint file to link or copy;
    ``download``: files to fetch; ``staged_dirs`` / ``staged_links``: directories and links to create in staging;
    ``steps``: the swap; ``removed``: files and links the swap takes out of the destination; ``attributes``: kept
    entries (and every directory) whose mode or mtime must be set after the swap.
    """

    keep: list[str] = field(default_factory=list)
    reuse: dict[str, str] = field(default_factory=dict)
    download: list[str] = field(default_factory=list)
    staged_dirs: list[str] = field(default_factory=list)
    staged_links: list[str] = field(default_factory=list)
    steps: list[SwapStep] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)

    def changes(self) -> list[tuple[str, str]]:
        """``(action, path)`` for every change, in a stable order (what ``--dry-run`` prints)."""
        out = [("download", r) for r in self.download] + [("reuse", r) for r in self.reuse]
        out += [("link", r) for r in self.staged_links] + [("mkdir", r) for r in self.staged_dirs]
        out += [("replace" if s.has_new else "remove", s.rel) for s in self.steps if s.had_old]
        return sorted(out, key=lambda c: (c[1], c[0]))


def file_matches(path: str, f: FileIndex, cache: ChecksumCache, *, mutable: bool) -> bool:
    """True when ``path`` is a regular file (not a link) with ``f``'s size, CRC32C and content hash."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != f.size_in_bytes:
            return False
        if mutable or f.content_hash is not None:
            d = digest_file(path, content_hash=f.content_hash is not None)
            return d.size == f.size_in_bytes and d.crc32c == f.crc32c and d.content_hash == f.content_hash
        return cache.crc32c(path)[1] == f.crc32c
    except OSError:
        return False


def _attrs_differ(st: os.stat_result, entry: Entry) -> bool:
    mode = getattr(entry, "mode", None)
    if mode is not None and stat.S_IMODE(st.st_mode) != mode & RESTORED_MODE_BITS:
        return True
    return entry.mtime_ns is not None and st.st_mtime_ns != entry.mtime_ns


def plan_restore(dest: str, entries: dict[str, Entry], *, cache: ChecksumCache, is_mutable: Callable[[str], bool],
                 sources: list[str], skip: set[str]) -> RestorePlan:
    """Compare ``dest`` (which may not exist) with the snapshot's ``entries``; ``skip``: top-level names of the
    destination that are not its content (staging directories). ``sources``: local checkpoint directories, the
    preferred first."""
    plan = RestorePlan()
    children: dict[str, list[str]] = {}
    for rel in entries:
        parent, _, name = rel.rpartition("/")
        children.setdefault(parent, []).append(name)

    def stage_file(rel: str, f: FileIndex) -> None:
        for src_dir in sources:
            candidate = os.path.join(src_dir, *rel.split("/"))
            if file_matches(candidate, f, cache, mutable=is_mutable(rel)):
                plan.reuse[rel] = candidate
                return
        plan.download.append(rel)

    def stage_tree(rel: str) -> None:
        entry = entries[rel]
        if isinstance(entry, FileIndex):
            stage_file(rel, entry)
        elif isinstance(entry, SymlinkIndex):
            plan.staged_links.append(rel)
        else:
            plan.staged_dirs.append(rel)
            for name in children.get(rel, ()):
                stage_tree(f"{rel}/{name}")

    def count_removed(rel: str, st: os.stat_result) -> None:
        if not stat.S_ISDIR(st.st_mode):
            plan.removed.append(rel)
            return
        for dirpath, dirnames, filenames in os.walk(os.path.join(dest, *rel.split("/"))):
            base = os.path.relpath(dirpath, dest).replace(os.sep, "/")
            plan.removed.extend(f"{base}/{n}" for n in filenames)
            plan.removed.extend(f"{base}/{n}" for n in dirnames if os.path.islink(os.path.join(dirpath, n)))

    def visit(rel_dir: str) -> None:
        path_dir = os.path.join(dest, *rel_dir.split("/")) if rel_dir else dest
        present = set(os.listdir(path_dir)) if os.path.isdir(path_dir) else set()
        if not rel_dir:
            present -= skip
        for name in sorted(present | set(children.get(rel_dir, ()))):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            path = os.path.join(path_dir, name)
            try:
                st: os.stat_result | None = os.lstat(path)
            except FileNotFoundError:
                st = None
            entry = entries.get(rel)
            if entry is None:
                assert st is not None
                count_removed(rel, st)
                plan.steps.append(SwapStep(rel, True, False))
                continue
            if isinstance(entry, DirIndex) and st is not None and stat.S_ISDIR(st.st_mode):
                plan.attributes.append(rel)
                visit(rel)
                continue
            same = st is not None and (
                (isinstance(entry, SymlinkIndex) and stat.S_ISLNK(st.st_mode) and os.readlink(path) == entry.target)
                or (isinstance(entry, FileIndex) and file_matches(path, entry, cache, mutable=is_mutable(rel))))
            if same:
                assert st is not None
                plan.keep.append(rel)
                if _attrs_differ(st, entry):
                    plan.attributes.append(rel)
                continue
            if st is not None and (stat.S_ISDIR(st.st_mode) or isinstance(entry, DirIndex)):
                count_removed(rel, st)  # a directory (or a file where one comes) goes, not replaced by its kind
            plan.steps.append(SwapStep(rel, st is not None, True))
            stage_tree(rel)

    visit("")
    return plan
