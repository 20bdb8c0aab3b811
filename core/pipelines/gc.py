"""``blobstate gc``: expired TTL leases and orphans, over every store of a repository.

- A blob whose TTL expired is deleted, unless a retained snapshot references it (then its TTL is removed: a
  commit whose cleanup never ran is healed, never broken).
- An orphan (no retained index references it, no open commit in this host's journal planned it) is deleted only
  once it is older than the TTL (staged cleanup: a commit in flight on another host is younger than that).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from blobstate import workdir
from blobstate.journal.file import Journal
from blobstate.journal.projection import project
from blobstate.model import StoreKey
from blobstate.repository import Repository


@dataclass
class GcReport:
    """What gc found and did for one store key."""

    key: StoreKey
    expired_deleted: list[str] = field(default_factory=list)
    expired_healed: list[str] = field(default_factory=list)
    orphans_deleted: list[str] = field(default_factory=list)
    checkpoints_pruned: list[str] = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "expiredDeleted": self.expired_deleted,
                "expiredHealed": self.expired_healed, "orphansDeleted": self.orphans_deleted,
                "checkpointsPruned": self.checkpoints_pruned, "skipped": self.skipped}


def discover_keys(repo: Repository) -> list[StoreKey]:
    """Store keys with checkpoints in the log, plus any store prefix holding blobs or indexes."""
    keys = set(repo.log.keys())
    for info in repo.store.list(""):
        parts = info.blob_id.split("/")
        if len(parts) >= 5 and parts[3] in ("blobs", "indexes", "ttl") and parts[0] != "checkpoints":
            try:
                keys.add(StoreKey(parts[0], parts[1], parts[2]))
            except Exception:  # noqa: BLE001 - not a blobstate object
                continue
    return sorted(keys)


def in_flight_ids(work_base: str | None, repo_url: str, key: StoreKey) -> set[str]:
    """Blob ids planned by commits still open in this host's journal of ``key``."""
    path = os.path.join(workdir.store_work_dir(repo_url, key, work_base), workdir.JOURNAL)
    states = project(Journal(path).read().events)
    return {b for s in states.values() if s.is_open for b in s.blob_ids}


def collect(repo: Repository, key: StoreKey, *, now_ms: int, ttl_ms: int, retain: int | None = None,
            dry_run: bool = False, work_base: str | None = None) -> GcReport:
    """Garbage-collect one store key (see the module docstring). ``now_ms``, ``ttl_ms`` in milliseconds.

    ``retain``: checkpoints kept; default: the retention the latest snapshot's writer recorded (every checkpoint
    when it recorded none). A store whose log holds no checkpoint while it has indexes is skipped: the wrong
    ``--log`` must never make every snapshot an orphan.
    """
    report = GcReport(key)
    history = repo.log.history(key)
    if not history:
        if any(True for _ in repo.store.list(f"{key.prefix}/indexes")):
            report.skipped = (f"the checkpoint log {repo.log.url or repo.url} has no checkpoint of {key}, but the "
                              "repository has snapshot indexes: is --log right? nothing deleted")
            return report
    try:
        if retain is None and history:
            retain = repo.read_index(history[-1]).retain
        retained = history[-retain:] if retain else history
        referenced = repo.retained_references(retained)
    except Exception as exc:  # noqa: BLE001 - never delete on incomplete knowledge
        report.skipped = f"a retained snapshot index is unreadable: {exc}"
        return report
    referenced |= in_flight_ids(work_base, repo.url, key)
    for blob_id in repo.store.expired(key.prefix, now_ms):
        if blob_id in referenced:
            report.expired_healed.append(blob_id)
        else:
            report.expired_deleted.append(blob_id)
    expired = set(report.expired_deleted)
    for info in repo.store.list(key.prefix):
        kind = posixpath.basename(posixpath.dirname(info.blob_id))
        if kind not in ("blobs", "indexes") or info.blob_id in referenced or info.blob_id in expired:
            continue
        if info.modified_ms is not None and now_ms - info.modified_ms >= ttl_ms:
            report.orphans_deleted.append(info.blob_id)
    if retain and len(history) > retain:
        report.checkpoints_pruned = [cp.checkpoint_id for cp in history[:-retain]]
    if not dry_run:
        repo.store.remove_ttl_many(report.expired_healed)
        repo.store.delete_many(report.expired_deleted + report.orphans_deleted)
        if report.checkpoints_pruned and retain:
            repo.log.prune(key, retain)  # their blobs become orphans, reclaimed once older than the TTL
    return report
