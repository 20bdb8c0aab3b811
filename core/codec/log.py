"""``SealedCheckpointLog``: the checkpoint log of an encrypted repository, sealing every record body on its way
in and opening it on its way out (``SealedRecord``), around any log plugin (file, SQL, Kafka, a third
party's), which stores the sealed record as it stores any record.

The seal binds a record to its store key, generation and checkpoint id (the associated data), so a record copied
to another generation or store, or into another repository's log, does not open; one that does not open is a
``CorruptIndexError`` (exit 3), as any malformed record, and a record left in the clear in an encrypted
repository's log is refused too (whoever wrote it had no key). Record bodies are zstd-compressed before they are
sealed, so a group record of ``MAX_PARTITIONS`` partitions still fits ``MAX_RECORD_BYTES`` sealed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import zstandard

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher
from blobstate.errors import CorruptIndexError, IntegrityError
from blobstate.model.records import MAX_RECORD_BYTES, Checkpoint, SealedRecord, StoreKey
from blobstate.plugin.capabilities import after_append_history
from blobstate.plugin.interfaces import BoundedSink, CheckpointLog

log = logging.getLogger(__name__)


def record_name(key: StoreKey, generation: int, checkpoint_id: str) -> str:
    """What a sealed record is bound to: ``<job>/<task>/<store>@<generation>/<checkpoint id>``."""
    return f"{key.prefix}@{generation}/{checkpoint_id}"


class SealedCheckpointLog(CheckpointLog):
    """``inner`` with every record sealed by ``cipher`` (see the module docstring). Fencing, ordering and pruning
    are ``inner``'s, on the clear store key and generation."""

    def __init__(self, inner: CheckpointLog, cipher: ObjectCipher) -> None:
        self.inner = inner
        self.url = inner.url
        self.cipher = cipher

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def seal(self, record: Checkpoint, generation: int) -> SealedRecord:
        """``record`` at ``generation``, sealed."""
        record = record.with_generation(generation)
        body = zstandard.ZstdCompressor(level=frame.LEVEL, write_checksum=True).compress(record.to_bytes())
        name = record_name(record.store_key, generation, record.checkpoint_id)
        return SealedRecord.of(record.store_key, record.checkpoint_id, generation, record.created_time_ms,
                               self.cipher.seal("record", name, body))

    def open(self, stored: Checkpoint) -> Checkpoint:
        """The record ``stored`` holds; ``CorruptIndexError`` when it is not sealed, does not open, or holds
        another record than its clear fields say."""
        where = f"{stored.store_key}@{stored.generation} ({stored.checkpoint_id})"
        if not isinstance(stored, SealedRecord):
            raise CorruptIndexError(f"corrupt checkpoint record {where}: it is not sealed, and the repository is "
                                    "encrypted (written without the key)")
        try:
            body = self.cipher.unseal("record", record_name(stored.store_key, stored.generation,
                                                            stored.checkpoint_id), stored.body)
            plain = BoundedSink(MAX_RECORD_BYTES, f"checkpoint record {where}")
            frame.decode(where, body, plain, cipher=None)
        except IntegrityError as exc:
            raise CorruptIndexError(f"corrupt checkpoint record {where}: {exc}") from None
        record = Checkpoint.from_bytes(plain.getvalue(), source=where)
        if isinstance(record, SealedRecord) or (record.store_key, record.generation, record.checkpoint_id) != \
                (stored.store_key, stored.generation, stored.checkpoint_id):
            raise CorruptIndexError(f"corrupt checkpoint record {where}: it holds another record")
        return record

    def latest(self, key: StoreKey) -> Checkpoint | None:
        stored = self.inner.latest(key)
        return None if stored is None else self.open(stored)

    def history(self, key: StoreKey) -> list[Checkpoint]:
        return [self.open(stored) for stored in self.inner.history(key)]

    def history_after_append(self, key: StoreKey, max_age_s: float) -> list[Checkpoint] | None:
        """``inner``'s ``history_after_append`` (``capabilities.after_append_history``), each record opened."""
        fn = after_append_history(self.inner)
        stored = fn(key, max_age_s) if fn is not None else None
        return None if stored is None else [self.open(cp) for cp in stored]

    def histories(self, keys: Iterable[StoreKey] | None = None) -> dict[StoreKey, list[Checkpoint]]:
        """``inner``'s ``histories`` (the file log: one listing for every store), each record opened."""
        return {key: [self.open(stored) for stored in records] for key, records in self.inner.histories(keys).items()}

    def append(self, checkpoint: Checkpoint, expected_generation: int) -> Checkpoint:
        """Seal at ``expected_generation + 1`` and append; a re-append that finds the record landed returns it."""
        return self.open(self.inner.append(self.seal(checkpoint, expected_generation + 1), expected_generation))

    def prune(self, key: StoreKey, keep: int, *, below: int | None = None) -> list[Checkpoint]:
        return self._removed(self.inner.prune(key, keep, below=below))

    def forget(self, key: StoreKey, records: Sequence[Checkpoint]) -> list[Checkpoint]:
        """``inner``'s ``forget``: it matches each record by its clear generation and checkpoint id. Raises
        ``NotImplementedError`` when ``inner`` keeps records inside it (``can_forget`` says so first)."""
        return self._removed(self.inner.forget(key, records))

    def drop(self, key: StoreKey, expiring: Sequence[Checkpoint], *, first_kept: int) -> list[Checkpoint]:
        """``inner``'s ``drop`` (the file log's: one bulk delete of exactly the records the caller read), on the
        clear generations; a removed record the caller gave (opened) is returned as given, any other opened."""
        given = {(cp.generation, cp.checkpoint_id): cp for cp in expiring}
        removed = self.inner.drop(key, expiring, first_kept=first_kept)
        return [given.get((cp.generation, cp.checkpoint_id)) or self._removed([cp])[0] for cp in removed]

    @property
    def can_forget(self) -> bool:
        """As ``inner`` (the file and SQL logs forget, the Kafka log does not)."""
        return self.inner.can_forget

    def _removed(self, stored: list[Checkpoint]) -> list[Checkpoint]:
        """The records ``inner`` deleted, opened where they open."""
        removed = []
        for record in stored:
            try:
                removed.append(self.open(record))
            except CorruptIndexError as exc:  # deleted already: its clear fields are all a caller uses
                log.warning("removed a record that does not open: %s", exc)
                removed.append(record)
        return removed

    def keys(self) -> list[StoreKey]:
        return self.inner.keys()

    def close(self) -> None:
        self.inner.close()
