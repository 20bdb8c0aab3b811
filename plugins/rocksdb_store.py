"""The ``rocksdb`` local store (rocksdict): RocksDB's own ``Checkpoint`` (hard-linked SSTs, milliseconds).

Immutable: ``*.sst`` and ``*.blob`` (BlobDB) files, which RocksDB never rewrites. Mutable: everything else
(``MANIFEST-*`` keeps its name and grows, ``CURRENT``, ``OPTIONS-*``, WAL ``*.log``, ``rocksdict-config.json``):
their CRC32C is computed at every commit (never cached), they are uploaded whenever their content changed, and
copied (never hard-linked) on restore.
"""

from __future__ import annotations

import os

from blobstate.errors import IntegrityError
from blobstate.interfaces import LocalStore

IMMUTABLE_SUFFIXES = (".sst", ".blob")


class RocksDBStore(LocalStore):
    """``create_checkpoint(source, target)``: ``source`` is a live ``rocksdict.Rdict`` or a DB directory (opened
    read-only, which works while another process holds the DB's lock)."""

    store_type = "rocksdb"

    def create_checkpoint(self, source: object, target_dir: str) -> None:
        from rocksdict import AccessType, Checkpoint, Rdict

        if isinstance(source, Rdict):
            Checkpoint(source).create_checkpoint(target_dir)
            return
        db = Rdict(os.fspath(source), access_type=AccessType.read_only())  # type: ignore[arg-type]
        try:
            Checkpoint(db).create_checkpoint(target_dir)
        finally:
            db.close()

    def is_mutable(self, relative_path: str) -> bool:
        return not relative_path.endswith(IMMUTABLE_SUFFIXES)

    def validate(self, directory: str) -> None:
        from rocksdict import AccessType, Rdict

        try:
            db = Rdict(directory, access_type=AccessType.read_only())
        except Exception as exc:  # noqa: BLE001 - rocksdict raises plain Exception
            raise IntegrityError(f"restored RocksDB at {directory} does not open: {exc}") from None
        db.close()


def looks_like_rocksdb(directory: str) -> bool:
    """A RocksDB directory has a ``CURRENT`` file."""
    return os.path.isfile(os.path.join(directory, "CURRENT"))
