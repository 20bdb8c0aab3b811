"""blobstate: incremental, crash-safe backup of stream-processing state to blob stores, and bulk restore.

Public API::

    import blobstate
    result = blobstate.backup("/data/mystore", repo="file:///backups")      # -> BackupResult
    blobstate.restore("/data/mystore", repo="file:///backups")                # -> RestoreResult
"""

from typing import TYPE_CHECKING

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
    RepositoryNotFound,
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

#: The verbs and their results, imported from ``blobstate.api`` on first use (the pipelines load the plugin
#: machinery; ``import blobstate`` stays light). Type checkers see the real signatures through the imports below.
_LAZY = ("BackupResult", "Repository", "RestoreResult", "StoreCommitter", "VerifyReport", "backup",
         "describe_checkpoints", "diff", "gc", "init", "list_checkpoints", "list_stores", "ls", "recover", "restore",
         "stats", "verify")

if TYPE_CHECKING:
    from blobstate.api import (
        BackupResult,
        Repository,
        RestoreResult,
        StoreCommitter,
        VerifyReport,
        backup,
        describe_checkpoints,
        diff,
        gc,
        init,
        list_checkpoints,
        list_stores,
        ls,
        recover,
        restore,
        stats,
        verify,
    )

__all__ = [
    "AppendOutcomeUnknown", "BlobInfo", "BlobNotFound", "BlobStore", "BlobStoreSpec", "BlobstateError", "Checkpoint",
    "CheckpointLog", "CheckpointLogSpec", "ChecksumMismatch", "ConfigurationError", "CorruptIndexError",
    "CorruptJournalError", "DirIndex", "FencedError", "FileBlob", "FileIndex", "FileRange", "GetRequest",
    "IntegrityError", "LocalStore", "LocalStoreSpec", "NothingToRestore", "PluginError", "PutRequest",
    "RepositoryNotFound", "SnapshotIndex", "StorageError", "StoreKey", "TransientStorageError", "UnsafePathError",
    "hookimpl", "hookspec",
    # lazy (``_LAZY``):
    "BackupResult", "Repository", "RestoreResult", "StoreCommitter", "VerifyReport", "backup", "describe_checkpoints",
    "diff", "gc", "init", "list_checkpoints", "list_stores", "ls", "recover", "restore", "stats", "verify",
]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        from blobstate import api

        return getattr(api, name)
    raise AttributeError(f"module 'blobstate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
