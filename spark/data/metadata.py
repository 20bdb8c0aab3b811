"""A processor store's metadata document (``blobstate.spark.processor.metadata``) as of a batch, found on the driver
without reading the state: the schema of a state variable's DataFrame is needed before any task runs.

The document is a key of the state itself, written in the batch that first declares the variables and again in
each batch that changes them, so the newest write of it among the records a read plans (a chain's deltas, a change
feed's) is the document as of the read's batch: one changelog read per record, newest first, at most
``SCAN_DELTAS``. When none of them wrote it (a snapshot holds it), one chain is restored into a temporary directory
on the driver and the document read from there.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from blobstate.model import changelog
from blobstate.model.chain import Chain
from blobstate.model.records import Checkpoint
from blobstate.repository.repo import Repository
from blobstate.restoring.state import restore_into
from blobstate.spark.processor.metadata import Metadata
from blobstate.spark.processor.store import META_KEY

SCAN_DELTAS = 4  # newest changelogs read on the driver before one chain is restored instead


def written_metadata(repo: Repository, records: Iterable[Checkpoint]) -> Metadata | None:
    """The newest metadata document (one with a grouping key) written by the newest ``SCAN_DELTAS`` of
    ``records``' changelogs (delta records; others are skipped), by batch then generation; None when none of them
    wrote one."""
    deltas = sorted((r for r in records if r.is_delta), key=lambda r: (r.batch_id or 0, r.generation),
                    reverse=True)[:SCAN_DELTAS]
    for record in deltas:
        found = None
        for op, key, value in changelog.decode(repo.read_changelog(record), source=record.changelog_blob_id):
            if key == META_KEY:
                found = None if op == changelog.DELETE else value
        if isinstance(found, bytes | str):
            metadata = Metadata.from_json(found.decode() if isinstance(found, bytes) else found)
            if metadata.key_schema is not None:
                return metadata
    return None


@contextlib.contextmanager
def restored_db(repo: Repository, chain: Chain, prefix: str) -> Iterator[Any]:
    """``chain`` restored into a temporary directory (``prefix``: its name's start) and opened read only: the
    ``Rdict``, or None for the empty state; closed and removed on exit."""
    from rocksdict import AccessType, Rdict

    with tempfile.TemporaryDirectory(prefix=prefix) as base:
        path = restore_into(repo, chain, base)
        if path is None:
            yield None
            return
        db = Rdict(path, access_type=AccessType.read_only())
        try:
            yield db
        finally:
            db.close()


def restored_metadata(repo: Repository, chains: Iterable[Chain]) -> Metadata:
    """The metadata document of the first of ``chains`` whose state holds one with a grouping key (each restored
    into a temporary directory, removed after); an empty document when none does."""
    for chain in chains:
        with restored_db(repo, chain, "blobstate-metadata-") as db:
            raw = None if db is None else db.get(META_KEY, None)
        if raw is not None:
            metadata = Metadata.from_json(bytes(raw).decode())
            if metadata.key_schema is not None:
                return metadata
    return Metadata()


def store_metadata(repo: Repository, chains: Iterable[Chain]) -> Metadata:
    """The metadata document as of the state ``chains`` give (see the module docstring)."""
    chains = list(chains)
    found = written_metadata(repo, [cp for chain in chains for cp in chain.records])
    return found if found is not None else restored_metadata(repo, chains)


__all__ = ["restored_db", "restored_metadata", "store_metadata", "written_metadata"]
