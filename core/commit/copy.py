"""``blobstate copy``: replicate checkpoints of one repository into another (another region or cloud).

Each source record is committed at the target as a commit of the one commit engine (``blobstate.commit.engine``),
so the copy obeys every safety rule a backup does (the copy is in this room for that reason: every append is the
commit room's):

1. ``CommitStarted`` (the record's own checkpoint id as the commit id), ``UploadsPlanned``: every object the record
   references that the target does not hold for certain (its index, the index's data blobs, a changelog; a group's
   every part). Copy is a commit (issue 39 case 3): an object the one listing of the target store's prefix shows
   counts as held only when a retained target record references it or it carries no TTL mark
   (``StoreCopier.held``). One under a mark that no record references is another copy's or commit's leftover, which
   gc may take at any moment (a copy killed after its uploads, rerun from another host after their TTL): it is
   uploaded again, under this commit's own fresh TTL;
2. each object read from the source and written to the target with a TTL, verified on the way: an index or a
   changelog against the size and CRC32C its record declares, a file's data blobs against the size and CRC32C
   the index records for the file (all its chunks are read when one is missing, and wait in the work directory's
   staging, ``blobstate.commit.copy_staging``: swept when a killed copy leaves it, never in the clear from an
   encrypted source); a mismatch aborts the commit (``IntegrityError``, exit 3): nothing unverified is ever
   referenced at the target. Objects move as plain bytes through both repositories' codecs (``blobstate.codec``):
   read with the source's key, written with the target's, and a data blob stored as its index entry records it
   (``codec``), since the index is copied as it is;
3. the TTL budget (counted from when this copy commit began), then ``CommitEngine.append`` of the record, unchanged
   but for its generation (the target log's next) and its writer id marked as a copy's (``copied_by``): checkpoint
   id, batch id, query id, lineage and time stay the source's, so a Spark query restarts from the copy as from the
   source (``blobstate.spark.committed.alignment`` reads batch and query ids); then ``CleanupExecutor.finish`` (TTLs
   removed, a late append healed, the retention the source writer recorded applied at the target); then rule 5's
   heal check, whatever the timing (``StoreCopier.heal``): every object the record references is looked for in one
   listing, and one that is gone (counted as held, then taken by gc before the append) is put back from the source,
   permanent.

Records are copied in the source log's generation order, and only records newer than what the target already
holds: after the newest source record whose checkpoint id the target has (none: all of them, when the target's
newest came from a copy, or the source's oldest snapshot follows it; an empty target: all). A copy
only fast-forwards (``to_copy``): a target that holds a record of its own after the last one it shares with the
source, or shares none that the source's oldest follows, took writes of its own (a fail-over) and is refused
(``DivergedTargetError``, exit 4), so the source's records are never put on top of the target's newest state and
the source's recorded retention never prunes it. A record the target holds is never appended twice (its id
is looked up first), so a rerun after a kill finishes the job: recovery of this host's journal (run when the
target store's committer opens) aborts a copy commit cut before its append (its uploads are deleted or expire)
and finishes one cut after it; a rerun with nothing new uploads nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from blobstate.commit import healing
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.copy_staging import Staging
from blobstate.commit.engine import landed_late
from blobstate.commit.opening import open_store
from blobstate.commit.point import check_ttl_budget
from blobstate.config.options import display_url
from blobstate.errors import BlobstateError, ChecksumMismatch, DivergedTargetError
from blobstate.journal import events as ev
from blobstate.local.checksum import Crc32cSink, crc32c_bytes
from blobstate.model import layout
from blobstate.model.chain import overridden_parts
from blobstate.model.index import SnapshotIndex
from blobstate.model.layout import DEFAULT_TTL_MS, FAR_FUTURE_MS, ObjectKind, now_ms
from blobstate.model.records import DELTA, GROUP, MAX_TEXT, Checkpoint, StoreKey
from blobstate.model.retention import KEEP_ALL, RetentionPolicy
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository import host
from blobstate.repository.repo import Repository, declared

log = logging.getLogger(__name__)

#: what a record a copy appended carries before its source writer's id (``copied_by``)
COPIED = "blobstate-copy:"


@dataclass
class CopyReport:
    """What a copy did for one store: checkpoints copied (ids, in order), held already at the target, skipped
    (older than what the target holds, or past ``upto``), blobs and bytes uploaded, blobs the target had."""

    key: StoreKey
    copied: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    blobs_uploaded: int = 0
    bytes_uploaded: int = 0
    blobs_present: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"store": str(self.key), "copied": self.copied, "present": self.present, "skipped": self.skipped,
                "blobsUploaded": self.blobs_uploaded, "bytesUploaded": self.bytes_uploaded,
                "blobsPresent": self.blobs_present}


def to_copy(source: list[Checkpoint], target: list[Checkpoint], upto: Checkpoint | None = None, *,
            follows: Callable[[], str | None] | None = None
            ) -> tuple[list[Checkpoint], list[Checkpoint], list[Checkpoint]]:
    """``(to copy, held already, skipped)`` of the source history ``source`` against the target's ``target``
    (both oldest generation first), in the source's order (see the module docstring). Pure but for ``follows``.

    Fast-forward only (git's push): ``DivergedTargetError`` (exit 4) when the target holds a record the source does
    not after the last record they share (its own writer committed there: a fail-over), or when they share none and
    the target is not empty, unless the target's newest record came from a copy (its writer id marked ``COPIED``,
    ``copied_by``: the source pruned what it had copied, as a source with ``--retain N`` does after N backups) or the
    source's oldest record follows it (``follows()``: the index id the source's oldest snapshot names as its
    previous, ``prevSnapshotIndexBlobId``; None when unknown: a target an older blobstate copied into). A void
    record at the target (``voids``: the target's own bookkeeping of lost parts) holds no state and never counts as
    diverging."""
    held = {cp.checkpoint_id for cp in target}
    ids = {cp.checkpoint_id for cp in source}
    matched = [i for i, cp in enumerate(source) if cp.checkpoint_id in held]
    states = [cp for cp in target if not cp.voids]
    if matched:
        last = source[matched[-1]].checkpoint_id
        at = max(i for i, cp in enumerate(target) if cp.checkpoint_id == last)
        since = [cp for cp in target[at + 1:] if cp.checkpoint_id not in ids and not cp.voids]
        if since:
            raise _diverged(source, since, f"after checkpoint {last}, the last one both hold")
        after = source[matched[-1] + 1:]
    elif states and source and not states[-1].writer_id.startswith(COPIED):  # the target's newest is its own
        parent = follows() if follows is not None else None
        if parent is None or parent != states[-1].index_blob_id:
            raise _diverged(source, states, "and none that the source's oldest checkpoint follows from (the "
                            "source pruned every checkpoint they shared, or the target never was its copy)")
        after = list(source)
    else:
        after = list(source)
    fresh = [cp for cp in after if cp.checkpoint_id not in held]
    if upto is not None:
        fresh = [cp for cp in fresh if cp.generation <= upto.generation]
    chosen = {cp.checkpoint_id for cp in fresh}
    present = [cp for cp in source if cp.checkpoint_id in held]
    return fresh, present, [cp for cp in source if cp.checkpoint_id not in chosen and cp.checkpoint_id not in held]


def copied_by(writer_id: str) -> str:
    """The writer id a copied record carries at the target: the source's, marked as a copy's (``COPIED``), so a
    later copy tells the target's records that came from a copy from those its own writer committed."""
    return writer_id if writer_id.startswith(COPIED) else (COPIED + writer_id)[:MAX_TEXT]


def _diverged(source: list[Checkpoint], own: list[Checkpoint], where: str) -> DivergedTargetError:
    """The refusal of a copy onto a target that moved on: names the target's own records and what to do."""
    key = own[-1].store_key
    names = ", ".join(f"{cp.checkpoint_id} (generation {cp.generation}, batch {cp.batch_id})" for cp in own[-5:])
    newest = f"; the source's newest is {source[-1].checkpoint_id}" if source else ""
    return DivergedTargetError(
        f"refusing to copy {key}: the target holds {len(own)} checkpoint(s) of its own, which the source does not "
        f"hold, {where}: "
        f"{names}{newest}. Its own writer committed there (a fail-over?); copying would put the source's records on "
        "top of the target's newest state and apply the source's retention to it. Stop the writer of one side, "
        "then either copy the other way (the target is now the primary), or, to make the target a copy of the "
        "source again, restore what you need from it and remove that store from the target (or copy into a new "
        "repository)", own=tuple(cp.checkpoint_id for cp in own))


class StoreCopier:
    """Copies the records of one store from ``source`` to ``target`` (see the module docstring).

    ``work_dir``: the target store's work directory on this host (journal and lock, as a backup to the target
    would use; a file's chunks wait there, ``blobstate.commit.copy_staging``); ``ttl_ms``: the TTL of the uploads
    until their commit completes; ``voided``: the ids of the source's parts that nothing needs
    (``model.chain.overridden_parts`` of its history: a lost snapshot part or a voided group's), copied as records
    only, their objects left out."""

    def __init__(self, key: StoreKey, source: Repository, target: Repository, *, work_dir: str,
                 ttl_ms: int = DEFAULT_TTL_MS, max_concurrency: int = 8,
                 voided: frozenset[str] | set[str] = frozenset()) -> None:
        self.key, self.source, self.target = key, source, target
        self.ttl_ms = ttl_ms
        self.voided = voided
        self.committer = StoreCommitter(key, target, work_dir=work_dir, ttl_ms=ttl_ms, max_concurrency=max_concurrency,
                                        retention=RetentionPolicy(last=KEEP_ALL), writer_id="blobstate-copy")
        self.present: set[str] = set()  # what the target's listing shows (and this copy uploaded since)
        self.mine: set[str] = set()  # what this copy uploaded or committed: held for certain
        self._marked: set[str] | None = None  # lease mode: every object of the store under a TTL mark
        self._references: set[str] | None = None  # what the target's retained records reference
        self.staging: Staging | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        self.committer.close()

    def open(self, source: list[Checkpoint], upto: Checkpoint | None = None
             ) -> tuple[list[Checkpoint], list[Checkpoint], list[Checkpoint]]:
        """Open the target through the Open door (``blobstate.commit.opening.open_store``): this copy's committer
        pinned at one read of the target's records, and ``to_copy(source, that read, upto)`` planned from exactly it,
        so a rival copy that appends after the read fences this one's first append instead of being appended again.
        Returns ``to_copy``'s ``(records, present, skipped)``; raises what the read raises, with the committer
        closed."""
        return open_store(self.key, self.target, lambda held: to_copy(source, held, upto,
                                                                      follows=lambda: self.follows(source)),
                          committer=lambda: self.committer).plan

    def follows(self, source: list[Checkpoint]) -> str | None:
        """The index id the source's oldest record follows (its index's ``prevSnapshotIndexBlobId``): ``to_copy``'s
        evidence that a target sharing no record with the source is behind it, not beside it. None for a delta or a
        group, a first snapshot, or an index that does not read (then the copy is refused, never guessed)."""
        first = source[0]
        if first.is_delta or first.is_group:
            return None
        try:
            return self.source.read_index(first).prev_snapshot_index_blob_id
        except BlobstateError as exc:
            log.warning("the index of %s's oldest checkpoint %s does not read (%s)", self.key, first.checkpoint_id,
                        exc)
            return None

    def copy(self, records: list[Checkpoint], report: CopyReport) -> None:
        """Commit each of ``records`` (in order) at the target; raises what a commit raises (``IntegrityError``
        for a source object that does not match its record, ``FencedError``, ``StorageError``)."""
        if not records:
            return
        self.committer.take_over()
        self.present = {info.blob_id for info in self.target.store.list(self.key.prefix)}
        with Staging(self.committer.work_dir, sealed=self.source.cipher is not None) as self.staging:
            for record in records:
                self.copy_one(record, report)
                report.copied.append(record.checkpoint_id)

    def held(self, wanted: set[str]) -> set[str]:
        """The objects of ``wanted`` the target holds for certain: listed, and referenced by a retained target record
        (or committed by this copy), or carrying no TTL mark. Lease mode tells the marks from one listing of the
        store's leases, and reads the target's indexes only when a wanted object carries one; native mode reads the
        references first and asks the mark of what they leave (``BlobStore.has_ttl``: leftovers only)."""
        listed = wanted & self.present
        unsure = listed - self.mine
        if not unsure:
            return listed
        store = self.target.store
        if store.ttl_mode == "lease":
            if self._marked is None:
                self._marked = set(store.expired(self.key.prefix, FAR_FUTURE_MS))
            leftovers = (unsure & self._marked) - self._referenced() if unsure & self._marked else set()
        else:
            ask = sorted(unsure - self._referenced())
            leftovers = {b for b, marked in zip(ask, store.map_concurrent(store.has_ttl, ask), strict=True) if marked}
        if leftovers:
            log.info("%d object(s) of %s at the target are under a TTL no retained record explains (another copy's "
                     "or commit's leftovers): uploading them again", len(leftovers), self.key)
        return listed - leftovers

    def _referenced(self) -> set[str]:
        """What the target's retained records reference (read once per run; an unreadable index counts as
        referencing nothing but itself: its objects are then uploaded again, never trusted)."""
        if self._references is None:
            history = self.target.log.history(self.key)
            self._references = self.target.retained_references(history, history=history,
                                                               on_unreadable=lambda cp, exc: None)
        return self._references

    def copy_one(self, record: Checkpoint, report: CopyReport) -> Checkpoint:
        """Steps 1-3 of the module docstring for one record."""
        c = self.committer
        commit_id, started = record.checkpoint_id, now_ms()
        parts = [p for p in record.expand() if p.checkpoint_id not in self.voided]
        indexes = {p.index_blob_id: self._metadata(p.index_blob_id, p.index_size, p.index_crc32c, "index")
                   for p in parts if not p.is_delta}
        files = [(f, p) for p in parts if not p.is_delta
                 for f in SnapshotIndex.from_bytes(indexes[p.index_blob_id], source=p.index_blob_id).files().values()]
        wanted = set([p.changelog_blob_id for p in parts if p.is_delta and not p.is_inline] + list(indexes)
                     + [b.blob_id for f, _ in files for b in f.blobs])
        missing = sorted(wanted - self.held(wanted))
        report.blobs_present += len(wanted) - len(missing)
        kind = GROUP if record.is_group else DELTA if record.is_delta else "snapshot"
        c.session.record(ev.CommitStarted(commit_id, started, str(self.key), c.commit_point.generation(),
                                          record.batch_id, KEEP_ALL, display_url(self.target.url),
                                          display_url(self.target.log.url or self.target.url), kind=kind,
                                          ttl_ms=self.ttl_ms))
        index_id = record.index_blob_id if kind == "snapshot" else ""
        c.session.record(ev.UploadsPlanned(commit_id, now_ms(), tuple(b for b in missing if b != index_id),
                                           index_id if index_id in missing else "", 0), sync=True)
        try:
            self._upload(commit_id, missing, indexes, files, parts, report)
            if kind == "snapshot":
                if self.source.cipher is None:  # an encrypted source's plain bytes never wait on this disk
                    healing.save_index_copy(c.work_dir, commit_id, indexes[index_id])
                c.session.record(ev.IndexUploaded(commit_id, now_ms(), index_id, record.index_crc32c,
                                                  record.index_size), sync=True)
            check_ttl_budget(commit_id, started, self.ttl_ms)
        except BaseException as exc:
            c.engine.abort(commit_id, exc)
            raise
        checkpoint = c.engine.append(replace(record, generation=0, writer_id=copied_by(record.writer_id)),
                                     budget_checked=True)
        c.engine.finish_quietly(commit_id, checkpoint, late=landed_late(started, self.ttl_ms))
        self.heal(wanted, indexes, files, parts, report)
        self.mine |= wanted
        return checkpoint

    def heal(self, wanted: set[str], indexes: dict[str, bytes], files: list[Any], parts: list[Checkpoint],
             report: CopyReport) -> list[str]:
        """Rule 5 after every copy's append (its TTLs already removed): every object the committed record references
        (``wanted``) looked for in one walk of the store's prefix, and one that is gone put back from the source,
        verified as on the way in, permanent. Returns the ids put back."""
        gone = sorted(wanted - healing.present_blobs(self.target, self.key))
        if gone:
            log.warning("%d object(s) the copied record of %s references are gone from the target (gc took them "
                        "before the append); putting them back from the source", len(gone), self.key)
            self._upload(None, gone, indexes, files, parts, report)
        return gone

    def _metadata(self, blob_id: str, size: int, crc: int, what: str) -> bytes:
        """An index's or changelog's bytes from the source, checked against the size and CRC32C its record
        declares (``ChecksumMismatch`` otherwise)."""
        data = self.source.store.get_bounded(blob_id, declared(size, f"{what} {blob_id}"))
        if len(data) != size or crc32c_bytes(data) != crc:
            raise ChecksumMismatch(f"{what} {blob_id} at the source does not match its record (size {len(data)} vs "
                                   f"{size}, CRC32C {crc32c_bytes(data)} vs {crc}): not copied")
        return data

    def _upload(self, commit_id: str | None, missing: list[str], indexes: dict[str, bytes], files: list[Any],
                parts: list[Checkpoint], report: CopyReport) -> None:
        """Put every ``missing`` object at the target, verified: with a TTL, journaled (``BlobUploaded``) for commit
        ``commit_id``; permanent and unjournaled with None (the heal of a committed record)."""
        todo = set(missing)
        small: dict[str, bytes] = {k: v for k, v in indexes.items() if k in todo}
        for p in parts:
            if p.is_delta and p.changelog_blob_id in todo:
                small[p.changelog_blob_id] = self._metadata(p.changelog_blob_id, p.changelog_size,
                                                            p.changelog_crc32c, "changelog")
        jobs: list[Callable[[], None]] = [lambda b=b, d=d: self._put(commit_id, b, d, report, self._codec_of(b))
                                          for b, d in small.items()]
        seen: set[str] = set()
        for f, _ in files:  # a file with a missing chunk: every chunk read (the CRC32C covers them all)
            ids = [b.blob_id for b in f.blobs]
            if todo & set(ids) and not seen & set(ids):
                seen |= set(ids)
                jobs.append(lambda f=f: self._copy_file(commit_id, f, todo, report))
        self.target.store.map_concurrent(lambda job: job(), jobs)

    def _codec_of(self, blob_id: str) -> str | None:
        """How the target stores an index or changelog: a changelog as the target's writers do
        (``Repository.metadata_codec``), an index as the target's codec does by itself."""
        return None if layout.kind_of(blob_id) is ObjectKind.INDEX else self.target.metadata_codec

    def _put(self, commit_id: str | None, blob_id: str, source: Any, report: CopyReport, codec: str | None) -> None:
        """Put one object at the target, stored as ``codec`` says (a data blob: as its index entry records, since
        the index is copied as it is): with the copy's TTL and journaled for ``commit_id``, or permanent (None)."""
        request = PutRequest(blob_id, source, self.ttl_ms if commit_id is not None else None, codec)
        self.target.store.put(request)
        if commit_id is not None:
            self.committer.session.record(ev.BlobUploaded(commit_id, now_ms(), blob_id, request.size))
        with self._lock:
            self.present.add(blob_id)
            self.mine.add(blob_id)
            report.blobs_uploaded += 1
            report.bytes_uploaded += request.size

    def _copy_file(self, commit_id: str | None, f: Any, todo: set[str], report: CopyReport) -> None:
        """Stream each chunk of file ``f`` from the source into the staging (a retried read rewrites its range),
        check the file's size and CRC32C across its chunks, and put the chunks the target lacks."""
        assert self.staging is not None
        crc = Crc32cSink()  # the whole file's, fed from the staged chunks in order
        staged = []
        try:
            for blob, length in f.chunk_ranges():
                chunk = self.staging.chunk()
                staged.append((blob, chunk))
                with chunk.writer() as fh:
                    sink = Crc32cSink(fh)
                    sink.mark(length)  # a blob larger than its index says stops at once
                    self.source.read_blob(blob, sink)  # type: ignore[arg-type]  # decoded as its entry says
                if sink.size != length:
                    raise ChecksumMismatch(f"blob {blob.blob_id} at the source holds {sink.size} bytes, its "
                                           f"index says {length}: not copied")
                for piece in chunk.pieces():
                    crc.write(piece)
            if crc.size != f.size_in_bytes or crc.crc32c != f.crc32c:
                raise ChecksumMismatch(f"file {f.file_name} at the source does not match its index (CRC32C "
                                       f"{crc.crc32c:#010x} vs {f.crc32c:#010x}): not copied")
            for blob, chunk in staged:
                if blob.blob_id in todo:
                    with chunk.source() as source:
                        self._put(commit_id, blob.blob_id, source, report, blob.codec)
        finally:
            for _, chunk in staged:
                chunk.remove()


def copy_stores(src: Repository, dst: Repository, keys: list[StoreKey], *, checkpoint: str | int | None,
                ttl_ms: int, max_concurrency: int, work_base: str | None) -> list[CopyReport]:
    """Copy the records of each store of ``keys`` that ``dst`` lacks (with ``checkpoint``, up to and including that
    one), in the source's generation order, each store through a ``StoreCopier`` with its own work directory under
    ``work_base``. Returns one report per store. Raises as ``StoreCopier.copy``."""
    reports = []
    for key in keys:
        history = src.log.history(key)
        upto = src.choose(key, checkpoint=checkpoint) if checkpoint not in (None, "latest") else None
        copier = StoreCopier(key, src, dst, work_dir=host.work_dir(dst, key, work_base),
                             ttl_ms=ttl_ms, max_concurrency=max_concurrency, voided=overridden_parts(history))
        try:
            records, present, skipped = copier.open(history, upto)
            report = CopyReport(key, present=[cp.checkpoint_id for cp in present],
                                skipped=[cp.checkpoint_id for cp in skipped])
            reports.append(report)
            if records:
                log.info("copying %d checkpoint(s) of %s to %s", len(records), key, display_url(dst.url))
                copier.copy(records, report)
        finally:
            copier.close()
    return reports
