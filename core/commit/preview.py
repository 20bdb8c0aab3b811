"""``blobstate backup --dry-run``: what a backup would upload and drop, committing nothing.

The planner's own diff against the latest snapshot, on a local checkpoint taken in a temporary directory: no
commit lock, no journal, nothing written to the repository, and the temporary checkpoint removed again.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from blobstate.commit import planner
from blobstate.commit.planner import BackupPreview
from blobstate.errors import IntegrityError
from blobstate.local import workdir
from blobstate.local.checksum import ChecksumCache
from blobstate.model.chain import latest_snapshot
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository

__all__ = ["BackupPreview", "preview_backup"]


def preview_backup(repository: Repository, source: object, *, key: StoreKey, store_type: str, chunk_size: int,
                   work_dir: str) -> BackupPreview:
    """What a backup of ``source`` (a directory or a live handle) would upload and drop against the latest
    snapshot of ``key``. A latest index that does not read counts as none (the backup would upload everything).
    The local checkpoint is taken beside the store's local checkpoints when they exist (for hard links)."""
    latest = repository.log.latest(key)
    if latest is not None and latest.is_delta:
        latest = latest_snapshot(repository.log.history(key))
    try:
        prev = repository.read_index(latest) if latest is not None else None
    except IntegrityError:
        prev = None
    local_store = open_local_store(store_type)
    parent = workdir.checkpoints_dir(work_dir)
    tmp = tempfile.mkdtemp(prefix=".dry-run-", dir=parent if os.path.isdir(parent) else None)
    try:
        target = os.path.join(tmp, "checkpoint")
        local_store.create_checkpoint(source, target)
        scanned = planner.scan_directory(target, ChecksumCache(os.path.join(work_dir, workdir.CRC_CACHE)),
                                         is_mutable=local_store.is_mutable)
        plan = planner.diff(scanned, prev, key=key, chunk_size=chunk_size, ttl_ms=DEFAULT_TTL_MS)
        return BackupPreview.of(plan, prev)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
