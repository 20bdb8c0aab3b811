"""``blobstate gc``: expired TTL blobs and orphans, over every store of a repository.

Rules (docs/architecture.md, "Safety"), each keeping a snapshot from ever being lost while several gc runs and
paused writers overlap:

- Candidates are listed *before* the checkpoint log and the indexes are read: a commit that landed before the
  listing is always seen as a reference.
- A blob is protected by the expiry its *writer* recorded (a lease, a tag), never by this gc's idea of the TTL: a
  blob whose TTL expired is deleted, unless a retained snapshot references it (then its TTL is removed: a commit
  whose cleanup never ran is healed, never broken); a blob that still carries a TTL is never an orphan.
- An orphan (no TTL, no retained index references it, no open commit in this host's journal planned it) is
  deleted only once it is older than ``ttl_ms`` (staged cleanup).
- Nothing is deleted on incomplete knowledge: an unreadable retained index, or a log with no checkpoint of a store
  whose indexes exist (the wrong ``--log``), makes gc skip the store and say why.
- Every id is checked to be an object of the store's own prefix before it is deleted; a lease that names another
  store's object is reported (``foreign``), never acted on.
- Retention follows ``blobstate.chain`` (snapshots and the deltas they need); the records of a store with delta
  records are never pruned here (deltas land meanwhile: the writer prunes them, ``cleanup.apply_retention``).
- Temp files of interrupted exclusive creates (the file log's ``checkpoints/**.tmp-*``) are removed once older
  than ``ttl_ms``.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Any

from blobstate import workdir
from blobstate.chain import has_deltas, latest_snapshot, retention
from blobstate.journal.file import Journal
from blobstate.journal.projection import project
from blobstate.model import StoreKey
from blobstate.repository import Repository

FAR_FUTURE_MS = 1 << 62  # ``expired(prefix, FAR_FUTURE_MS)`` lists every blob that carries a TTL


@dataclass
class GcReport:
    """What gc found and did for one store key (or, with ``key`` None, for the repository's temp files)."""

    key: StoreKey | None
    expired_deleted: list[str] = field(default_factory=list)
    expired_healed: list[str] = field(default_factory=list)
    orphans_deleted: list[str] = field(default_factory=list)
    checkpoints_pruned: list[str] = field(default_factory=list)
    temporaries_deleted: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    skipped: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key) if self.key else None, "expiredDeleted": self.expired_deleted,
                "expiredHealed": self.expired_healed, "orphansDeleted": self.orphans_deleted,
                "checkpointsPruned": self.checkpoints_pruned, "temporariesDeleted": self.temporaries_deleted,
                "foreign": self.foreign, "skipped": self.skipped}


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
    when it recorded none).
    """
    report = GcReport(key)
    # 1. List first: anything committed before this point is in the log read below.
    with_ttl = set(repo.store.expired(key.prefix, FAR_FUTURE_MS))
    expired = set(repo.store.expired(key.prefix, now_ms))
    listing = list(repo.store.list(key.prefix))
    # 2. Then read what the retained snapshots reference.
    history = repo.log.history(key)
    if not history and any(posixpath.basename(posixpath.dirname(i.blob_id)) == "indexes" for i in listing):
        report.skipped = (f"the checkpoint log {repo.log.url or repo.url} has no checkpoint of {key}, but the "
                          "repository has snapshot indexes: is --log right? nothing deleted")
        return report
    deltas = has_deltas(history)
    try:
        newest = latest_snapshot(history)
        if retain is None and newest is not None:
            retain = repo.read_index(newest).retain
        expiring, retained = retention(history, retain) if retain else ([], history)
        referenced = repo.retained_references(retained)
    except Exception as exc:  # noqa: BLE001 - never delete on incomplete knowledge
        report.skipped = f"a retained snapshot index is unreadable, nothing deleted: {exc}"
        return report
    referenced |= in_flight_ids(work_base, repo.url, key)
    # 3. Decide, by the writers' recorded expiries.
    for blob_id in sorted(expired):
        if not (key.owns_blob(blob_id) or key.owns_index(blob_id)):
            report.foreign.append(blob_id)
        elif blob_id in referenced:
            report.expired_healed.append(blob_id)
        else:
            report.expired_deleted.append(blob_id)
    for info in listing:
        kind = posixpath.basename(posixpath.dirname(info.blob_id))
        if kind not in ("blobs", "indexes") or info.blob_id in referenced or info.blob_id in with_ttl:
            continue
        if not (key.owns_blob(info.blob_id) or key.owns_index(info.blob_id)):
            report.foreign.append(info.blob_id)
        elif info.modified_ms is not None and now_ms - info.modified_ms >= ttl_ms:
            report.orphans_deleted.append(info.blob_id)
    if retain and expiring and not deltas:
        report.checkpoints_pruned = [cp.checkpoint_id for cp in expiring]
    if not dry_run:
        repo.store.remove_ttl_many(report.expired_healed)
        repo.store.delete_many(report.expired_deleted + report.orphans_deleted)
        if report.checkpoints_pruned and retain:
            repo.log.prune(key, retain)  # their blobs become orphans, reclaimed once older than the TTL
    return report


def collect_temporaries(repo: Repository, *, now_ms: int, ttl_ms: int, dry_run: bool = False) -> GcReport:
    """Remove temp files of interrupted exclusive creates under ``checkpoints/`` older than ``ttl_ms``."""
    report = GcReport(None)
    report.temporaries_deleted = [t.blob_id for t in repo.store.temporaries("checkpoints")
                                  if t.modified_ms is not None and now_ms - t.modified_ms >= ttl_ms]
    if not dry_run:
        for blob_id in report.temporaries_deleted:
            repo.store.delete(blob_id)
    return report
