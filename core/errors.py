"""Typed errors of blobstate, each with the CLI exit code it maps to.

Exit codes (the design's): 0 ok, 1 error, 2 usage, 3 integrity (checksum, corrupt index or journal, missing blob,
unsafe path), 4 fenced, 5 nothing to restore, 6 no blobstate repository at the URL.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INTEGRITY = 3
EXIT_FENCED = 4
EXIT_NOTHING_TO_RESTORE = 5
EXIT_NO_REPOSITORY = 6


class BlobstateError(Exception):
    """Base of every error blobstate raises on purpose; ``exit_code`` is the CLI's exit code for it."""

    exit_code: int = EXIT_ERROR


class ConfigurationError(BlobstateError):
    """Bad options or configuration: an unknown scheme, a store type nobody provides, a bad URL."""

    exit_code = EXIT_USAGE


class PartitionCountError(ConfigurationError):
    """A partitioned store is opened with another number of partitions than its group checkpoints hold (exit 2):
    rows would land in partitions whose state does not hold their keys. Nothing is changed."""


class InvalidRecordError(ConfigurationError):
    """A record built to be written does not fit its schema (exit 2): ``field`` names the field at fault as the
    record's JSON form names it (``partitions[0].crc32c``; empty when the record as a whole is, e.g. too large).
    Nothing was written."""

    def __init__(self, message: str, *, field: str = "") -> None:
        self.field = field
        super().__init__(message)


class PluginError(BlobstateError):
    """A plugin is broken or two plugins claim the same backend ambiguously."""


class MissingDependencyError(ConfigurationError):
    """A backend's optional dependency is not installed; the message carries the ``pip install`` hint."""


class StorageError(BlobstateError):
    """A blob store or checkpoint log call failed for good (after retries for transient faults)."""


class TransientStorageError(StorageError):
    """A fault worth retrying (connection reset, throttling, timeout). Plugins may raise it to ask for a retry."""


class AppendOutcomeUnknown(TransientStorageError):
    """A checkpoint log may or may not have applied an append: the request was sent and then timed out, or the
    connection broke before the answer arrived. Never treated as a failure: the commit stays open and the core
    resolves the outcome by re-appending the same record (an append is idempotent for the same checkpoint id at
    the same generation, see ``CheckpointLog.append``) with backoff until the log answers for certain.

    ``checkpoint_id`` names the record whose outcome is unknown.
    """

    def __init__(self, message: str, *, checkpoint_id: str = "") -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(message)


class UnlistableKey(StorageError):
    """A listing holds a key obstore cannot represent (an empty, ``.`` or ``..`` segment: ``a//b``); the caller
    lists through its other client instead (``blobstate.plugins.toolkit.transfer``)."""


class JournalWriteError(StorageError):
    """The journal could not be written (disk full, I/O error). The record being written was cut back off the file
    and the journal accepts no more appends in this process, so it never holds a torn record followed by valid
    ones; once space returns, ``blobstate recover`` (or the next backup) carries on from the last whole record."""


class IntegrityError(BlobstateError):
    """Stored data does not match what was recorded: checksum, size, a corrupt index, a missing blob."""

    exit_code = EXIT_INTEGRITY


class EncryptionKeyError(IntegrityError):
    """An encrypted repository cannot be opened with the key given (another key, or none), or a key is given
    where blobstate would otherwise write plaintext (exit 3). Raised before anything is written."""


class ForeignObjectError(IntegrityError):
    """An id read back from a repository, a checkpoint log or a journal names an object outside its store's own
    prefix, or has a shape blobstate never writes: it is refused before anything is read, written or deleted."""


class TreeInvalid(IntegrityError):
    """A restore's complete new tree did not pass ``LocalStore.validate`` (a RocksDB that does not open)."""


class ChecksumMismatch(IntegrityError):
    """CRC32C or size of a blob, file or index differs from the recorded value."""


class CorruptIndexError(IntegrityError):
    """A snapshot index or checkpoint record cannot be parsed or fails validation."""


class CorruptJournalError(IntegrityError):
    """A journal record in the middle of the file (not a torn tail) is damaged."""


class BlobNotFound(IntegrityError):
    """A blob that an index references is not in the blob store (deleted, never written)."""

    def __init__(self, blob_id: str, detail: str = "") -> None:
        self.blob_id = blob_id
        super().__init__(f"blob not found: {blob_id}" + (f" ({detail})" if detail else ""))


class UnsafePathError(IntegrityError):
    """A name from an index would escape the restore destination (absolute path, ``..``, a symlink out)."""


class FencedError(BlobstateError):
    """Another writer advanced the checkpoint generation: this writer is a zombie and must stop.

    Follows Kafka/Samza producer fencing: ``append(checkpoint, expected_generation)`` fails when the log's latest
    generation is not ``expected_generation``.
    """

    exit_code = EXIT_FENCED

    def __init__(self, message: str, *, expected: int | None = None, actual: int | None = None) -> None:
        self.expected = expected
        self.actual = actual
        super().__init__(message)


class GroupVoidedError(BlobstateError):
    """A group record landed after gc took parts of it that nobody could put back, and its owner voided it (exit
    3: objects were lost; ``blobstate.commit.parts.void_group``): the batch counts for no partition, and the engine
    must run it again (a Spark query fails its batch; its restart re-runs it)."""

    exit_code = EXIT_INTEGRITY


class ObjectChangedError(BlobstateError):
    """A metadata object that is rewritten in place (the repository marker) changed, or vanished, since it was read:
    the conditional rewrite (``BlobStore.rewrite``: If-Match on an ETag, a GCS generation match, a compare-and-swap
    on file://) was refused and nothing was written (exit 4, like a fenced writer: another writer got there first).
    Read it again and decide again; ``blobstate key rotate`` says so rather than rotate a key it did not read."""

    exit_code = EXIT_FENCED


class DivergedTargetError(BlobstateError):
    """``blobstate copy`` found the target store moved on by itself (exit 4, like a fenced writer: another writer
    holds the target): it holds a record the source does not after the last one they share, or shares none with the
    source while its newest is not the one the source's oldest follows (git's non-fast-forward). Nothing is copied
    to that store; appending the source's records would bury the target's own newest state and let the source's
    retention prune it. ``own``: the target's record ids the source lacks (newest last)."""

    exit_code = EXIT_FENCED

    def __init__(self, message: str, *, own: tuple[str, ...] = ()) -> None:
        self.own = own
        super().__init__(message)


class NothingToRestore(BlobstateError):
    """No checkpoint exists for the store key (or none matches the requested one)."""

    exit_code = EXIT_NOTHING_TO_RESTORE


class BrokenChainError(NothingToRestore):
    """The records that would make up a state are not all there (exit code 5, like ``NothingToRestore``)."""


class StateNotHeld(BrokenChainError):
    """The log holds no chain that ends at the batch needed (exit 5): ``needed`` that batch, ``holds`` what it has
    (the Align door, ``blobstate.model.align``)."""

    def __init__(self, message: str, *, needed: int, holds: str) -> None:
        self.needed = needed
        self.holds = holds
        super().__init__(message)


class BatchNotCommitted(NothingToRestore):
    """A batch the engine's commit log does not hold as committed was asked for (exit 5)."""


class BatchNotRetained(NothingToRestore):
    """The state (or the changes) of a batch the repository no longer holds, or does not hold yet (exit 5):
    ``oldest`` and ``newest`` are the readable batches (None: none; ``blobstate.restoring.state``)."""

    def __init__(self, message: str, *, oldest: int | None, newest: int | None) -> None:
        self.oldest = oldest
        self.newest = newest
        super().__init__(message)


class LocalStoreError(BlobstateError):
    """A local store cannot be read or changed safely: a file kept changing while it was copied (tar's "file
    changed as we read it"), a RocksDB held open by a live process, a RocksDB whose files kept changing under a
    checkpoint taken from its path."""


class RestoreRefused(BlobstateError):
    """A restore that would delete what blobstate did not put there: the destination is not empty and no restore
    of this store made it (pass ``force`` / ``--force`` to replace its contents)."""

    exit_code = EXIT_USAGE


class UnsafeDestination(RestoreRefused):
    """A restore destination that is, holds, or lies inside the repository, its checkpoint log or the work
    directory (exit 2): a restore replaces everything in its destination, so it would delete them. Refused before
    anything changes, ``force`` or not."""


class CommitInProgressError(BlobstateError):
    """Another commit of the same store is running on this host (the journal's lock is held)."""


class RepositoryNotFound(BlobstateError):
    """The URL holds no blobstate repository (no repository marker): a mistyped ``--repo`` is reported, never
    mistaken for an empty repository. The first backup into an empty location creates one (or ``blobstate init``).
    """

    exit_code = EXIT_NO_REPOSITORY


class StorageLocationError(StorageError):
    """The repository's storage location cannot be used as it is configured: one line that names the URL and the
    fix (``blobstate.repository.translate`` writes every one of them). ``reason`` is one of
    ``missing-bucket``, ``access-denied``, ``wrong-region``, ``unreachable``."""

    reason = ""


class BucketNotFoundError(StorageLocationError):
    """The bucket (S3, GCS) or container (Azure) of the URL does not exist (exit 6, like any location without a
    repository): blobstate never creates buckets."""

    exit_code = EXIT_NO_REPOSITORY
    reason = "missing-bucket"


class AccessDeniedError(StorageLocationError):
    """The store refused the credentials (unknown key, bad signature, no credentials) or the permission."""

    reason = "access-denied"


class WrongRegionError(StorageLocationError):
    """The bucket lives in another region than the one the client addressed."""

    reason = "wrong-region"


class EndpointUnreachableError(StorageLocationError):
    """The storage endpoint did not answer (connection refused, DNS, timeout) after the retries."""

    reason = "unreachable"


class LogMismatchError(BlobstateError):
    """The repository records another checkpoint log than the one this command was opened with (exit 2): a
    repository has exactly one log (its marker records the log's identity); committing or collecting garbage
    through a second one would fork the store's history. ``blobstate init --change-log`` moves it on purpose."""

    exit_code = EXIT_USAGE
