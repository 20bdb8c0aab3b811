"""Local leftovers of a store on a host: scratch directories held by a lock while used, swept once abandoned.

A partition snapshot task copies its partition into a RocksDB local checkpoint (hard links to the partition's SSTs:
their disk space is only freed once every link is gone) and uploads it after letting go of the partition; the tasks of
``read_state``, ``write_state`` and ``blobstate spark rescale`` restore or fill scratch RocksDB copies
(``blobstate.spark.data.executor.tasks``), and ``write_state`` of a driver store fills one on the driver. A task killed
with its driver (or its executor) leaves that directory behind, and nothing else would ever remove it. So every such
directory is *held*: its sibling lock file ``<dir>.held`` is taken (``flock``) before the directory exists and released
only after it is removed (``held_dir``). The next time the store is opened on that host its stale directories are swept
(``sweep``): a directory whose lock can be taken belongs to no live process and is removed; one whose lock is held is
left alone. A partition task sweeps its partition's stale snapshot checkpoints; every scratch directory taken
(``scratch_dir``) and every state read, write or rescale the driver starts (``sweep_scratch``) sweeps the stale scratch
directories of *every* kind in its directory (``SCRATCH_KINDS``), so a rerun that runs other partitions, fewer of them,
or no task at all (it finds the copy already committed) still removes what a killed run left. Bounded: at most
``MAX_SWEEP`` directories per call; every removal is logged. ``flock`` locks die with their process, so a SIGKILL never
leaves a directory held for good.
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
#: the names of held scratch directories (``<kind>-...``): the state tasks' (``ReadPlan.scratch``,
#: ``WritePlan.scratch``, a rescale's) and a driver store's write
SCRATCH_KINDS = ("blobstate-read-", "blobstate-write-", "blobstate-rescale-read-", "blobstate-rescale-write-")


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
    """A new held directory ``<parent>/<prefix>XXXX`` (``parent`` None: the temporary directory; ``prefix`` starts
    with one of ``SCRATCH_KINDS``), after sweeping the abandoned scratch directories of ``parent``
    (``sweep_scratch``); removed at the end."""
    parent = sweep_scratch(parent)
    fd, lock_path = tempfile.mkstemp(prefix=prefix, suffix=HELD, dir=parent)  # the lock exists before the dir
    os.close(fd)
    path = lock_path[: -len(HELD)]
    with held_dir(path):
        os.mkdir(path)
        yield path


def sweep_scratch(parent: str | None) -> str:
    """Sweep the abandoned scratch directories of every kind (``SCRATCH_KINDS``) in ``parent`` (None: the temporary
    directory; created when missing); returns its path."""
    parent = parent or tempfile.gettempdir()
    os.makedirs(parent, exist_ok=True)
    sweep(parent, tuple(f"{kind}*" for kind in SCRATCH_KINDS))
    return parent


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
