"""What a restore changes: the destination compared with a snapshot, entry by entry, never following a link.

A file already in the destination (or in a local checkpoint of the same store: host affinity) is kept when it is
the snapshot's file; every other file is staged: hard-linked or copied from that local checkpoint, or downloaded.
Swap steps sit at the topmost paths that differ: an entry the snapshot lacks, a file whose content differs, a link
whose target differs, and any change of kind (a file where the snapshot has a directory, at any depth, moves out
whole and the directory moves in whole).

How a kept file is known to be the snapshot's (``verify_kept``, ``blobstate restore --verify-kept``):

- a file that can change in place (RocksDB's ``MANIFEST``, ``CURRENT``, ``OPTIONS``; every file of a directory
  store) is read in full, size, CRC32C and XXH3-128, in every mode;
- ``cache`` (the default): an immutable file's CRC32C comes from this host's checksum cache when its key, which
  holds ctime, matches (restic's and git's rule: a change with the mtime put back still moves ctime), else the
  file is read. A restore never keeps a file it has not read or seen read unchanged since;
- ``identity`` (opt-in, for a restore into a directory this host's own job wrote): an immutable file (RocksDB's
  ``*.sst``, never rewritten under its name) whose size and mtime, to the nanosecond, are the index's is kept
  unread (rclone's size-and-modtime check, plus the name); otherwise as ``cache``. A file of another lineage of the
  store with the same name has another creation time, so it is read; a kept table whose footer, index or properties
  block is damaged makes the complete new tree fail to open (``LocalStore.validate``), and the restore plans again
  with ``full``. What it cannot see: bytes of a data block changed in place with the mtime put back, or rotten below
  the file system. RocksDB detects those only when it reads the block, and rocksdict's iteration then ends early
  without an error: a reader can see a wrong state. Hence opt-in;
- ``full``: every kept file is read, no cache trusted (the paranoid mode: it also catches bit rot, which moves no
  ctime).

The files that must be read are read in parallel (``READERS`` at a time).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from blobstate.local.checksum import ChecksumCache, crc32c_file, digest_file
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


#: ``verify_kept`` modes, the default first (see the module docstring).
VERIFY_KEPT = ("cache", "identity", "full")
DEFAULT_VERIFY_KEPT = VERIFY_KEPT[0]
READERS = 4  # files read at once to check them (a disk or a cloud volume serves several reads in parallel)


def check_verify_kept(mode: str) -> str:
    """``mode`` if it is one of ``VERIFY_KEPT``, else ``ConfigurationError``."""
    if mode not in VERIFY_KEPT:
        from blobstate.errors import ConfigurationError

        raise ConfigurationError(f"verify_kept must be one of {', '.join(VERIFY_KEPT)}, not {mode!r}")
    return mode


def file_matches(path: str, f: FileIndex, cache: ChecksumCache, *, mutable: bool, verify: str = "cache") -> bool:
    """True when ``path`` is a regular file (not a link) with ``f``'s size, CRC32C and content hash, as ``verify``
    checks it (``VERIFY_KEPT``; ``identity`` trusts an immutable file by its size and nanosecond mtime)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != f.size_in_bytes:
            return False
        if mutable or f.content_hash is not None:
            d = digest_file(path, content_hash=f.content_hash is not None)
            return d.size == f.size_in_bytes and d.crc32c == f.crc32c and d.content_hash == f.content_hash
        if verify == "identity" and f.mtime_ns is not None and st.st_mtime_ns == f.mtime_ns:
            return True
        if verify == "full":
            return crc32c_file(path) == f.crc32c
        return cache.crc32c(path)[1] == f.crc32c
    except OSError:
        return False


def _checked(dest: str, entries: dict[str, Entry], sources: list[str], cache: ChecksumCache,
             is_mutable: Callable[[str], bool], verify: str) -> dict[str, bool]:
    """``file_matches`` of the paths a plan asks about, ``READERS`` files at a time: every destination file of the
    index's size, then, for the files the destination does not hold, the local checkpoints' in order of
    preference (a file is looked for in the next only when the one before lacks it)."""
    files = {rel: e for rel, e in entries.items() if isinstance(e, FileIndex)}
    found: dict[str, bool] = {}

    def check(rel: str, roots: list[str]) -> list[tuple[str, bool]]:
        f, out = files[rel], []
        for root in roots:
            path = os.path.join(root, *rel.split("/"))
            out.append((path, file_matches(path, f, cache, mutable=is_mutable(rel), verify=verify)))
            if out[-1][1]:
                break
        return out

    with ThreadPoolExecutor(max_workers=READERS) as pool:
        for results in pool.map(lambda rel: check(rel, [dest]), files):
            found.update(results)
        missing = [rel for rel in files if not found[os.path.join(dest, *rel.split("/"))]]
        for results in pool.map(lambda rel: check(rel, sources), missing if sources else []):
            found.update(results)
    return found


def _attrs_differ(st: os.stat_result, entry: Entry) -> bool:
    mode = getattr(entry, "mode", None)
    if mode is not None and stat.S_IMODE(st.st_mode) != mode & RESTORED_MODE_BITS:
        return True
    return entry.mtime_ns is not None and st.st_mtime_ns != entry.mtime_ns


def plan_restore(dest: str, entries: dict[str, Entry], *, cache: ChecksumCache, is_mutable: Callable[[str], bool],
                 sources: list[str], skip: set[str], verify: str = DEFAULT_VERIFY_KEPT) -> RestorePlan:
    """Compare ``dest`` (which may not exist) with the snapshot's ``entries``; ``skip``: top-level names of the
    destination that are not its content (staging directories). ``sources``: local checkpoint directories, the
    preferred first. ``verify``: how a kept file is checked (``VERIFY_KEPT``, the module docstring)."""
    plan = RestorePlan()
    matches = _checked(dest, entries, sources, cache, is_mutable, check_verify_kept(verify))

    def file_matches(path: str, f: FileIndex, cache: ChecksumCache, *, mutable: bool) -> bool:
        return matches.get(path, False)

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
