"""The file checkpoint log: one object per generation on any blob store, created exclusively, never overwritten.

``checkpoints/<job>/<task>/<store>/<generation, 20 digits>.json`` inside the log's URL (by default the
repository; the names are ``blobstate.model.layout``'s). Fencing comes from the store's conditional create
(Elasticsearch's never-overwritten metadata generations): of two writers appending the same generation exactly one
create succeeds.

Requests (a commit pays for each one, ``bench/requests.py``): an append is the exclusive create and one listing
after it (a zombie whose generation was pruned from under it creates it again, and only a listing after the create
shows it newer records: it then removes its record and is fenced); a listing before it only when the expected
generation is not the newest this log instance has seen (a caller's own view: its read of ``latest``, its last
append). Records are immutable, so a record already read or written is not fetched again while the listing names
it with the same entity tag, when the store's entity tag is the MD5 of the object (S3's, for a record: one PUT, no
KMS) and that MD5 was checked against the bytes. Retention's removal of records is one bulk delete.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from blobstate.errors import AppendOutcomeUnknown, BlobNotFound, CorruptIndexError, FencedError, StorageError
from blobstate.model import layout
from blobstate.model.layout import record_id
from blobstate.model.records import MAX_RECORD_BYTES, Checkpoint, StoreKey
from blobstate.plugin.interfaces import BlobInfo, BlobStore, BoundedSink, CheckpointLog

if TYPE_CHECKING:
    from blobstate.config.settings import Settings

__all__ = ["FileCheckpointLog", "open_file_log", "record_id"]


class FileCheckpointLog(CheckpointLog):
    """A ``CheckpointLog`` stored as generation objects in a ``BlobStore`` (``put_exclusive`` gives fencing)."""

    def __init__(self, store: BlobStore, *, owns_store: bool = True) -> None:
        self.store = store
        self.url = store.url
        self._owns_store = owns_store
        self._lock = threading.Lock()
        #: record id -> (MD5 hex of its bytes, the record): records read or written, for listings that name them
        #: by that MD5 (their entity tag); dropped when a listing no longer names them
        self._known: dict[str, tuple[str, Checkpoint]] = {}
        #: per store key: the newest generation this instance saw (listed, or appended itself)
        self._newest: dict[StoreKey, int] = {}
        #: per store key: (monotonic s, the listing) taken right after this instance's last append, until used once
        self._after_append: dict[StoreKey, tuple[float, dict[int, BlobInfo]]] = {}
        #: optional: a host's cache of records across processes (``get(name, valid)``, ``put(name, bytes)``,
        #: ``discard(names)``: the shape of ``blobstate.local.object_cache.ObjectCache``), consulted like ``_known``:
        #: an entry is used only when the listing names the record by the MD5 of the entry's bytes; a record this
        #: instance appended is kept there when the listing after the append names it so, a record it deletes is
        #: discarded
        self.record_cache: Any = None

    def _listing(self, key: StoreKey) -> dict[int, BlobInfo]:
        """The record objects of ``key`` by generation, oldest first (one listing)."""
        found: dict[int, BlobInfo] = {}
        for info in self.store.list(layout.records_prefix(key)):
            name = layout.parse(info.blob_id)
            if name is not None and name.kind is layout.ObjectKind.RECORD and name.key == key \
                    and name.generation is not None:
                found[name.generation] = info
        listing = dict(sorted(found.items()))
        prefix = layout.records_prefix(key) + "/"
        with self._lock:
            for rid in [r for r in self._known if r.startswith(prefix)]:
                generation = layout.record_generation(rid.rsplit("/", 1)[1])
                if generation not in listing or _etag(listing[generation]) != self._known[rid][0]:
                    del self._known[rid]
            self._newest[key] = max(listing, default=0)
        return listing

    def _generations(self, key: StoreKey) -> list[int]:
        return list(self._listing(key))

    def _read(self, key: StoreKey, generation: int, info: BlobInfo | None = None) -> Checkpoint | None:
        """The record at ``generation`` (None: pruned between list and read); not fetched again when ``info`` (its
        listing) names it by the MD5 of bytes this instance read or wrote, or of ``record_cache``'s entry."""
        local = self._local(key, generation, info)
        return local if local is not None else self._fetch(key, generation, info)

    def _fetch(self, key: StoreKey, generation: int, info: BlobInfo | None) -> Checkpoint | None:
        """The record at ``generation`` read from the store (None: pruned between list and read), kept in
        ``record_cache`` when ``info`` names it by the MD5 of the bytes read."""
        rid = record_id(key, generation)
        try:
            data = self.store.get_bounded(rid, BoundedSink(MAX_RECORD_BYTES, f"checkpoint record {rid}",
                                                           why="a checkpoint record is a few hundred bytes"))
        except BlobNotFound:
            return None  # pruned between list and read
        tag = _etag(info)
        cp = self._checked(key, generation, rid, data, tag)
        if self.record_cache is not None and tag is not None and _md5(data) == tag:
            self.record_cache.put(rid, data)
        return cp

    def _local(self, key: StoreKey, generation: int, info: BlobInfo | None) -> Checkpoint | None:
        """The record at ``generation`` without a request: known to this instance, or ``record_cache``'s entry,
        when ``info`` (its listing) names it by the MD5 of those bytes; None otherwise."""
        known = self._known_record(key, generation, info)
        tag = _etag(info)
        if known is not None or tag is None or self.record_cache is None:
            return known
        rid = record_id(key, generation)
        data = self.record_cache.get(rid, lambda d: _md5(d) == tag)
        return None if data is None else self._checked(key, generation, rid, data, tag)

    def _checked(self, key: StoreKey, generation: int, rid: str, data: bytes, tag: str | None) -> Checkpoint:
        """``data`` parsed as the record of ``key`` at ``generation`` (``CorruptIndexError`` when it is another)."""
        cp = Checkpoint.from_bytes(data, source=rid)
        if cp.generation != generation or cp.store_key != key:
            raise CorruptIndexError(f"checkpoint record {rid} holds generation {cp.generation} of {cp.store_key}")
        if tag is not None:
            self._remember(rid, data, cp)
        return cp

    def _known_record(self, key: StoreKey, generation: int, info: BlobInfo | None) -> Checkpoint | None:
        """The record at ``generation`` when ``info`` (its listing) names it by the MD5 of bytes read or written."""
        tag = _etag(info)
        with self._lock:
            known = self._known.get(record_id(key, generation))
        return known[1] if known is not None and tag is not None and known[0] == tag else None

    def _remember(self, rid: str, data: bytes, cp: Checkpoint) -> None:
        with self._lock:
            self._known[rid] = (_md5(data), cp)

    def latest(self, key: StoreKey) -> Checkpoint | None:
        listing = self._listing(key)
        for generation in reversed(listing):
            cp = self._read(key, generation, listing[generation])
            if cp is not None:
                return cp
        return None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        """Every record, the ones not known yet fetched concurrently (``BlobStore.map_concurrent``)."""
        return self._history_of(key, self._listing(key))

    def history_after_append(self, key: StoreKey, max_age_s: float) -> list[Checkpoint] | None:
        """Every record as the listing this instance took right after its last append to ``key`` named them, when
        that listing is at most ``max_age_s`` old (``layout.monotonic``, which runs on while the process is
        stopped); once, then forgotten. None when there is no such listing: the caller reads the log
        (``capabilities.after_append_history``; retention's read of a commit, Safety rule 15)."""
        with self._lock:
            taken = self._after_append.pop(key, None)
        if taken is None or layout.monotonic() - taken[0] > max_age_s:
            return None
        return self._history_of(key, taken[1])

    def _history_of(self, key: StoreKey, listing: dict[int, BlobInfo]) -> list[Checkpoint]:
        known = {g: cp for g, info in listing.items() if (cp := self._known_record(key, g, info)) is not None}
        missing = [item for item in listing.items() if item[0] not in known]
        read = self.store.map_concurrent(lambda item: self._read(key, *item), missing)
        known.update((g, cp) for (g, _info), cp in zip(missing, read, strict=True) if cp is not None)
        return [known[g] for g in listing if g in known]

    def _ours(self, key: StoreKey, record: Checkpoint) -> Checkpoint | None:
        """The record at ``record``'s generation when it is the same checkpoint (an earlier attempt landed)."""
        existing = self._read(key, record.generation)
        return existing if existing is not None and existing.checkpoint_id == record.checkpoint_id else None

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        key = checkpoint.store_key
        record = checkpoint.with_generation(expected_generation + 1)
        with self._lock:
            self._after_append.pop(key, None)  # a view belongs to the append that took it, and to no other
            seen = self._newest.get(key)
        if seen != expected_generation:  # not this instance's view: check it first (a future generation is fenced)
            gens = self._generations(key)
            current = gens[-1] if gens else 0
            if current != expected_generation:
                if current > expected_generation and (ours := self._ours(key, record)) is not None:
                    return ours  # a re-append resolving an unknown outcome: it landed
                raise FencedError(
                    f"fenced: {key} is at generation {current}, this writer expected {expected_generation}",
                    expected=expected_generation, actual=current,
                )
        rid = record_id(key, record.generation)
        data = record.to_bytes()
        try:
            self.store.put_exclusive(rid, data)
        except FileExistsError:
            if (ours := self._ours(key, record)) is not None:
                return ours  # our own create, retried after a lost response (or an earlier attempt that landed)
            raise FencedError(
                f"fenced: another writer created generation {record.generation} of {key} first",
                expected=expected_generation, actual=record.generation,
            ) from None
        except StorageError as exc:  # the create may have reached the store before the failure
            raise AppendOutcomeUnknown(f"append of generation {record.generation} of {key}: outcome unknown "
                                       f"({exc})", checkpoint_id=record.checkpoint_id) from exc
        self._remember(rid, data, record)
        listing = self._listing(key)
        newer = [g for g in listing if g > record.generation]
        if newer:
            # A pruned gap let this zombie create a stale generation: it is not the latest, so it lost. The record
            # was created exclusively by this writer: remove it, so no reader ever picks it.
            self.store.delete(rid)
            raise FencedError(f"fenced: {key} already has generation {newer[-1]}", expected=expected_generation,
                              actual=newer[-1])
        if self.record_cache is not None and _etag(listing.get(record.generation)) == _md5(data):
            self.record_cache.put(rid, data)  # the next process on this host reads it from there, as ``_local`` checks
        with self._lock:
            self._after_append[key] = (layout.monotonic(), listing)
        return record

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        keep = max(1, keep)
        listing = self._listing(key)
        doomed = [g for g in list(listing)[:-keep] if below is None or g < below]
        records = [self._read(key, g, listing[g]) for g in doomed]
        self._delete([record_id(key, g) for g in doomed])
        return [cp for cp in records if cp is not None]

    def forget(self, key: StoreKey, records: Sequence[Checkpoint]) -> list[Checkpoint]:
        listing = self._listing(key)
        newest = max(listing, default=0)
        removed = []
        for record in records:
            if listing and record.generation >= newest:
                raise ValueError(f"refusing to forget generation {record.generation} of {key}: the newest record")
            held = self._read(key, record.generation, listing[record.generation]) \
                if record.generation in listing else None
            if held is not None and held.checkpoint_id == record.checkpoint_id:
                removed.append(held)
        self._delete([record_id(key, cp.generation) for cp in removed])
        return removed

    def drop(self, key: StoreKey, expiring: Sequence[Checkpoint], *, first_kept: int) -> list[Checkpoint]:
        """Retention's removal: exactly the ``expiring`` records the caller read (below ``first_kept``, and
        interior ones), in one bulk delete and without another listing. A record appended since the caller read
        the log has a higher generation than any it read, so it is never among them; a record never overwritten
        is the one the caller read at its generation."""
        doomed = [cp for cp in expiring if cp.generation != first_kept]
        self._delete([record_id(key, cp.generation) for cp in doomed])
        return list(doomed)

    def _delete(self, rids: list[str]) -> None:
        """Delete the records ``rids`` (one bulk delete), and ``record_cache``'s entries of them."""
        self.store.delete_many(rids)
        if self.record_cache is not None:
            self.record_cache.discard(rids)

    def keys(self) -> list[StoreKey]:
        return sorted(self._all_generations())

    def _all_generations(self) -> dict[StoreKey, dict[int, BlobInfo]]:
        """Every store's record objects by generation from one listing of ``checkpoints/``, ascending."""
        gens: dict[StoreKey, dict[int, BlobInfo]] = {}
        for info in self.store.list(layout.RECORDS):
            name = layout.parse(info.blob_id)  # a foreign object under checkpoints/ is not a store's
            if name is not None and name.kind is layout.ObjectKind.RECORD and name.key is not None \
                    and name.generation is not None:
                gens.setdefault(name.key, {})[name.generation] = info
        return {key: dict(sorted(found.items())) for key, found in gens.items()}

    def histories(self, keys: Iterable[StoreKey] | None = None) -> dict[StoreKey, list[Checkpoint]]:
        """One listing of ``checkpoints/`` for every store, then the records read concurrently (the store's
        ``map_concurrent``; each known by the MD5 its listing gives it, or in ``record_cache``, is not fetched),
        instead of one listing per store."""
        gens = self._all_generations()
        wanted = sorted(gens) if keys is None else list(keys)
        reads = [(key, generation, info) for key in wanted for generation, info in gens.get(key, {}).items()]
        found = {read[:2]: self._local(*read) for read in reads}  # no thread for what needs no request
        missing = [read for read in reads if found[read[:2]] is None]
        found.update(zip((read[:2] for read in missing), self.store.map_concurrent(lambda r: self._fetch(*r), missing),
                         strict=True))
        out: dict[StoreKey, list[Checkpoint]] = {key: [] for key in wanted}
        for (key, generation, _) in reads:
            if (cp := found[key, generation]) is not None:
                out[key].append(cp)
        return out

    def close(self) -> None:
        if self._owns_store:
            self.store.close()


def _md5(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _etag(info: BlobInfo | None) -> str | None:
    """The entity tag a listing gives ``info`` (quotes stripped, lower case), or None."""
    tag = getattr(info, "etag", None) if info is not None else None
    return tag.strip('"').lower() if tag else None


def open_file_log(url: str, *, storage_options: dict[str, Any] | None = None, blob_store: BlobStore | None = None,
                  settings: Settings | None = None) -> FileCheckpointLog:
    """Open the file checkpoint log at ``url`` on whichever blob store plugin serves its scheme (opened with
    ``settings``), or on ``blob_store`` (the repository's store, already open; closed by its owner, not by the
    log)."""
    if blob_store is not None:
        return FileCheckpointLog(blob_store, owns_store=False)
    from blobstate.repository.backends import open_blob_store

    return FileCheckpointLog(open_blob_store(url, settings=settings, storage_options=storage_options, retry=True))
