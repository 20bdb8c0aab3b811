"""blobstate: incremental, crash-safe backup of stream-processing state to blob stores, and bulk restore.

Public API::

    import blobstate
    result = blobstate.backup("/data/mystore", repo="file:///backups")      # -> BackupResult
    blobstate.restore("/data/mystore", repo="file:///backups")                # -> RestoreResult
    for key, value in blobstate.read_state(repo="file:///backups", store="mystore"): ...   # the state as data
"""

import importlib
from typing import TYPE_CHECKING, Any

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

#: Names imported on first use (``import blobstate`` stays light: the CLI starts in well under 100 ms), from the module
#: named here; every name of ``blobstate.api.__all__`` too (the verbs and result types, listed there only), from
#: ``blobstate.api``. Type checkers see the real objects through the imports below.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("hookimpl", "hookspec"), "blobstate.plugin.hookspecs"),
    **dict.fromkeys(("DirIndex", "FileBlob", "FileIndex", "SnapshotIndex"), "blobstate.model.index"),
    **dict.fromkeys(("BlobInfo", "BlobStore", "CheckpointLog", "FileRange", "GetRequest", "KeyProvider", "LocalStore",
                     "PutRequest"), "blobstate.plugin.interfaces"),
    **dict.fromkeys(("Checkpoint", "StoreKey"), "blobstate.model.records"),
    **dict.fromkeys(("BlobStoreSpec", "CheckpointLogSpec", "KeyProviderSpec", "LocalStoreSpec"),
                    "blobstate.plugin.records"),
}
#: The errors above, exported as they are.
_ERRORS = tuple(name for name, value in globals().items() if isinstance(value, type) and issubclass(value,
                                                                                                   BaseException))

if TYPE_CHECKING:
    from blobstate.api import *  # noqa: F403 - the verbs and result types: ``blobstate.api.__all__``
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


def _api() -> Any:
    return importlib.import_module("blobstate.api")  # not ``from blobstate import api``: that would ask __getattr__


def __getattr__(name: str) -> object:
    """A lazy name (``_LAZY``), a name of ``blobstate.api.__all__``, or ``__all__`` itself (the errors, the lazy
    names and the API's, in that order), each resolved once."""
    if name == "__all__":
        value: object = [*_ERRORS, *_LAZY, *_api().__all__]
    elif name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name.startswith("_") or name not in _api().__all__:
        raise AttributeError(f"module 'blobstate' has no attribute {name!r}")
    else:
        value = getattr(_api(), name)
    globals()[name] = value  # once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_api().__all__))
