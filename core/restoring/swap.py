"""The all-or-nothing change of a restore destination: a staging directory on the destination's own file system,
and a swap whose every step can be undone.

The staging directory lives inside the destination (so it is on the destination's file system even when the
destination is a mount point: a Kubernetes volume, a tmpfs), under a name that neither the snapshot nor the
destination uses (``.blobstate-restore-<16 hex>``), with a sentinel ``staging.json`` naming the destination. It
holds ``new/`` (the entries to put in place, at their relative paths), ``old/`` (what they displace), and, while
the destination changes, ``swap.json``: the list of swap steps, written and fsynced before the first rename.

A step ``(rel, had_old, has_new)`` is two renames: ``dest/rel -> old/rel`` (when something is there), then
``new/rel -> dest/rel`` (when the snapshot has it). Steps sit at the topmost differing paths (a directory that
replaces a file moves in whole), so no two overlap, and the state of each is told by which of its slots are
still full. On any error the steps done are undone in reverse order; after a crash the next restore finds
``swap.json`` and undoes them the same way (``recover_interrupted``), unless ``swap.done`` says that every step
completed, in which case only the staging directory is removed. Either way the destination is the old tree or
the new one, never a mix. Renames never follow a symbolic link: a link in the destination is moved as a link.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import uuid
from dataclasses import dataclass
from typing import Any

from blobstate.local.files import fsync_dir

PREFIX = ".blobstate-restore-"
SENTINEL = "staging.json"
SWAP = "swap.json"
DONE = "swap.done"
RESTORED_MODE_BITS = 0o1777  # permission bits and sticky; never set-user-ID or set-group-ID from a snapshot


@dataclass(frozen=True)
class SwapStep:
    """Put ``new/rel`` at ``dest/rel`` (``has_new``), moving what is there to ``old/rel`` first (``had_old``)."""

    rel: str
    had_old: bool
    has_new: bool


def join_rel(root: str, rel: str) -> str:
    """``root`` joined with the ``/``-separated relative path ``rel`` of an index entry (``root`` itself for '')."""
    return os.path.join(root, *rel.split("/")) if rel else root


def _write_json(path: str, doc: Any) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
        fh.flush()
        os.fsync(fh.fileno())
    fsync_dir(os.path.dirname(path))


def is_staging(dest: str, name: str) -> bool:
    """True when ``dest/name`` is a staging directory of a restore of ``dest`` (its sentinel says so)."""
    path = os.path.join(dest, name)
    if not name.startswith(PREFIX) or os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        with open(os.path.join(path, SENTINEL), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("destination") == dest and doc.get("name") == name


def staging_names(dest: str) -> list[str]:
    """Names of the staging directories inside ``dest`` (left by running or interrupted restores)."""
    try:
        return sorted(n for n in os.listdir(dest) if is_staging(dest, n))
    except FileNotFoundError:
        return []


class Staging:
    """A staging directory inside ``dest`` (see the module docstring)."""

    def __init__(self, dest: str, name: str) -> None:
        self.dest = dest
        self.name = name
        self.root = os.path.join(dest, name)
        self.new = os.path.join(self.root, "new")
        self.old = os.path.join(self.root, "old")
        self.steps: list[SwapStep] = []

    @classmethod
    def create(cls, dest: str, avoid: set[str]) -> Staging:
        """A new staging directory in ``dest`` whose name is not in ``avoid`` (the snapshot's top-level names)
        and not taken in ``dest``."""
        while True:
            name = f"{PREFIX}{uuid.uuid4().hex[:16]}"
            if name not in avoid and not os.path.lexists(os.path.join(dest, name)):
                break
        staging = cls(dest, name)
        os.mkdir(staging.root, 0o700)
        _write_json(os.path.join(staging.root, SENTINEL), {"destination": dest, "name": name})
        os.mkdir(staging.new, 0o700)
        os.mkdir(staging.old, 0o700)
        return staging

    def new_path(self, rel: str) -> str:
        return join_rel(self.new, rel)

    def swap(self, steps: list[SwapStep]) -> None:
        """Apply ``steps`` all or nothing: on any error the steps done are undone and the error raised."""
        self.steps = steps
        _write_json(os.path.join(self.root, SWAP), [[s.rel, s.had_old, s.has_new] for s in steps])
        try:
            for step in steps:
                target = join_rel(self.dest, step.rel)
                if step.had_old:
                    os.makedirs(os.path.dirname(join_rel(self.old, step.rel)), exist_ok=True)
                    os.rename(target, join_rel(self.old, step.rel))
                if step.has_new:
                    os.rename(self.new_path(step.rel), target)
            for parent in sorted({os.path.dirname(join_rel(self.dest, s.rel)) for s in steps}):
                fsync_dir(parent)
            _write_json(os.path.join(self.root, DONE), True)
        except BaseException:
            self.rollback()
            raise

    def rollback(self) -> None:
        """Undo the steps of ``swap.json`` in reverse order, each only as far as it got (idempotent)."""
        for step in reversed(self.steps):
            target = join_rel(self.dest, step.rel)
            new_slot, old_slot = self.new_path(step.rel), join_rel(self.old, step.rel)
            if step.has_new and not os.path.lexists(new_slot) and os.path.lexists(target):
                os.makedirs(os.path.dirname(new_slot), exist_ok=True)
                os.rename(target, new_slot)
            if step.had_old and os.path.lexists(old_slot) and not os.path.lexists(target):
                os.rename(old_slot, target)
        for parent in sorted({os.path.dirname(join_rel(self.dest, s.rel)) for s in self.steps}):
            fsync_dir(parent)
        try:
            os.unlink(os.path.join(self.root, SWAP))
        except FileNotFoundError:
            pass

    def discard(self) -> None:
        """Remove the staging directory (and what the swap displaced)."""
        remove_tree(self.root)
        fsync_dir(self.dest)


def recover_interrupted(dest: str) -> list[str]:
    """Finish what interrupted restores of ``dest`` left: a swap that completed keeps the new tree, one that did
    not is undone; then the staging directories are removed. Returns their names."""
    names = staging_names(dest)
    for name in names:
        staging = Staging(dest, name)
        swap_file = os.path.join(staging.root, SWAP)
        if os.path.exists(swap_file) and not os.path.exists(os.path.join(staging.root, DONE)):
            with open(swap_file, encoding="utf-8") as fh:
                staging.steps = [SwapStep(str(r), bool(o), bool(n)) for r, o, n in json.load(fh)]
            staging.rollback()
        staging.discard()
    return names


def remove_tree(path: str) -> None:
    """Remove a tree we made, even where a restored directory has no read, write or search permission for us (a
    snapshot's directory modes are restored as they were: 0o555, 0o400, 0o000). Raises ``OSError`` when what stands
    in the way is not a permission of ours to give back (a directory of another owner, a symbolic link)."""

    def fix(func: Any, p: str, exc_info: Any) -> None:
        # shutil.rmtree could not open or list the directory p (no read or search permission on it), or not stat,
        # unlink or rmdir the entry p (none on its parent): give the owner rwx there, then remove p whole.
        if func is os.path.islink:  # a directory replaced by a link: never followed, never removed through
            raise exc_info[1]
        blocked = p if func in (os.open, os.scandir) else os.path.dirname(p)
        if os.path.islink(blocked) or not _give_owner_rwx(blocked):
            raise exc_info[1]
        if func is os.rmdir:
            os.rmdir(p)
        elif stat.S_ISDIR(os.lstat(p).st_mode):
            shutil.rmtree(p, onerror=fix)
        else:
            os.unlink(p)

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=fix)


def _give_owner_rwx(path: str) -> bool:
    """Add the owner's read, write and search permission to the directory ``path``; False when it had them all
    (nothing to give: the fault was another). Raises ``PermissionError`` when we do not own it."""
    mode = stat.S_IMODE(os.lstat(path).st_mode)
    if mode & 0o700 == 0o700:
        return False
    os.chmod(path, mode | 0o700)
    return True


def set_attributes(path: str, mode: int | None, mtime_ns: int | None, *, link: bool = False) -> None:
    """Apply a snapshot's permission bits (never set-user-ID or set-group-ID) and mtime (ns) to ``path``; a link
    gets its own mtime, its target is never touched."""
    if mode is not None and not link:
        os.chmod(path, mode & RESTORED_MODE_BITS)
    if mtime_ns is not None:
        os.utime(path, ns=(mtime_ns, mtime_ns), follow_symlinks=not link)
