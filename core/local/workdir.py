"""The local work directory of a store: journal, lock, checksum cache, local checkpoint directories, and the
destinations restores of the store have made.

``<base>/<repo hash>/<job>/<task>/<store>/`` where ``<base>`` is ``BLOBSTATE_WORK_DIR`` or platformdirs' user
state dir; the repository hash keeps two repositories of one store key apart.

A local checkpoint directory is named by its checkpoint id and holds the store's files only: nothing of
blobstate's is written inside it, so no name of a user's file is taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator

from blobstate.local.files import replace_file, try_lock
from blobstate.model.records import StoreKey

CHECKPOINTS = "checkpoints"
JOURNAL = "journal.log"
CRC_CACHE = "crc-cache.json"
LOCK = "lock"
RESTORED = "restored.json"
RESTORE_LOCK = "restore.lock"
OBJECT_CACHE = "object-cache"  # a writer's object cache when its work directory lies under no base


def default_base() -> str:
    from blobstate.repository.settings import current

    configured = current().work_dir
    if configured:
        return configured
    import platformdirs  # deliberately here: only without BLOBSTATE_WORK_DIR / --work-dir (~2 ms, issue 31)

    return platformdirs.user_state_dir("blobstate", appauthor=False)


def repository_hash(repo_url: str) -> str:
    """The 12 hex digits that name repository ``repo_url``'s directories under the base. The URL's query (storage
    options, perhaps a rotating token) does not take part: the same repository is the same however it is
    reached."""
    from blobstate.repository.options import split_url

    return hashlib.sha256(split_url(repo_url)[0].encode()).hexdigest()[:12]


def store_work_dir(repo_url: str, key: StoreKey, base: str | None = None) -> str:
    """The work directory of ``key`` in repository ``repo_url`` under ``base`` (default: ``default_base()``): the
    same repository keeps its journal however it is reached (``repository_hash``)."""
    return os.path.join(base or default_base(), repository_hash(repo_url), key.job, key.task, key.store)


def base_of(work_dir: str, repo_url: str, key: StoreKey) -> str | None:
    """The base ``work_dir`` lies under when it is ``key``'s work directory of ``repo_url`` there
    (``store_work_dir``'s layout); None for a work directory placed elsewhere."""
    path = os.path.abspath(work_dir)
    base = path
    for _ in range(4):  # <base>/<repo hash>/<job>/<task>/<store>
        base = os.path.dirname(base)
    return base if store_work_dir(repo_url, key, base) == path else None


def checkpoints_dir(work_dir: str) -> str:
    return os.path.join(work_dir, CHECKPOINTS)


def local_checkpoint_dirs(work_dir: str) -> list[str]:
    """Local checkpoint directories, oldest first (checkpoint ids sort by creation time)."""
    base = checkpoints_dir(work_dir)
    try:
        names = sorted(n for n in os.listdir(base) if not n.startswith("."))
    except FileNotFoundError:
        return []
    return [os.path.join(base, n) for n in names if os.path.isdir(os.path.join(base, n))]


def _identity(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return [st.st_dev, st.st_ino]


def _read_restored(work_dir: str) -> dict[str, list[int]]:
    try:
        with open(os.path.join(work_dir, RESTORED), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return {}  # unreadable: restores ask for force again, nothing else is lost
    return {str(k): v for k, v in doc.items()} if isinstance(doc, dict) else {}


def restored_here(work_dir: str | None, destination: str) -> bool:
    """True when a restore with this work directory made ``destination`` (an absolute, resolved path) and it is
    still the same directory (device and inode)."""
    if work_dir is None:
        return False
    known = _read_restored(work_dir).get(destination)
    return known is not None and known == _identity(destination)


def remember_restored(work_dir: str | None, destination: str) -> None:
    """Record that a restore made ``destination`` (kept outside it: the destination holds only the snapshot)."""
    if work_dir is None:
        return
    doc = _read_restored(work_dir)
    doc[destination] = _identity(destination) or []
    os.makedirs(work_dir, exist_ok=True)
    replace_file(os.path.join(work_dir, RESTORED), json.dumps(doc))


@contextlib.contextmanager
def restore_lock(work_dir: str | None) -> Iterator[None]:
    """One restore per store work directory at a time (an ``flock`` held while the restore runs); raises
    ``LocalStoreError`` when another restore holds it."""
    from blobstate.errors import LocalStoreError

    if work_dir is None:
        yield
        return
    os.makedirs(work_dir, exist_ok=True)
    fd = try_lock(os.path.join(work_dir, RESTORE_LOCK))
    if fd is None:
        raise LocalStoreError(f"another restore with the work directory {work_dir} is running")
    try:
        yield
    finally:
        os.close(fd)
