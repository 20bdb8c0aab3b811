"""Local leftovers of a store on a host: scratch directories held by a lock while used, swept once abandoned.

A partition snapshot task copies its partition into a RocksDB local checkpoint (hard links to the partition's SSTs:
their disk space is only freed once every link is gone) and uploads it after letting go of the partition; a
``blobstate spark rescale`` task fills scratch RocksDB copies. A task killed with its driver (or its executor)
leaves that directory behind, and nothing else would ever remove it. So every such directory is *held*: its
sibling lock file ``<dir>.held`` is taken (``flock``) before the directory exists and released only after it is
removed (``held_dir``). The next time the store is opened on that host (a partition task entering its partition, a
rescale task taking its scratch space) its stale directories are swept (``sweep``): a directory whose lock can be
taken belongs to no live process and is removed; one whose lock is held is left alone. Bounded: at most
``MAX_SWEEP`` directories per call; every removal is logged. ``flock`` locks die with their process, so a
SIGKILL never leaves a directory held for good.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator

from blobstate.local.files import try_lock

log = logging.getLogger(__name__)

HELD = ".held"  # the suffix of a held directory's lock file
MAX_SWEEP = 64  # directories removed per sweep at most (the rest wait for the next one)


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
def scratch_dir(parent: str | None, prefix: str) -> Iterator[str]:
    """A new held directory ``<parent>/<prefix>XXXX`` (``parent`` None: the temporary directory), after sweeping
    the abandoned ``<prefix>*`` directories of ``parent``; removed at the end."""
    parent = parent or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    sweep(parent, f"{prefix.rstrip('-')}*")
    fd, lock_path = tempfile.mkstemp(prefix=prefix, suffix=HELD, dir=parent)  # the lock exists before the dir
    os.close(fd)
    path = lock_path[: -len(HELD)]
    with held_dir(path):
        os.mkdir(path)
        yield path


def sweep(parent: str, pattern: str, *, limit: int = MAX_SWEEP) -> list[str]:
    """Remove the directories of ``parent`` matching ``pattern`` (``fnmatch``) that no live process holds, at most
    ``limit``; returns their paths. Never raises for a directory that vanished or cannot be read."""
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    removed: list[str] = []
    for name in names:
        path = os.path.join(parent, name)
        if len(removed) >= limit or name.endswith(HELD) or not fnmatch.fnmatch(name, pattern) \
                or not os.path.isdir(path):
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
