"""Held directories: scratch directories a process holds by a lock while it uses them, swept once abandoned.

A directory written by a process that can be killed (a partition snapshot task's RocksDB local checkpoint, the scratch
copies of ``read_state``, ``write_state`` and a rescale, the chunks ``blobstate copy`` stages) is *held*: its sibling
lock file ``<dir>.held`` is taken (``flock``) before the directory exists and released only after it is removed
(``held_dir``). The next process that uses the same place sweeps it (``sweep``): a directory whose lock can be
taken belongs to no live process and is removed; one whose lock is held is left alone. ``flock`` locks die with
their process, so a SIGKILL never leaves a directory held for good. Bounded: at most ``MAX_SWEEP`` directories per
call; every removal is logged.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

from blobstate.local.files import try_lock

log = logging.getLogger(__name__)

HELD = ".held"  # the suffix of a held directory's lock file
MAX_SWEEP = 64  # directories removed per sweep at most (the rest wait for the next one)
DANGLING_AFTER_S = 60.0  # a lock file without its directory is removed once this old (its creator died)
COPY_STAGING = "copy-staging-"  # a copy's staged chunks (``blobstate.commit.copy_staging``), in a store's work dir
#: the held directories a store's work directory may hold, swept by its next session (``sweep_work_dir``)
WORK_DIR_KINDS = (COPY_STAGING,)


def _release(path: str, fd: int) -> None:
    """Remove ``path`` and its lock file, then let go of the lock (in that order: nobody reuses a name meanwhile)."""
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(path + HELD)
    os.close(fd)


@contextlib.contextmanager
def held_dir(path: str) -> Iterator[str]:
    """Hold ``path`` (not created here: a RocksDB checkpoint creates its own directory) while the block runs, then
    remove it. Raises ``OSError`` when the lock file cannot be created, ``BlockingIOError`` when it is held."""
    fd = try_lock(path + HELD)
    if fd is None:
        raise BlockingIOError(f"{path} is held by another process")
    try:
        yield path
    finally:
        _release(path, fd)


@contextlib.contextmanager
def new_held_dir(parent: str, prefix: str) -> Iterator[str]:
    """A new held directory ``<parent>/<prefix>XXXX`` (created, ``parent`` too), removed at the end of the block."""
    os.makedirs(parent, exist_ok=True)
    fd, lock_path = tempfile.mkstemp(prefix=prefix, suffix=HELD, dir=parent)  # the lock exists before the dir
    os.close(fd)
    path = lock_path[: -len(HELD)]
    with held_dir(path):
        os.mkdir(path)
        yield path


def _older(path: str, seconds: float) -> bool:
    try:
        return time.time() - os.stat(path).st_mtime > seconds
    except OSError:
        return False


def _drop_lock_file(path: str) -> None:
    """Remove a lock file left without its directory, unless a live process holds it."""
    try:
        fd = try_lock(path)
    except OSError:
        return
    if fd is not None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        os.close(fd)


def sweep(parent: str, pattern: str | tuple[str, ...], *, limit: int = MAX_SWEEP) -> list[str]:
    """Remove the directories of ``parent`` matching ``pattern`` (``fnmatch``; a tuple: any of them) that no live
    process holds, at most ``limit``, and the lock files left without their directory (a task killed between the
    two); returns the directories' paths. Never raises for a directory that vanished or cannot be read."""
    patterns = (pattern,) if isinstance(pattern, str) else pattern
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    removed: list[str] = []
    for name in names:
        path = os.path.join(parent, name)
        if len(removed) >= limit or not any(fnmatch.fnmatch(name, p) for p in patterns):
            continue
        if name.endswith(HELD):
            if not os.path.isdir(path[: -len(HELD)]) and _older(path, DANGLING_AFTER_S):
                _drop_lock_file(path)
            continue
        if not os.path.isdir(path):
            continue
        try:
            fd = try_lock(path + HELD)
        except OSError:
            continue
        if fd is None:
            continue  # a live task uses it
        _release(path, fd)
        removed.append(path)
        log.info("removed %s: a local leftover of a task that died", path)
    if len(removed) >= limit:
        log.info("swept %d leftovers in %s; more wait for the next sweep", limit, parent)
    return removed


def sweep_work_dir(work_dir: str) -> list[str]:
    """Sweep the abandoned held directories of a store's work directory (``WORK_DIR_KINDS``); returns their paths."""
    return sweep(work_dir, tuple(f"{kind}*" for kind in WORK_DIR_KINDS))
