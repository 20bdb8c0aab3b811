"""``blobstate restore``: bring a directory to exactly the entries of a snapshot, downloading only what it lacks.

Samza's bulk restore, with Flink's write-to-temp-then-rename and checksums verified on every read, and Ozone's
reuse of files already present (``restore_plan``: kept, reused from a local checkpoint, or downloaded). In order:

1. the index is read and validated (names, blob ids under the store's own prefix, sizes);
2. an interrupted earlier restore of the destination is finished or undone (``swap.recover_interrupted``);
3. the destination is refused when a live process holds the store open (``LocalStore.check_destination``), or
   when it is not empty and no restore of this store made it, unless ``force`` (``RestoreRefused``; a dry run
   previews it anyway and says ``needs_force``);
4. everything that changes is staged inside the destination (on its own file system, mount points included):
   the files no plan can keep or reuse are fetched while the plan reads the kept ones (``download.Prefetch``),
   downloads verified as they stream (size, CRC32C, XXH3-128 when the index has it; a blob longer than the
   index declares is cut off at that length), files reused by hard link or copy, links and directories made;
5. the complete new tree is validated (``LocalStore.validate``, on a throw-away view) before anything changes;
6. the swap (``swap.Staging.swap``): all or nothing, undone on error, finished or undone after a crash;
7. permission bits and mtimes; the destination remembered in the work directory (never inside it).

With ``dry_run`` the same checks and plan run and the changes are returned, and nothing is written.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any

from blobstate.errors import IntegrityError, LocalStoreError, RestoreRefused, TreeInvalid
from blobstate.local import workdir
from blobstate.local.checksum import ChecksumCache
from blobstate.local.files import fsync_dir
from blobstate.model.index import DirIndex, FileIndex, SnapshotIndex, SymlinkIndex
from blobstate.model.progress import NoProgress, Progress
from blobstate.model.records import Checkpoint
from blobstate.plugin.interfaces import LocalStore
from blobstate.repository.repo import Repository
from blobstate.restoring.download import Prefetch, certain_downloads, download_files
from blobstate.restoring.plan import DEFAULT_VERIFY_KEPT, Entry, RestorePlan, check_verify_kept, plan_restore
from blobstate.restoring.swap import (
    Staging,
    join_rel,
    recover_interrupted,
    remove_tree,
    set_attributes,
    staging_names,
)

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did (or, with ``dry_run``, would do): the checkpoint, files kept / reused / downloaded /
    removed, bytes, ms; ``changes`` lists ``(action, path)`` for a dry run; ``recovered`` names the interrupted
    restores finished first; ``deltas_applied`` the deltas replayed after the snapshot."""

    checkpoint: Checkpoint
    files_total: int
    files_kept: int
    files_reused: int
    files_downloaded: int
    files_removed: int
    bytes_total: int
    bytes_downloaded: int
    duration_ms: float
    dry_run: bool = False
    changes: tuple[tuple[str, str], ...] = ()
    recovered: tuple[str, ...] = ()
    deltas_applied: int = 0  # delta records replayed after the snapshot (``blobstate.restoring.chain``)
    last_batch_id: int | None = None  # the batch the restored state is after, when it is a chain's
    needs_force: bool = False  # a dry run: the restore itself would be refused without ``--force``
    partition: int | None = None  # the partition of a partitioned store restored

    @property
    def batch_id(self) -> int | None:
        """The batch the restored state is after: the chain's last, else the snapshot's."""
        return self.last_batch_id if self.last_batch_id is not None else self.checkpoint.batch_id

    def to_json(self) -> dict[str, Any]:
        doc = {
            **self.checkpoint.summary_json(),
            "filesTotal": self.files_total,
            "filesKept": self.files_kept,
            "filesReused": self.files_reused,
            "filesDownloaded": self.files_downloaded,
            "filesRemoved": self.files_removed,
            "bytesTotal": self.bytes_total,
            "bytesDownloaded": self.bytes_downloaded,
            "durationMs": round(self.duration_ms, 3),
        }
        if self.partition is not None:
            doc["partition"] = self.partition
        if self.dry_run:
            doc["dryRun"] = True
            doc["needsForce"] = self.needs_force
            doc["changes"] = [{"action": a, "path": p} for a, p in self.changes]
        if self.recovered:
            doc["recovered"] = list(self.recovered)
        if self.deltas_applied:
            doc["deltasApplied"] = self.deltas_applied
            doc["lastBatchId"] = self.last_batch_id
        return doc


def recorded_store_type(repo: Repository, checkpoint: Checkpoint) -> str:
    """The store type the snapshot records (older snapshots: ``rocksdb`` if it has a ``CURRENT`` file)."""
    index = repo.read_index(checkpoint)
    if index.store_type:
        return index.store_type
    return "rocksdb" if "CURRENT" in index.files() else "dir"


def _check_may_replace(dest: str, work_dir: str | None, force: bool, skip: set[str], dry_run: bool) -> bool:
    """``RestoreRefused`` for a non-empty destination that no restore of this store made, unless ``force``; a dry
    run is never refused (it changes nothing) and returns True when the restore itself would need ``--force``."""
    content = sorted(set(os.listdir(dest)) - skip)
    if not content or force or workdir.restored_here(work_dir, dest):
        return False
    if dry_run:
        return True
    shown = ", ".join(repr(n) for n in content[:3]) + (", ..." if len(content) > 3 else "")
    entries = "1 entry" if len(content) == 1 else f"{len(content)} entries"
    raise RestoreRefused(f"{dest} is not empty ({entries}: {shown}) and no restore of this store made it: a restore "
                         "replaces everything in it. Pass --force to restore into it anyway, or choose a new or "
                         "empty directory")


def _make_destination(dest: str) -> list[str]:
    """Create ``dest`` and its missing parents; returns what was created, deepest first."""
    created = []
    path = dest
    while not os.path.lexists(path):
        created.append(path)
        path = os.path.dirname(path)
    for p in reversed(created):
        os.mkdir(p)
    return created


def restore_snapshot(repo: Repository, checkpoint: Checkpoint, dest: str, *, local_store: LocalStore,
                     work_dir: str | None = None, cache: ChecksumCache | None = None,
                     progress: Progress | None = None, validate: bool = True, force: bool = False,
                     dry_run: bool = False, verify_kept: str = DEFAULT_VERIFY_KEPT) -> RestoreResult:
    """Make ``dest`` hold exactly the entries of ``checkpoint``'s snapshot (see the module docstring).
    ``verify_kept``: how a file already there is known to be the snapshot's (``blobstate.restoring.plan``); a
    tree that does not validate while ``identity`` kept files unread is planned again reading every kept file.

    Raises ``ChecksumMismatch`` / ``BlobNotFound`` / ``CorruptIndexError`` / ``IntegrityError`` (exit code 3),
    ``RestoreRefused`` (exit 2), ``LocalStoreError`` (a live process holds the store, another restore runs): in
    every case the destination is as it was.
    """
    t0 = time.perf_counter()
    progress = progress or NoProgress()
    cache = cache or ChecksumCache(os.path.join(work_dir, workdir.CRC_CACHE) if work_dir else None)
    index: SnapshotIndex = repo.read_index(checkpoint)
    entries = index.entries()
    dest = os.path.realpath(os.path.abspath(dest))  # one path form throughout, symlinks to the destination resolved
    if os.path.lexists(dest) and not os.path.isdir(dest):
        raise RestoreRefused(f"{dest} exists and is not a directory")
    with workdir.restore_lock(None if dry_run else work_dir):  # a dry run writes nothing, not even a lock
        existed = os.path.isdir(dest)
        recovered: list[str] = []
        needs_force = False
        if existed:
            recovered = staging_names(dest) if dry_run else recover_interrupted(dest)
            local_store.check_destination(dest)
            needs_force = _check_may_replace(dest, work_dir, force, set(staging_names(dest)), dry_run)
        sources = workdir.local_checkpoint_dirs(work_dir) if work_dir else []
        sources.sort(key=lambda p: os.path.basename(p) != checkpoint.checkpoint_id)  # same checkpoint id first
        files = index.files()
        # the files no plan can keep or reuse are fetched while the plan reads the kept ones (``download``)
        ahead = certain_downloads(files, [dest, *sources]) if existed and not dry_run else {}
        prefetch = (Prefetch(repo, Staging.create(dest, avoid=_top_level(entries)), ahead, progress)
                    if ahead else None)
        try:
            for mode in (check_verify_kept(verify_kept), "full"):
                plan = plan_restore(dest, entries, cache=cache, is_mutable=local_store.is_mutable, sources=sources,
                                    skip=set(staging_names(dest)), verify=mode)
                bytes_down = sum(files[rel].size_in_bytes for rel in plan.download)
                if dry_run:
                    break
                try:
                    _apply(repo, plan, entries, dest, existed, local_store, progress, validate, prefetch)
                    break
                except TreeInvalid as exc:
                    if mode != "identity" or not (plan.keep or plan.reuse):
                        raise
                    _logger.warning("the restored tree of %s does not open with the files kept by their size and "
                                    "mtime (%s): planning again, every kept file read", checkpoint.store_key, exc)
                    prefetch = None  # its staging directory went with the failed attempt
        except BaseException:
            if prefetch is not None:
                prefetch.discard()
            raise
        if not dry_run:
            workdir.remember_restored(work_dir, dest)
    if not dry_run:
        for rel in [*plan.download, *plan.reuse]:
            if not local_store.is_mutable(rel):
                cache.remember(join_rel(dest, rel), files[rel].crc32c)
        cache.save()
    return RestoreResult(
        checkpoint=checkpoint, files_total=len(files), files_kept=sum(1 for r in plan.keep if r in files),
        files_reused=len(plan.reuse), files_downloaded=len(plan.download), files_removed=len(plan.removed),
        bytes_total=index.total_bytes(), bytes_downloaded=bytes_down,
        duration_ms=(time.perf_counter() - t0) * 1000, dry_run=dry_run,
        changes=tuple(plan.changes()) if dry_run else (), recovered=tuple(recovered), needs_force=needs_force,
    )


def _top_level(entries: dict[str, Entry]) -> set[str]:
    """The snapshot's top-level names (a staging directory's name must be none of them)."""
    return {rel for rel in entries if "/" not in rel}


def _apply(repo: Repository, plan: RestorePlan, entries: dict[str, Entry], dest: str, existed: bool,
           local_store: LocalStore, progress: Progress, validate: bool, prefetch: Prefetch | None = None) -> None:
    """Stage (into ``prefetch``'s staging directory when files were fetched ahead), validate, swap, then set
    attributes; on any error before the swap completes the destination is as it was (and a destination this
    restore created is removed again)."""
    created = [] if existed else _make_destination(dest)
    staging = prefetch.staging if prefetch is not None else Staging.create(dest, avoid=_top_level(entries))
    try:
        _stage(repo, plan, entries, staging, local_store, progress, prefetch)
        if validate and type(local_store).validate is not LocalStore.validate:
            _validate(plan, entries, dest, staging, local_store)
        local_store.check_destination(dest)
        staging.swap(plan.steps)
    except BaseException as exc:
        if prefetch is not None:
            prefetch.stop()  # nothing may still write into the staging directory removed next
        remove_tree(staging.root)
        for path in created:
            shutil.rmtree(path, ignore_errors=True)
        if isinstance(exc, OSError):
            raise LocalStoreError(f"restore into {dest} failed, the destination is as it was: "
                                  f"{type(exc).__name__}: {exc}") from exc
        raise
    for rel in [*plan.attributes, *sorted(plan.staged_dirs, key=lambda r: -r.count("/"))]:
        entry = entries[rel]
        set_attributes(join_rel(dest, rel), getattr(entry, "mode", None), entry.mtime_ns,
                       link=isinstance(entry, SymlinkIndex))
    staging.discard()


def _stage(repo: Repository, plan: RestorePlan, entries: dict[str, Entry], staging: Staging,
           local_store: LocalStore, progress: Progress, prefetch: Prefetch | None) -> None:
    for step in plan.steps:
        if step.has_new:
            os.makedirs(os.path.dirname(staging.new_path(step.rel)), exist_ok=True)
    for rel in plan.staged_dirs:  # parents before children
        os.mkdir(staging.new_path(rel), 0o700)
    for rel in plan.staged_links:
        link = entries[rel]
        assert isinstance(link, SymlinkIndex)
        os.symlink(link.target, staging.new_path(rel))
        set_attributes(staging.new_path(rel), None, link.mtime_ns, link=True)
    for rel, src in plan.reuse.items():
        target = staging.new_path(rel)
        if local_store.is_mutable(rel):
            shutil.copyfile(src, target, follow_symlinks=False)
        else:
            try:
                os.link(src, target, follow_symlinks=False)
            except OSError:
                shutil.copyfile(src, target, follow_symlinks=False)
    taken: set[str] = set()
    if prefetch is not None:
        prefetch.wait()
        taken = {rel for rel in plan.download if prefetch.take(rel)}
        for d in {os.path.dirname(staging.new_path(rel)) for rel in taken}:
            fsync_dir(d)
    rest = [rel for rel in plan.download if rel not in taken]
    if rest or prefetch is None:
        download_files(repo, {rel: entries[rel] for rel in rest}, staging.new_path, progress,  # type: ignore[misc]
                       sum(entries[rel].size_in_bytes for rel in rest))  # type: ignore[union-attr]
    for rel in [*plan.reuse, *plan.download]:
        f = entries[rel]
        assert isinstance(f, FileIndex)
        set_attributes(staging.new_path(rel), f.mode, f.mtime_ns)


def _validate(plan: RestorePlan, entries: dict[str, Entry], dest: str, staging: Staging,
              local_store: LocalStore) -> None:
    """``local_store.validate`` on a throw-away view of the complete new tree (hard links of immutable files,
    copies of the rest, so the hook can write nothing that reaches the destination)."""
    view = os.path.join(staging.root, "check")
    os.mkdir(view, 0o700)
    staged = {*plan.download, *plan.reuse}
    try:
        for rel, entry in entries.items():
            path = join_rel(view, rel)
            if isinstance(entry, DirIndex):
                os.mkdir(path, 0o700)
            elif isinstance(entry, SymlinkIndex):
                os.symlink(entry.target, path)
            else:
                src = staging.new_path(rel) if rel in staged else join_rel(dest, rel)
                if not local_store.is_mutable(rel):
                    try:
                        os.link(src, path, follow_symlinks=False)
                        continue
                    except OSError:
                        pass
                shutil.copyfile(src, path, follow_symlinks=False)
        try:
            local_store.validate(view)
        except IntegrityError as exc:
            raise TreeInvalid(str(exc)) from exc
    finally:
        remove_tree(view)
