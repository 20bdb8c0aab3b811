"""Detect and heal lost blobs: a snapshot never references a blob the store no longer has.

A blob can go missing behind a commit's back: deleted by hand, lost by the store, or deleted by a gc that saw its
TTL expire while its writer was paused (the commit then lands referencing it anyway). Two places look:

- before a commit builds its index (``plan_heal``): every blob the new snapshot reuses from the previous one must
  be in the store; a missing one is uploaded again from the local checkpoint, whose file has the same size and
  CRC32C (that is why the diff reused it);
- after a commit point reached late, and in recovery (``heal_committed``): every blob the committed snapshot
  references must be in the store; a missing one is uploaded again from the commit's local checkpoint.

Either way the blob is re-uploaded under the *same* blob id, so every snapshot that references it (older retained
ones included) restores again. A commit's index can be lost the same way (it carries a TTL until the commit
completes): the committer keeps a copy of the index bytes in its work directory until the commit completes or
aborts (``save_index_copy``), and healing puts it back from there; a delta commit keeps its changelog bytes the
same way (``kind="changelog"``) and ``heal_blob`` puts a lost changelog back. The cost is one walk of the store's
own ``blobs/`` prefix (never a LIST of the whole repository), reported in the benchmark as requests per commit
(``bench/requests.py``).

When a snapshot commit walks (``HealWalks``): only when it reuses a blob, and not when the snapshot it reuses from is
one this committer committed itself and saw through: walked (or reusing from one it saw through in turn), landed
and cleaned up on time (its TTLs removed within half its TTL of its start, so no gc could have taken its uploads as
expired: clocks differ by less than TTL/4) and nothing failed since. From then on every blob that snapshot
references is referenced by the latest record and carries no TTL: no gc (rules 2, 3, 13), no retention (it keeps
the latest) and no abort (it never deletes what a retained record references) deletes it, so nothing the protocol
does can have lost it since. What is outside the protocol (a blob deleted by hand, lost by the store) is found by
the walk every ``HEAL_WALK_EVERY``-th snapshot of an open committer and by every fresh one (a new process walks
before its first snapshot), and ``verify`` names it meanwhile. The walk runs concurrently with the previous index's
read (``HealWalks.prefetch``), so it costs no round trip of its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from blobstate.config.options import redact
from blobstate.local.checksum import crc32c_bytes, crc32c_file
from blobstate.model import references
from blobstate.model.index import FileIndex, SnapshotIndex
from blobstate.model.layout import monotonic
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.interfaces import FileRange, PutRequest
from blobstate.repository.repo import Repository

log = logging.getLogger(__name__)
T = TypeVar("T")

#: an open committer's snapshot commits skip the walk of ``blobs/`` at most this many times minus one in a row
HEAL_WALK_EVERY = 16
#: seconds a walk made beside the previous index's read stays the commit's (older: the commit walks again)
PREFETCHED_WALK_S = 60.0


def present_blobs(repo: Repository, key: StoreKey) -> set[str]:
    """Every object id under ``key``'s own prefix: its blobs and its snapshot indexes (leases left out), from one
    walk of that prefix, so that a writer learns from the same listing whether an index it holds is still stored
    (``put_back_indexes``)."""
    return {info.blob_id for info in repo.store.list(key.prefix)}


def put_back_indexes(repo: Repository, records: Iterable[Checkpoint], present: set[str]) -> list[str]:
    """The heal of an index a writer used from this host's object cache (issue 39 case 12): every snapshot record of
    ``records`` whose index ``present`` (a walk of the store's prefix, ``present_blobs``) lacks is put back, under
    its id and permanent (its record is committed), from the object cache's copy when that copy's bytes are the ones
    the record names (``Repository.cached_index``). Returns the ids put back; one without a verified copy is left
    (``verify`` names it; the diff of a next commit against it then uploads everything, rule 8)."""
    healed = []
    for cp in records:
        if cp.is_delta or cp.is_group or cp.index_blob_id in present or cp.index_blob_id in healed:
            continue
        data = repo.cached_index(cp)
        if data is None:
            log.warning("the snapshot index %s of checkpoint %s of %s is missing from the store and this host holds "
                        "no verified copy of it: that checkpoint does not restore", cp.index_blob_id,
                        cp.checkpoint_id, cp.store_key)
            continue
        log.warning("the snapshot index %s of checkpoint %s of %s is missing from the store; putting it back from "
                    "this host's verified copy", cp.index_blob_id, cp.checkpoint_id, cp.store_key)
        repo.store.put(PutRequest(cp.index_blob_id, data))
        healed.append(cp.index_blob_id)
    return healed


def chunk_puts(f: FileIndex, path: str, wanted: Iterable[str], ttl_ms: int | None) -> list[PutRequest]:
    """Put requests for the chunks of ``f`` whose blob ids are in ``wanted``, read from the local file ``path``
    (which must hold ``f``'s content), under their recorded blob ids and offsets, stored as recorded (``codec``)."""
    wanted = set(wanted)
    return [PutRequest(blob.blob_id, FileRange(path, blob.offset, length), ttl_ms, blob.codec)
            for blob, length in f.chunk_ranges() if blob.blob_id in wanted]


def plan_heal(files: Mapping[str, FileIndex], local_paths: Mapping[str, str], present: set[str],
              new_blob_ids: set[str], ttl_ms: int) -> list[PutRequest]:
    """Re-uploads of the reused blobs (referenced by ``files`` but not about to be uploaded) that ``present`` lacks.

    ``local_paths``: relative path -> the local checkpoint's file, whose content the diff found equal to the
    index entry's.
    """
    puts: list[PutRequest] = []
    for rel, f in files.items():
        missing = {b.blob_id for b in f.blobs} - new_blob_ids - present
        if missing:
            log.warning("blobs of %s are missing from the store (%d); uploading them again from the local "
                        "checkpoint under the same ids", rel, len(missing))
            puts.extend(chunk_puts(f, local_paths[rel], missing, ttl_ms))
    return puts


class HealWalks:
    """When the snapshot commits of one committer walk the store's ``blobs/`` (rule 7; the module docstring says
    why a walk may be skipped), and the walk itself.

    ``repo``, ``key``: the store; ``every``: walks are skipped at most ``every - 1`` times in a row."""

    def __init__(self, repo: Repository, key: StoreKey, *, every: int = HEAL_WALK_EVERY) -> None:
        self.repo = repo
        self.key = key
        self.every = max(1, every)
        self.whole: str | None = None  # the checkpoint id of this committer's last snapshot seen through
        self.skipped = 0
        self._prefetched: tuple[str, float, set[str]] | None = None  # (previous id, monotonic s, blob ids)
        #: what the last ``plan`` knew of the store's prefix (a walk of it, its own or ``prefetch``'s), else None
        self.listing: set[str] | None = None
        self._stored: list[Checkpoint] = []  # records whose indexes ``prefetch``'s walk checks (``put_back_indexes``)

    def needed(self, previous_id: str | None) -> bool:
        """True unless the snapshot reusing from ``previous_id`` may skip the walk: that snapshot is the one this
        committer saw through (``whole``), and fewer than ``every - 1`` walks were skipped in a row."""
        return previous_id is None or previous_id != self.whole or self.skipped >= self.every - 1

    def prefetch(self, previous_id: str, read: Callable[[], T], *, stored: Iterable[Checkpoint] = ()) -> T:
        """``read()`` (the previous index's fetch); when the next commit will walk, the walk runs beside it
        (``BlobStore.map_concurrent``) and is kept for that commit, whose ``plan`` then puts back the index of any of
        the snapshot records ``stored`` (the previous one, the view's: read through the object cache) the walk
        does not show (``put_back_indexes``, issue 39 case 12)."""
        if not self.needed(previous_id):
            return read()
        results = self.repo.store.map_concurrent(lambda job: job(), [read, lambda: present_blobs(self.repo, self.key)])
        self._prefetched = (previous_id, monotonic(), results[1])  # type: ignore[arg-type]
        self._stored = list(stored)
        return results[0]  # type: ignore[no-any-return]

    def plan(self, previous_id: str | None, files: Mapping[str, FileIndex], local_paths: Mapping[str, str],
             new_blob_ids: set[str], ttl_ms: int) -> tuple[list[PutRequest], bool]:
        """``plan_heal`` of a commit whose new snapshot lists ``files`` and reuses from ``previous_id``, walking
        only when it reuses a blob and ``needed`` says so (the walk made by ``prefetch`` if it is fresh). Returns
        the re-uploads and whether it walked; ``listing`` then holds what the walk (or a fresh ``prefetch``'s, even
        when nothing is reused) saw under the store's prefix, and an index ``prefetch`` was told of that it lacks is
        put back. Until ``done``, the next commit walks (this one may fail)."""
        prefetched, self._prefetched = self._prefetched, None
        fresh = (prefetched is not None and prefetched[0] == previous_id
                 and monotonic() - prefetched[1] < PREFETCHED_WALK_S)
        self.listing = prefetched[2] if fresh and prefetched is not None else None
        stored, self._stored = self._stored, []
        if self.listing is not None and stored:  # a cached index is a read saved, never a loss hidden
            put_back_indexes(self.repo, stored, self.listing)
        reused = any(b.blob_id not in new_blob_ids for f in files.values() for b in f.blobs)
        walk = reused and self.needed(previous_id)
        self.whole = None  # a commit in flight: ``done`` says what it left, a failure leaves the next one walking
        if not walk:
            return [], False
        if self.listing is None:
            self.listing = present_blobs(self.repo, self.key)
        return plan_heal(files, local_paths, self.listing, new_blob_ids, ttl_ms), True

    def done(self, checkpoint_id: str, *, walked: bool, whole: bool) -> None:
        """After snapshot ``checkpoint_id`` committed: ``walked`` as ``plan`` said; ``whole`` when it landed and its
        cleanup finished within half its TTL of its start, without a failure."""
        self.skipped = 0 if walked else self.skipped + 1
        self.whole = checkpoint_id if whole else None

    def forget(self) -> None:
        """Something failed or was recovered: the next snapshot walks."""
        self.whole = None
        self._prefetched = None


def index_copy_path(work_dir: str, commit_id: str, *, kind: str = "index") -> str:
    """Where the committer keeps the bytes of ``commit_id``'s index (``kind="changelog"``: of its changelog) until
    the commit completes or aborts."""
    return os.path.join(work_dir, f"{kind}-{commit_id}.{'json' if kind == 'index' else 'bin'}")


def save_index_copy(work_dir: str, commit_id: str, data: bytes, *, kind: str = "index", sync: bool = True) -> None:
    """Keep ``data`` (the commit's index or changelog bytes) in the work directory before it is uploaded; with
    ``sync``, durably (fsync)."""
    path = index_copy_path(work_dir, commit_id, kind=kind)
    with open(path, "wb") as fh:
        fh.write(data)
        if sync:
            fh.flush()
            os.fsync(fh.fileno())


def load_index_copy(work_dir: str, commit_id: str, crc32c: int | None, size: int | None, *,
                    kind: str = "index") -> bytes | None:
    """The kept bytes of ``commit_id`` when they match the size and CRC32C recorded for them, else None."""
    try:
        with open(index_copy_path(work_dir, commit_id, kind=kind), "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data if len(data) == size and crc32c_bytes(data) == crc32c else None


def drop_index_copy(work_dir: str, commit_id: str, *, kind: str = "index") -> None:
    """Forget the kept bytes of ``commit_id`` (idempotent)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(index_copy_path(work_dir, commit_id, kind=kind))


def heal_blob(repo: Repository, key: StoreKey, blob_id: str, data: bytes | None) -> bool:
    """Make sure the committed blob ``blob_id`` (a delta's changelog) exists, putting ``data`` back when it was
    lost; returns False when it is missing and ``data`` is None (nothing to heal from). The blob is permanent."""
    if blob_id in present_blobs(repo, key):
        return True
    if data is None:
        return False
    log.warning("the committed changelog %s of %s was lost; putting it back", blob_id, key)
    repo.store.put(PutRequest(blob_id, data, codec=repo.metadata_codec))
    return True


def heal_committed(repo: Repository, index: SnapshotIndex, index_blob_id: str, index_bytes: bytes | None,
                   local_root: str | None) -> list[str]:
    """Make sure the index ``index_blob_id`` and every blob ``index`` references exist; put the index back from
    ``index_bytes`` and upload missing blobs again from ``local_root`` (the commit's local checkpoint), each only
    when the local file still has the recorded size and CRC32C. Everything healed is permanent (no TTL): it
    belongs to a committed snapshot.

    Returns the ids that are still missing (could not be healed here: no local copy, or it changed); the next
    backup of the store uploads their files again (``plan_heal``), and ``verify`` reports them.
    """
    key = index.store_key
    present = present_blobs(repo, key)  # its blobs and its indexes: one walk
    if index_blob_id not in present:
        if index_bytes is None:
            return [index_blob_id]
        log.warning("the committed index %s of %s was lost; putting it back", index_blob_id, key)
        repo.store.put(PutRequest(index_blob_id, index_bytes))
    files = index.files()
    missing = {rel: {b.blob_id for b in f.blobs} - present for rel, f in files.items()}
    missing = {rel: ids for rel, ids in missing.items() if ids}
    if not missing:
        return []
    puts: list[PutRequest] = []
    unhealed: list[str] = []
    for rel, ids in missing.items():
        f = files[rel]
        path = os.path.join(local_root, *rel.split("/")) if local_root else None
        if path is None or not _holds(path, f):
            unhealed.extend(sorted(ids))
            continue
        puts.extend(chunk_puts(f, path, ids, None))
    log.warning("committed snapshot %s of %s referenced %d missing blobs; re-uploading %d from the local "
                "checkpoint", index.checkpoint_id, index.store_key, sum(map(len, missing.values())), len(puts))
    repo.store.put_many(puts)
    return unhealed


def _holds(path: str, f: FileIndex) -> bool:
    """True when the local file at ``path`` has ``f``'s size and CRC32C."""
    try:
        return os.path.getsize(path) == f.size_in_bytes and crc32c_file(path) == f.crc32c
    except OSError:
        return False


@dataclass(frozen=True)
class HealSources:
    """What this host can put a lost committed object back from: ``blobs`` maps a blob id to its bytes (a changelog,
    a snapshot index), ``dirs`` a snapshot index's blob id to the local checkpoint directory whose files it lists."""

    blobs: Mapping[str, bytes] = field(default_factory=dict)
    dirs: Mapping[str, str] = field(default_factory=dict)

    def merged(self, other: HealSources | None) -> HealSources:
        """Both sources (``other``'s entries win)."""
        if other is None:
            return self
        return HealSources({**self.blobs, **other.blobs}, {**self.dirs, **other.dirs})


def heal_record(repo: Repository, checkpoint: Checkpoint, sources: HealSources) -> list[str]:
    """Check every object the record ``checkpoint`` references and put back what is missing from ``sources``, for
    every record kind: a snapshot's index and blobs (``heal_committed``), a delta's changelog (``heal_blob``), each
    part of a group record as its own snapshot or delta. Returns the ids still missing (nothing on this host to put
    them back from: ``verify`` names them, the next snapshot of a file uploads it again)."""
    def read(record: Checkpoint) -> SnapshotIndex:  # the kept copy first
        data = sources.blobs.get(record.index_blob_id)
        if data is None:
            return repo.read_index(record)
        return SnapshotIndex.from_bytes(data, source=f"the kept copy of {record.index_blob_id}")

    missing: list[str] = []
    for ref in references.walk_references([checkpoint], read):
        record, own = ref.record, ref.own
        if record.is_inline:
            continue  # durable with its record: nothing to check or put back
        if record.is_delta:
            missing += [] if heal_blob(repo, record.store_key, own, sources.blobs.get(own)) else [own]
        elif ref.index is None:
            log.error("the index %s of committed checkpoint %s is unreadable and this host has no copy of it (%s)",
                      own, record.checkpoint_id, redact(str(ref.error)))
            missing.append(own)
        else:
            missing += heal_committed(repo, ref.index, own, sources.blobs.get(own), sources.dirs.get(own))
    return missing
