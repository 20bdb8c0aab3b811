"""blobstate: incremental, crash-safe backup of stream-processing state to blob stores, and bulk restore.

Public API::

    import blobstate
    result = blobstate.backup("/data/mystore", repo="file:///backups")      # -> BackupResult
    blobstate.restore("/data/mystore", repo="file:///backups")                # -> RestoreResult
    for key, value in blobstate.read_state(repo="file:///backups", store="mystore"): ...   # the state as data
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
    EncryptionKeyError,
    FencedError,
    IntegrityError,
    NothingToRestore,
    PluginError,
    RepositoryNotFound,
    StorageError,
    TransientStorageError,
    UnsafePathError,
)

__version__ = "0.1.0"

#: ``blobstate.api.__all__``: every public verb and result type, importable from ``blobstate`` itself (and listed
#: in ``__all__`` below; ``tests/project/test_api_typing.py`` checks that the three agree).
_API_NAMES = (
    "BackupPreview", "BackupResult", "CheckpointSummary", "CommitState", "Duration", "GcReport", "Listing",
    "LocalCheckpoint", "Repository", "RepositoryInfo", "RestoreResult", "Size", "SnapshotDiff", "StoreCommitter",
    "StoreStats", "VerifyReport", "backup", "describe_checkpoints", "diff", "gc", "init", "journal_events",
    "lifecycle_rule", "list_checkpoints", "list_stores", "ls", "preview_backup", "raise_for_reports", "recover",
    "recover_all", "require_store", "restore", "rotate_key", "stats", "unfinished_commits", "verify",
    "Change", "Undecoded", "read_changes", "read_state", "GroupRestoreResult", "restore_partitions",
    "CopyReport", "DataSubset", "RetentionPolicy", "copy",
)

#: Everything but the errors is imported on first use (``import blobstate`` stays light: the CLI starts in well under
#: 100 ms), from the module named here. Type checkers see the real objects through the imports below.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("hookimpl", "hookspec"), "blobstate.plugin.hookspecs"),
    **dict.fromkeys(("DirIndex", "FileBlob", "FileIndex", "SnapshotIndex"), "blobstate.model.index"),
    **dict.fromkeys(("BlobInfo", "BlobStore", "CheckpointLog", "FileRange", "GetRequest", "KeyProvider", "LocalStore",
                     "PutRequest"), "blobstate.plugin.interfaces"),
    **dict.fromkeys(("Checkpoint", "StoreKey"), "blobstate.model.records"),
    **dict.fromkeys(("BlobStoreSpec", "CheckpointLogSpec", "KeyProviderSpec", "LocalStoreSpec"),
                    "blobstate.plugin.records"),
    **dict.fromkeys(_API_NAMES, "blobstate.api"),
}

if TYPE_CHECKING:
    from blobstate.api import (
        BackupPreview,
        BackupResult,
        Change,
        CheckpointSummary,
        CommitState,
        CopyReport,
        DataSubset,
        Duration,
        GcReport,
        GroupRestoreResult,
        Listing,
        LocalCheckpoint,
        Repository,
        RepositoryInfo,
        RestoreResult,
        RetentionPolicy,
        Size,
        SnapshotDiff,
        StoreCommitter,
        StoreStats,
        Undecoded,
        VerifyReport,
        backup,
        copy,
        describe_checkpoints,
        diff,
        gc,
        init,
        journal_events,
        lifecycle_rule,
        list_checkpoints,
        list_stores,
        ls,
        preview_backup,
        raise_for_reports,
        read_changes,
        read_state,
        recover,
        recover_all,
        require_store,
        restore,
        restore_partitions,
        rotate_key,
        stats,
        unfinished_commits,
        verify,
    )
    from blobstate.model.index import DirIndex, FileBlob, FileIndex, SnapshotIndex
    from blobstate.model.records import Checkpoint, StoreKey
    from blobstate.plugin.hookspecs import hookimpl, hookspec
    from blobstate.plugin.interfaces import (
        BlobInfo,
        BlobStore,
        CheckpointLog,
        FileRange,
        GetRequest,
        KeyProvider,
        LocalStore,
        PutRequest,
    )
    from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, KeyProviderSpec, LocalStoreSpec

__all__ = [
    "AppendOutcomeUnknown", "BlobInfo", "BlobNotFound", "BlobStore", "BlobStoreSpec", "BlobstateError", "Checkpoint",
    "CheckpointLog", "CheckpointLogSpec", "ChecksumMismatch", "ConfigurationError", "CorruptIndexError",
    "CorruptJournalError", "DirIndex", "EncryptionKeyError", "FencedError", "FileBlob", "FileIndex", "FileRange",
    "GetRequest", "IntegrityError", "KeyProvider", "KeyProviderSpec", "LocalStore", "LocalStoreSpec",
    "NothingToRestore", "PluginError", "PutRequest", "RepositoryNotFound", "SnapshotIndex", "StorageError",
    "StoreKey", "TransientStorageError", "UnsafePathError",
    "hookimpl", "hookspec",
    "BackupPreview", "BackupResult", "CheckpointSummary", "CommitState", "Duration", "GcReport", "Listing",
    "LocalCheckpoint", "Repository", "RepositoryInfo", "RestoreResult", "Size", "SnapshotDiff", "StoreCommitter",
    "StoreStats", "VerifyReport", "backup", "describe_checkpoints", "diff", "gc", "init", "journal_events",
    "lifecycle_rule", "list_checkpoints", "list_stores", "ls", "preview_backup", "raise_for_reports", "recover",
    "recover_all", "require_store", "restore", "rotate_key", "stats", "unfinished_commits", "verify",
    "Change", "Undecoded", "read_changes", "read_state", "GroupRestoreResult", "restore_partitions",
    "CopyReport", "DataSubset", "RetentionPolicy", "copy",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # once
        return value
    raise AttributeError(f"module 'blobstate' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
