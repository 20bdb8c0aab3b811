"""blobstate: incremental, crash-safe backup of stream-processing state to blob stores, and bulk restore.

Public API::

    import blobstate
    result = blobstate.backup("/data/mystore", repo="file:///backups")      # -> BackupResult
    blobstate.restore("/data/mystore", repo="file:///backups")                # -> RestoreResult
"""

from blobstate.errors import (
    AppendOutcomeUnknown,
    BlobNotFound,
    BlobstateError,
    ChecksumMismatch,
    ConfigurationError,
    CorruptIndexError,
    CorruptJournalError,
    FencedError,
    IntegrityError,
    NothingToRestore,
    PluginError,
    StorageError,
    TransientStorageError,
    UnsafePathError,
)
from blobstate.hookspecs import hookimpl, hookspec
from blobstate.index import DirIndex, FileBlob, FileIndex, SnapshotIndex
from blobstate.interfaces import (
    BlobInfo,
    BlobStore,
    CheckpointLog,
    FileRange,
    GetRequest,
    LocalStore,
    PutRequest,
)
from blobstate.model import Checkpoint, StoreKey
from blobstate.specs import BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec

__version__ = "0.1.0"

__all__ = [
    "AppendOutcomeUnknown", "BlobInfo", "BlobNotFound", "BlobStore", "BlobStoreSpec", "BlobstateError", "Checkpoint",
    "CheckpointLog",
    "CheckpointLogSpec", "ChecksumMismatch", "ConfigurationError", "CorruptIndexError", "CorruptJournalError",
    "DirIndex", "FencedError", "FileBlob", "FileIndex", "FileRange", "GetRequest", "IntegrityError", "LocalStore",
    "LocalStoreSpec", "NothingToRestore", "PluginError", "PutRequest", "SnapshotIndex", "StorageError", "StoreKey",
    "TransientStorageError", "UnsafePathError", "backup", "hookimpl", "hookspec", "restore",
]


def __getattr__(name: str) -> object:
    # The pipelines import the plugin machinery; load them on first use so `import blobstate` stays light.
    if name in ("backup", "restore", "Repository", "BackupResult", "RestoreResult", "verify", "gc",
                "list_checkpoints", "recover", "StoreCommitter"):
        from blobstate import api

        return getattr(api, name)
    raise AttributeError(name)
