"""A repository as the pipelines see it: a blob store, a checkpoint log, and the layout of a store's objects."""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from blobstate.codec import frame
from blobstate.codec.cipher import ObjectCipher
from blobstate.codec.keys import KeyConfig, new_encryption, open_cipher
from blobstate.codec.store import CodecBlobStore
from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, BlobstateError, ChecksumMismatch, ConfigurationError, NothingToRestore
from blobstate.local.checksum import crc32c_bytes
from blobstate.model import layout, references
from blobstate.model.chain import overridden_parts, valid_snapshots
from blobstate.model.index import FileBlob, SnapshotIndex
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.selection import select_checkpoint
from blobstate.plugin.interfaces import BlobStore, BoundedSink, CheckpointLog
from blobstate.repository.backends import normalize_url, open_blob_store, open_repository_log
from blobstate.repository.location import holds_indexes
from blobstate.repository.log_identity import log_identity
from blobstate.repository.marker import RepositoryInfo, bind_log, ensure_repository

if TYPE_CHECKING:  # opened by the repository-wide verbs (blobstate.maintenance.stores) and a writer (commit.backup)
    from blobstate.local.object_cache import ObjectCache

#: The ``BlobStore`` calls that reach the store (a listing of many pages, or a batch, counts once).
STORE_CALLS = frozenset({"put", "put_exclusive", "get", "get_bytes", "get_bounded", "delete", "remove_ttl", "has_ttl",
                         "list", "list_with_ttl", "expired", "sweep_expired", "temporaries", "put_many", "get_many",
                         "delete_many", "delete_permanent_many", "remove_ttl_many", "location_exists",
                         "install_lifecycle", "recorded_expiry", "get_versioned", "rewrite"})


class CallCounter:
    """A blob store seen through a counter of the calls made on it that reach the store (``STORE_CALLS``), by
    method: what a repository-wide verb reports with ``-v``. Everything passes through to the store."""

    def __init__(self, inner: BlobStore) -> None:
        self._inner = inner
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in STORE_CALLS:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.counts[name] += 1
            return attr(*args, **kwargs)

        return counted


def declared(limit: int, what: str) -> BoundedSink:
    """A sink bounded by the size a trusted record declares (``ChecksumMismatch`` past it): indexes and
    changelogs are read no further than their records say, never as far as a store serves."""
    return BoundedSink(limit, what, error=ChecksumMismatch, why="the size its record declares")


@dataclass
class Repository:
    """The blob store and checkpoint log of one repository URL (the log defaults to the file log inside it).

    Every object passes through the repository's codec on its way to and from ``store``
    (``blobstate.codec.store.CodecBlobStore``, put around the store given here): compressed as the settings'
    ``compression`` says (``BLOBSTATE_COMPRESSION``) and, with ``cipher`` (an encrypted repository), encrypted;
    callers keep handing it plain bytes, and read data blobs with ``read_blob``.

    ``settings``: what the repository was opened with (``Repository.open``; ``Settings()``, the defaults, for one
    assembled by hand): the committers, restore and maintenance given this repository run with them.
    """

    store: BlobStore
    log: CheckpointLog
    url: str
    info: RepositoryInfo | None = None
    cipher: ObjectCipher | None = None
    settings: Settings = field(default_factory=Settings, repr=False)
    #: this host's cache of the repository's immutable objects (``use_object_cache``), None: every read is remote
    object_cache: ObjectCache | None = field(default=None, repr=False)
    codec: CodecBlobStore = field(init=False, repr=False)
    #: inside ``reading_indexes_once``: the indexes read so far, by (blob id, size, CRC32C) of their records, the
    #: most recently used last; at most ``_indexes_limit`` of them (None: no limit)
    _indexes: dict[tuple[str, int, int], SnapshotIndex] | None = field(default=None, init=False, repr=False)
    _indexes_limit: int | None = field(default=None, init=False, repr=False)
    _indexes_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        # --- codec (issue 33): the one place every object passes through ---
        if not isinstance(self.store, CodecBlobStore):
            self.store = CodecBlobStore(self.store, cipher=self.cipher, compress=self.settings.compression != "off",
                                        budget=self.settings.transfer_budget)
        self.codec = self.store

    def choose_codec(self, path: str, size: int) -> str | None:
        """How a new data blob of the local file ``path`` (``size`` bytes) is stored: ``"zstd"`` where a sample of
        the file says compression pays (``blobstate.codec.frame.choose``), None (as it is) otherwise or with
        compression off. The planner records it per blob in the index."""
        return frame.choose(path, size) if self.codec.compress else None

    @property
    def metadata_codec(self) -> str | None:
        """How a changelog blob is stored: ``"zstd"`` (always, readers tell it by zstd's magic), None with
        compression off."""
        return frame.ZSTD if self.codec.compress else None

    def read_blob(self, blob: FileBlob, sink: BinaryIO) -> int:
        """Stream the plain bytes of the data blob ``blob`` (an index entry's chunk) into ``sink``, decoded as the
        entry says; returns how many. Raises ``BlobNotFound`` and ``ChecksumMismatch`` (damaged, not authentic);
        the caller checks sizes and CRC32C as for any blob."""
        return self.codec.get_blob(blob.blob_id, sink, blob.codec)

    @classmethod
    def open(cls, repo: str, *, log: str | None = None, storage_options: dict[str, Any] | None = None,
             ttl_mode: str | None = None, max_concurrency: int = 8, log_options: dict[str, Any] | None = None,
             create: bool = True, change_log: bool = False, key_config: KeyConfig | None = None,
             count_calls: bool = False, settings: Settings | None = None) -> Repository:
        """Open the repository at ``repo`` and its checkpoint log (``log``, default: the file log inside it), with
        ``settings`` (what the verb runs with; a program that opens a repository itself may leave them out: then
        the environment's, ``Settings.from_environ``), handed to the blob store and log factories and kept as
        ``settings``.

        The repository marker (``blobstate.repository.marker``) is checked: with ``create`` (writers) an empty location
        becomes a repository, without it (readers) a location without one raises ``RepositoryNotFound`` (exit 6).
        ``log_options`` go to the checkpoint log's factory; without them a log on the repository's own URL scheme
        gets ``storage_options`` (same cloud, same credentials) and any other log none.

        A repository has exactly one checkpoint log: its marker records the log's identity
        (``blobstate.repository.marker.bind_log``), and a repository opened with another log raises
        ``LogMismatchError`` (exit 2) before anything is read or written through that log; ``change_log`` moves the
        repository to ``log`` on purpose (``blobstate init --change-log``). ``count_calls``: the store (and a log
        on it) is used through a ``CallCounter`` (``Repository.calls``), below the codec: what reaches the store.

        An encrypted repository (its marker records the wrapped data key) is opened with ``key_config`` (default: the
        key ``settings`` name, ``BLOBSTATE_KEY_FILE``); a wrong key or none raises ``EncryptionKeyError`` (exit 3)
        before anything is written, as does a key given to a writer of a repository that is not encrypted. A
        writer creating a repository while a key is configured creates it encrypted (``blobstate.codec.keys``).
        """
        settings = settings if settings is not None else Settings.from_environ()
        url = normalize_url(repo)
        store = open_blob_store(url, settings=settings, storage_options=storage_options, ttl_mode=ttl_mode,
                                max_concurrency=max_concurrency)
        if count_calls:
            store = CallCounter(store)  # type: ignore[assignment]
        keys = key_config or KeyConfig.of(settings)
        try:
            identity = log_identity(normalize_url(log) if log is not None else None, url, log_options)
            info = ensure_repository(store, url, create=create, checkpoint_log=identity,
                                     encryption=new_encryption(keys) if create and keys.given else None)
            # --- encryption (issue 33): the key is checked before anything below can write ---
            cipher = open_cipher(info.encryption, info.repository_id, keys, url=url, writing=create)
            open_log = functools.cache(lambda: open_repository_log(url, log, store, storage_options, log_options,
                                                                   settings))
            info = bind_log(store, info, url, identity, change=change_log, read_only=not create,
                            holds_records=lambda: bool(open_log().keys()) or not holds_indexes(store))
            checkpoint_log = open_log()
            if cipher is not None:
                # imported here, deliberately: only an encrypted repository's log is sealed (the sealed record
                # type is ~2 ms of a plain repository's start-up, issue 31)
                from blobstate.codec.log import SealedCheckpointLog

                checkpoint_log = SealedCheckpointLog(checkpoint_log, cipher)
        except BaseException:
            store.close()
            raise
        return cls(store, checkpoint_log, url, info, cipher=cipher, settings=settings)

    @property
    def calls(self) -> Counter[str] | None:
        """The calls made on the blob store so far, by method, when opened with ``count_calls``; else None."""
        inner = self.codec.inner
        return inner.counts if isinstance(inner, CallCounter) else None

    def read_index(self, checkpoint: Checkpoint) -> SnapshotIndex:
        """Fetch the checkpoint's index and verify its size and CRC32C before parsing it.

        Raises ``BlobNotFound`` (missing index), ``ChecksumMismatch`` (swapped or damaged index) or
        ``CorruptIndexError`` (unparseable), ``ConfigurationError`` for a delta record (it has no index). Never
        reads more than the size the record declares (plus one byte).
        """
        if checkpoint.is_delta or checkpoint.is_group:
            raise ConfigurationError(f"checkpoint {checkpoint.checkpoint_id} is a {checkpoint.kind} record (batch "
                                     f"{checkpoint.batch_id}): it has no snapshot index of its own")
        read = (checkpoint.index_blob_id, checkpoint.index_size, checkpoint.index_crc32c)
        with self._indexes_lock:
            cache = self._indexes
            index = cache.pop(read, None) if cache is not None else None
        if index is None:
            index = self._fetch_index(checkpoint)
        self._keep_index(read, index)
        if index.checkpoint_id != checkpoint.checkpoint_id or index.store_key != checkpoint.store_key:
            raise ChecksumMismatch(f"snapshot index {checkpoint.index_blob_id} belongs to another checkpoint")
        return index

    def _keep_index(self, read: tuple[str, int, int], index: SnapshotIndex) -> None:
        """Inside ``reading_indexes_once``: keep ``index`` as the most recently used, within the limit."""
        with self._indexes_lock:
            cache = self._indexes
            if cache is None:
                return
            cache[read] = index
            while self._indexes_limit is not None and len(cache) > self._indexes_limit:
                del cache[next(iter(cache))]

    @contextmanager
    def reading_indexes_once(self, *, limit: int | None = None) -> Iterator[Repository]:
        """Inside the block ``read_index`` fetches and parses each snapshot index once: a second record naming the
        same index with the same size and CRC32C gets the index already read (an index is never overwritten, and
        it was checked against those when it was read). A restore reads the index it restores, its init cleanup
        the latest and the retained ones: each once; a committer (``blobstate.commit.backup``) holds a block open
        while it lives, with a ``limit`` of indexes kept (the least recently used go first), so that retention
        reads no index again that it read or wrote before. Nested blocks share the outer one's indexes."""
        if self._indexes is not None:
            yield self
            return
        self._indexes, self._indexes_limit = {}, limit
        try:
            yield self
        finally:
            self._indexes, self._indexes_limit = None, None

    def remember_index(self, checkpoint: Checkpoint, index: SnapshotIndex, data: bytes) -> None:
        """Inside ``reading_indexes_once``: ``index`` (serialized as ``data``) is ``checkpoint``'s, written by this
        process; ``read_index`` of a record naming it with ``data``'s size and CRC32C returns it unread."""
        if len(data) == checkpoint.index_size and crc32c_bytes(data) == checkpoint.index_crc32c:
            self._keep_index((checkpoint.index_blob_id, checkpoint.index_size, checkpoint.index_crc32c), index)

    def prefetch_indexes(self, checkpoints: Sequence[Checkpoint]) -> None:
        """Inside ``reading_indexes_once``: fetch the indexes of ``checkpoints``' snapshots (a group's parts
        included) that are not read yet, concurrently (``BlobStore.map_concurrent``), so that the walk that needs
        them one after another finds them read. A failing read is left to that walk (it fails there again, with its
        own handling)."""
        if self._indexes is None:
            return
        wanted: dict[tuple[str, int, int], Checkpoint] = {}
        for cp in checkpoints:
            for part in cp.expand():
                read = (part.index_blob_id, part.index_size, part.index_crc32c)
                if not part.is_delta and not part.is_group and read not in self._indexes:
                    wanted.setdefault(read, part)
        if len(wanted) < 2:
            return  # one read gains nothing from going first

        def fetch(cp: Checkpoint) -> None:
            try:
                self.read_index(cp)
            except BlobstateError:
                pass

        self.store.map_concurrent(fetch, list(wanted.values()))

    def use_object_cache(self, cache: ObjectCache | None) -> None:
        """Read snapshot indexes (and, through a log that takes it, ``FileCheckpointLog.record_cache``, checkpoint
        records) through this host's ``cache`` first (``blobstate.local.object_cache``; the repository-wide verbs
        and every writer, ``StoreCommitter``): an index's cached bytes are used only when they have the size and
        CRC32C its record declares (``_index_matches``), and an index read from the store is kept there after its
        check. Not for an encrypted repository (its objects are not kept in the clear): then a
        no-op, as with ``cache`` None."""
        if cache is None or self.cipher is not None:
            return
        self.object_cache = cache
        if hasattr(self.log, "record_cache"):
            self.log.record_cache = cache

    def cache_written_index(self, checkpoint: Checkpoint, data: bytes) -> None:
        """Keep ``data``, the plain bytes of the index of ``checkpoint`` this process wrote, in the object cache
        (when it is used): a writer calls it once its commit point landed, so that an entry is left behind only for
        an index some record names (retention and gc discard it with the index, ``discard_cached``)."""
        if self.object_cache is not None and _index_matches(checkpoint, data):
            self.object_cache.put(checkpoint.index_blob_id, data)

    def cached_index(self, checkpoint: Checkpoint) -> bytes | None:
        """``checkpoint``'s index bytes in this host's object cache when they are the ones its record names (else
        None): what a writer puts back when the store lost that index (``healing.put_back_indexes``)."""
        if self.object_cache is None or checkpoint.is_delta or checkpoint.is_group:
            return None
        return self.object_cache.get(checkpoint.index_blob_id, lambda d: _index_matches(checkpoint, d))

    def discard_cached(self, blob_ids: Sequence[str]) -> None:
        """Drop the object cache's entries of ``blob_ids``' indexes (deleted from the store; other ids ignored)."""
        if self.object_cache is not None:
            self.object_cache.discard([b for b in blob_ids if layout.is_index_id(b)])

    def _fetch_index(self, checkpoint: Checkpoint) -> SnapshotIndex:
        """The index of ``checkpoint``, from the object cache when its bytes there match the record, else fetched
        (bounded by its declared size) and checked; then parsed."""
        cache = self.object_cache
        if cache is not None:
            data = cache.get(checkpoint.index_blob_id, lambda d: _index_matches(checkpoint, d))
            if data is not None:
                return SnapshotIndex.from_bytes(data, source=checkpoint.index_blob_id)
        sink = declared(checkpoint.index_size, f"snapshot index {checkpoint.index_blob_id} of checkpoint "
                                               f"{checkpoint.checkpoint_id}")
        try:
            data = self.store.get_bounded(checkpoint.index_blob_id, sink)
        except BlobNotFound:
            raise BlobNotFound(checkpoint.index_blob_id,
                               f"snapshot index of checkpoint {checkpoint.checkpoint_id}") from None
        if not _index_matches(checkpoint, data):
            raise ChecksumMismatch(
                f"snapshot index {checkpoint.index_blob_id} of checkpoint {checkpoint.checkpoint_id} does not match "
                f"its checkpoint record (size {len(data)} vs {checkpoint.index_size}, CRC32C {crc32c_bytes(data)} vs "
                f"{checkpoint.index_crc32c})"
            )
        index = SnapshotIndex.from_bytes(data, source=checkpoint.index_blob_id)
        if cache is not None:
            cache.put(checkpoint.index_blob_id, data)
        return index

    def read_changelog(self, checkpoint: Checkpoint) -> bytes:
        """A delta record's changelog: the one it carries inline (no request), else its blob fetched (bounded by the
        declared size); either way its size and CRC32C verified against the record.

        Raises ``BlobNotFound`` or ``ChecksumMismatch``."""
        if checkpoint.changelog_inline is not None:
            what = f"inline changelog of delta {checkpoint.checkpoint_id}"
            data = checkpoint.changelog_inline
        else:
            what = f"changelog {checkpoint.changelog_blob_id} of delta {checkpoint.checkpoint_id}"
            try:
                data = self.store.get_bounded(checkpoint.changelog_blob_id, declared(checkpoint.changelog_size, what))
            except BlobNotFound:
                raise BlobNotFound(checkpoint.changelog_blob_id, what) from None
        if len(data) != checkpoint.changelog_size or crc32c_bytes(data) != checkpoint.changelog_crc32c:
            raise ChecksumMismatch(f"{what} does not match its record (size {len(data)} vs {checkpoint.changelog_size}"
                                   f", CRC32C {crc32c_bytes(data)} vs {checkpoint.changelog_crc32c})")
        return data

    def choose(self, key: StoreKey, *, checkpoint: str | int | None = None, max_batch_id: int | None = None,
               checkpoint_id: str | None = None, history: list[Checkpoint] | None = None) -> Checkpoint:
        """The latest checkpoint, the one ``checkpoint`` names (``latest``, a checkpoint id, a unique prefix of one,
        or a generation number: ``blobstate.model.selection.select_checkpoint``), or the newest with
        ``batch_id <= max_batch_id``. ``checkpoint_id`` is the older name of ``checkpoint``. Latest and
        ``max_batch_id`` choose among snapshots (``chain.valid_snapshots``): delta records are not states.

        ``history``: the store's records as already read (a repository-wide verb's), instead of reading the log.

        Raises ``NothingToRestore`` when none qualifies, ``ConfigurationError`` for an ambiguous prefix.
        """
        checkpoint = checkpoint if checkpoint is not None else checkpoint_id
        if (checkpoint is None or checkpoint == "latest") and max_batch_id is None:
            latest = (history[-1] if history else None) if history is not None else self.log.latest(key)
            if latest is None:
                raise NothingToRestore(f"no checkpoint for {key} in {self.log.url or self.url}{self.others([key])}")
            if latest.is_group:
                raise NothingToRestore(f"{key} is a partitioned store (group checkpoints of {latest.num_partitions} "
                                       "partitions): restore one partition of it (partition=)")
            if not latest.is_delta:
                return latest
        history = history if history is not None else self.log.history(key)
        if checkpoint is not None and checkpoint != "latest":
            return select_checkpoint(history, checkpoint, key)
        snapshots = valid_snapshots(history)
        if max_batch_id is None:
            if not snapshots:
                raise NothingToRestore(f"no snapshot of {key} yet, only deltas (batches "
                                       f"{[c.batch_id for c in history]})")
            return snapshots[-1]
        for cp in reversed(snapshots):
            if cp.batch_id is not None and max_batch_id is not None and cp.batch_id <= max_batch_id:
                return cp
        raise NothingToRestore(f"no checkpoint for {key} with a batch id <= {max_batch_id} (retained batch ids: "
                               f"{[c.batch_id for c in history]})")

    def others(self, keys: Sequence[StoreKey], *, named_by_directory: bool = False) -> str:
        """``; stores with checkpoints: ...`` (but ``keys``, the ones asked for) and the options that choose one,
        for the message of a store not found; with ``named_by_directory``, that the store was named after a
        directory (``--store`` not given)."""
        try:
            listed_keys = sorted(k for k in self.log.keys() if k not in keys)
        except Exception:  # noqa: BLE001 - only a hint: the error itself is "nothing to restore"
            return ""
        if not listed_keys:
            return " (the log holds no checkpoint of any store)"
        listed = ", ".join(str(k) for k in listed_keys[:20]) + (
            f", ... ({len(listed_keys)} stores)" if len(listed_keys) > 20 else "")
        named = " (the store was named after the directory: --store was not given)" if named_by_directory else ""
        return f"; stores with checkpoints: {listed}{named}. Choose one with --job, --task and --store"

    def retained_references(self, checkpoints: list[Checkpoint], *, history: Sequence[Checkpoint] | None = None,
                            on_unreadable: Callable[[Checkpoint, BlobstateError], None] | None = None) -> set[str]:
        """Every blob id (indexes included) the given checkpoints reference (``blobstate.model.references.references``,
        the indexes read with ``read_index``).

        Raises when an index cannot be read: deletes must never be decided on incomplete references. With
        ``on_unreadable`` (what leaves retention: an unread index only means fewer deletes) it is called instead
        and that index's blobs are left out. A delta record references its changelog blob, a group record what
        each of its partitions' records references. With ``history`` (the log the checkpoints belong to), the missing
        index of a snapshot part a later delta overrides (``model.chain.overridden_parts``: a void, issue 27 case 2)
        counts as referencing nothing; any other unreadable index is handled as above.
        """
        overridden = overridden_parts(history) if history and any(cp.is_group for cp in checkpoints) else set()
        if overridden:
            outer = on_unreadable

            def on_unreadable(cp: Checkpoint, exc: BlobstateError) -> None:
                if cp.checkpoint_id in overridden and isinstance(exc, BlobNotFound):
                    return
                if outer is None:
                    raise exc
                outer(cp, exc)

        return references.references(checkpoints, self.read_index, on_unreadable=on_unreadable)

    def close(self) -> None:
        """Close the blob store and the checkpoint log (``with Repository.open(...) as repository:`` does it)."""
        self.store.close()
        self.log.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _index_matches(checkpoint: Checkpoint, data: bytes) -> bool:
    """Whether ``data`` has the size and CRC32C ``checkpoint`` declares for its snapshot index (the one check of an
    index's bytes, fetched or cached)."""
    return len(data) == checkpoint.index_size and crc32c_bytes(data) == checkpoint.index_crc32c
