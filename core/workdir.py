"""The local work directory of a store: journal, lock, checksum cache and local checkpoint directories.

``<base>/<repo hash>/<job>/<task>/<store>/`` where ``<base>`` is ``BLOBSTATE_WORK_DIR`` or platformdirs' user
state dir; the repository hash keeps two repositories of one store key apart.
"""

from __future__ import annotations

import hashlib
import os

import platformdirs

from blobstate.model import StoreKey

CHECKPOINTS = "checkpoints"
JOURNAL = "journal.log"
CRC_CACHE = "crc-cache.json"
LOCK = "lock"
MARKER = ".blobstate-checkpoint"


def default_base() -> str:
    return os.environ.get("BLOBSTATE_WORK_DIR") or platformdirs.user_state_dir("blobstate", appauthor=False)


def store_work_dir(repo_url: str, key: StoreKey, base: str | None = None) -> str:
    """The work directory of ``key`` in repository ``repo_url`` under ``base`` (default: ``default_base()``).

    The URL's query (storage options, perhaps a rotating token) does not take part: the same repository keeps
    its journal however it is reached."""
    from blobstate.storage_options import split_url

    digest = hashlib.sha256(split_url(repo_url)[0].encode()).hexdigest()[:12]
    return os.path.join(base or default_base(), digest, key.job, key.task, key.store)


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
