"""The local work directory of a store: journal, lock, checksum cache, local checkpoint directories, and the
destinations restores of the store have made.

``<base>/<repository id>/<job>/<task>/<store>/`` where ``<base>`` is the settings' work directory base
(``Settings.work_base``: ``BLOBSTATE_WORK_DIR``, ``--work-dir``, or platformdirs' user state dir; handed in by the
caller) and the repository id is the one its marker records (``host_key``): two repositories of one store key
stay apart even when one URL reaches both (issue 39 case 8). Before, the directory was named by a hash of the URL
(``repository_hash``); ``blobstate.repository.host`` moves such a directory to its new place when its journal is
provably this repository's.

A local checkpoint directory is named by its checkpoint id and holds the store's files only: nothing of
blobstate's is written inside it, so no name of a user's file is taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator

from blobstate.config.options import split_url
from blobstate.local.files import replace_file, try_lock
from blobstate.model.records import StoreKey

CHECKPOINTS = "checkpoints"
JOURNAL = "journal.log"
CRC_CACHE = "crc-cache.json"
LOCK = "lock"
RESTORED = "restored.json"
LAST_COMPLETED = "last-completed.json"  # the checkpoint whose TTLs this host last removed (``last_completed``)
RESTORE_LOCK = "restore.lock"
OBJECT_CACHE = "object-cache"  # a writer's object cache when its work directory lies under no base


def repository_hash(repo_url: str) -> str:
    """The 12 hex digits that named repository ``repo_url``'s directories under the base before they were named by
    the repository's id (and still name those of a repository from before the marker, which has no id). The URL's
    query (storage options, perhaps a rotating token) does not take part."""
    return hashlib.sha256(split_url(repo_url)[0].encode()).hexdigest()[:12]


_ID = re.compile(r"\A[0-9a-f]{32}\Z")
_HOST_KEY = re.compile(r"\A(?:[0-9a-f]{32}|[0-9a-f]{12})\Z")


def host_key(repository_id: str, repo_url: str) -> str:
    """The name of a repository's directories under the base (its work directories, its object cache): the
    repository's id from its marker (32 hex), never its URL: two repositories reached at one URL (one bucket name on
    two endpoints, two accounts) never share a journal, a lock or a cache, and one repository reached at two URLs
    keeps one. A marker id of another shape is hashed to 32 hex; a repository from before the marker (no id) keeps
    ``repository_hash(repo_url)``."""
    if _ID.match(repository_id or ""):
        return repository_id
    if repository_id:
        return hashlib.sha256(f"repository id {repository_id}".encode()).hexdigest()[:32]
    return repository_hash(repo_url)


def store_work_dir(repository: str, key: StoreKey, base: str) -> str:
    """The work directory of ``key`` in the repository whose host key (``host_key``) is ``repository``, under
    ``base`` (the work directory base). Raises ``ValueError`` for anything but a host key (a URL)."""
    if not _HOST_KEY.match(repository):
        raise ValueError(f"not a repository's host key (its id: workdir.host_key): {repository[:80]!r}")
    return os.path.join(base, repository, key.job, key.task, key.store)


def url_keyed_work_dir(repo_url: str, key: StoreKey, base: str) -> str:
    """Where a blobstate before issue 39 kept ``key``'s work directory of the repository at ``repo_url`` under
    ``base``: named by the URL's hash (``repository_hash``)."""
    return os.path.join(base, repository_hash(repo_url), key.job, key.task, key.store)


def base_of(work_dir: str, repository: str, key: StoreKey) -> str | None:
    """The base ``work_dir`` lies under when it is ``key``'s work directory of the repository whose host key is
    ``repository`` there (``store_work_dir``'s layout); None for a work directory placed elsewhere."""
    path = os.path.abspath(work_dir)
    base = path
    for _ in range(4):  # <base>/<host key>/<job>/<task>/<store>
        base = os.path.dirname(base)
    return base if store_work_dir(repository, key, base) == path else None


def last_completed(work_dir: str) -> str | None:
    """The checkpoint id whose post-commit cleanup last completed from ``work_dir`` (this host), if any."""
    try:
        with open(os.path.join(work_dir, LAST_COMPLETED), encoding="utf-8") as fh:
            return str(json.load(fh)["checkpointId"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
