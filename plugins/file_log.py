"""The file checkpoint log: one object per generation on any blob store, created exclusively, never overwritten.

``checkpoints/<job>/<task>/<store>/<generation, 20 digits>.json`` inside the log's URL (by default the
repository; the names are ``blobstate.model.layout``'s). Fencing comes from the store's conditional create
(Elasticsearch's never-overwritten metadata generations): of two writers appending the same generation exactly one
create succeeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from blobstate.errors import AppendOutcomeUnknown, BlobNotFound, CorruptIndexError, FencedError, StorageError
from blobstate.model import layout
from blobstate.model.layout import record_id
from blobstate.model.records import MAX_RECORD_BYTES, Checkpoint, StoreKey
from blobstate.plugin.interfaces import BlobStore, BoundedSink, CheckpointLog

__all__ = ["FileCheckpointLog", "open_file_log", "record_id"]


class FileCheckpointLog(CheckpointLog):
    """A ``CheckpointLog`` stored as generation objects in a ``BlobStore`` (``put_exclusive`` gives fencing)."""

    def __init__(self, store: BlobStore, *, owns_store: bool = True) -> None:
        self.store = store
        self.url = store.url
        self._owns_store = owns_store

    def _generations(self, key: StoreKey) -> list[int]:
        gens = []
        for info in self.store.list(layout.records_prefix(key)):
            name = layout.parse(info.blob_id)
            if name is not None and name.kind is layout.ObjectKind.RECORD and name.key == key \
                    and name.generation is not None:
                gens.append(name.generation)
        return sorted(gens)

    def _read(self, key: StoreKey, generation: int) -> Checkpoint | None:
        rid = record_id(key, generation)
        try:
            data = self.store.get_bounded(rid, BoundedSink(MAX_RECORD_BYTES, f"checkpoint record {rid}",
                                                           why="a checkpoint record is a few hundred bytes"))
        except BlobNotFound:
            return None  # pruned between list and read
        cp = Checkpoint.from_bytes(data, source=rid)
        if cp.generation != generation or cp.store_key != key:
            raise CorruptIndexError(f"checkpoint record {rid} holds generation {cp.generation} of {cp.store_key}")
        return cp

    def latest(self, key: StoreKey) -> Checkpoint | None:
        for generation in reversed(self._generations(key)):
            cp = self._read(key, generation)
            if cp is not None:
                return cp
        return None

    def history(self, key: StoreKey) -> list[Checkpoint]:
        out = [self._read(key, g) for g in self._generations(key)]
        return [cp for cp in out if cp is not None]

    def _ours(self, key: StoreKey, record: Checkpoint) -> Checkpoint | None:
        """The record at ``record``'s generation when it is the same checkpoint (an earlier attempt landed)."""
        existing = self._read(key, record.generation)
        return existing if existing is not None and existing.checkpoint_id == record.checkpoint_id else None

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        key = checkpoint.store_key
        gens = self._generations(key)
        current = gens[-1] if gens else 0
        record = checkpoint.with_generation(expected_generation + 1)
        if current != expected_generation:
            if current > expected_generation and (ours := self._ours(key, record)) is not None:
                return ours  # a re-append resolving an unknown outcome: it landed
            raise FencedError(
                f"fenced: {key} is at generation {current}, this writer expected {expected_generation}",
                expected=expected_generation, actual=current,
            )
        try:
            self.store.put_exclusive(record_id(key, record.generation), record.to_bytes())
        except FileExistsError:
            if (ours := self._ours(key, record)) is not None:
                return ours  # our own create, retried after a lost response
            raise FencedError(
                f"fenced: another writer created generation {record.generation} of {key} first",
                expected=expected_generation, actual=record.generation,
            ) from None
        except StorageError as exc:  # the create may have reached the store before the failure
            raise AppendOutcomeUnknown(f"append of generation {record.generation} of {key}: outcome unknown "
                                       f"({exc})", checkpoint_id=record.checkpoint_id) from exc
        newer = [g for g in self._generations(key) if g > record.generation]
        if newer:
            # A pruned gap let this zombie create a stale generation: it is not the latest, so it lost. The record
            # was created exclusively by this writer: remove it, so no reader ever picks it.
            self.store.delete(record_id(key, record.generation))
            raise FencedError(f"fenced: {key} already has generation {newer[-1]}", expected=expected_generation,
                              actual=newer[-1])
        return record

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        keep = max(1, keep)
        gens = self._generations(key)
        removed = []
        for generation in gens[:-keep]:
            if below is not None and generation >= below:
                break
            cp = self._read(key, generation)
            self.store.delete(record_id(key, generation))
            if cp is not None:
                removed.append(cp)
        return removed

    def forget(self, key: StoreKey, records: Sequence[Checkpoint]) -> list[Checkpoint]:
        gens = self._generations(key)
        removed = []
        for record in records:
            if gens and record.generation >= gens[-1]:
                raise ValueError(f"refusing to forget generation {record.generation} of {key}: the newest record")
            held = self._read(key, record.generation) if record.generation in gens else None
            if held is not None and held.checkpoint_id == record.checkpoint_id:
                self.store.delete(record_id(key, record.generation))
                removed.append(held)
        return removed

    def keys(self) -> list[StoreKey]:
        keys = set()
        for info in self.store.list(layout.RECORDS):
            name = layout.parse(info.blob_id)  # a foreign object under checkpoints/ is not a store's
            if name is not None and name.kind is layout.ObjectKind.RECORD and name.key is not None:
                keys.add(name.key)
        return sorted(keys)

    def close(self) -> None:
        if self._owns_store:
            self.store.close()


def open_file_log(url: str, *, storage_options: dict[str, Any] | None = None,
                  blob_store: BlobStore | None = None) -> FileCheckpointLog:
    """Open the file checkpoint log at ``url`` on whichever blob store plugin serves its scheme, or on
    ``blob_store`` (the repository's store, already open; closed by its owner, not by the log)."""
    if blob_store is not None:
        return FileCheckpointLog(blob_store, owns_store=False)
    from blobstate.repository.backends import open_blob_store

    return FileCheckpointLog(open_blob_store(url, storage_options=storage_options, retry=True))
