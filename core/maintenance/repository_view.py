"""What a repository-wide verb reads once for every store (``RepositoryView``), and how the verbs over many stores
work on it: ``for_each_store`` (each store's work on the store's bounded pool), ``matching`` (``--job``/``--task``),
``own_indexes``, this host's object cache (``with_object_cache``, ``sweep_object_cache``) and what a verb asked of
the store (``calls_summary``). Used by the repository-wide verbs (``blobstate.maintenance.stores``), gc and the
read verbs (``blobstate.maintenance.queries``).

``RepositoryView`` is the stores' checkpoint records (``CheckpointLog.histories``: the file log lists
``checkpoints/`` once and reads the records concurrently), and when the verb needs them, every object of the
repository from one listing (``BlobStore.list('')``, parsed by ``blobstate.model.layout``) and every blob that
carries a TTL (one ``BlobStore.expired('', far future)``). gc keeps its order (Safety, rule 3): the view lists the
objects and the TTLs *before* it reads the log, so a commit that landed before the listing is seen as a reference;
the re-checks before each delete (``DeleteGuard``) read the store and the log afresh, never the view.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TypeVar

from blobstate.model import layout
from blobstate.model.layout import FAR_FUTURE_MS
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.capabilities import listing_with_ttl
from blobstate.plugin.interfaces import BlobInfo
from blobstate.repository import host
from blobstate.repository.repo import Repository

R = TypeVar("R")
_STORE_OBJECTS = (layout.ObjectKind.BLOB, layout.ObjectKind.INDEX, layout.ObjectKind.LEASE)

_logger = logging.getLogger("blobstate.api")


@dataclass
class RepositoryView:
    """What a repository-wide verb reads once for every store: the stores' records (``histories``), and, when
    taken with ``objects``, every object of each store (``objects``) and the blobs with a TTL (``ttl``).

    ``keys``: every store with a record, plus (with ``objects``) every store prefix holding a blob, an index or a
    lease; sorted."""

    repo: Repository
    keys: list[StoreKey]
    histories: dict[StoreKey, list[Checkpoint]]
    objects: dict[StoreKey, list[BlobInfo]] | None = None
    ttl: dict[StoreKey, set[str]] | None = None
    _expired: dict[StoreKey, set[str]] = field(default_factory=dict)

    @classmethod
    def take(cls, repo: Repository, *, objects: bool = False, ttl: bool = False,
             keys: Iterable[StoreKey] | None = None, match: Callable[[StoreKey], bool] | None = None,
             now_ms: int | None = None, cached: bool = False, work_base: str | None = None) -> RepositoryView:
        """Read the view: with ``objects`` the listing first, with ``ttl`` the TTLs then (``now_ms``: gc's clock,
        for the blobs already expired; both from one listing where the store offers it,
        ``capabilities.listing_with_ttl``), then the records: of ``keys`` one store at a time (a few named stores),
        else of every store found (that ``match`` accepts) at once (``CheckpointLog.histories``). ``cached``: the
        records and indexes are read through this host's object cache (``with_object_cache``, under
        ``work_base``)."""
        if cached:
            with_object_cache(repo, work_base)
        now = now_ms if now_ms is not None else layout.now_ms()
        scan = listing_with_ttl(repo.store) if objects and ttl else None
        answer = scan("", now) if scan is not None else None
        listed = answer[0] if answer is not None else repo.store.list("") if objects else None
        found: dict[StoreKey, list[BlobInfo]] | None = None
        if listed is not None:
            found = {}
            for info in listed:
                name = layout.parse(info.blob_id)
                if name is not None and name.kind in _STORE_OBJECTS and name.key is not None:
                    found.setdefault(name.key, []).append(info)
        with_ttl: dict[StoreKey, set[str]] | None = None
        expired: dict[StoreKey, set[str]] = {}
        if answer is not None:
            with_ttl = _by_store(answer[1])
            expired = {k: ids for k, ids in _by_store(answer[2]).items() if match is None or match(k)}
        elif ttl:
            with_ttl = _by_store(repo.store.expired("", FAR_FUTURE_MS))
            # what has expired is a part of what has a TTL: asked (one listing each) only of the stores with any
            leased = [k for k in sorted(with_ttl) if match is None or match(k)]
            answers = repo.store.map_concurrent(lambda k: repo.store.expired(k.prefix, now), leased)
            expired = {k: set(a) for k, a in zip(leased, answers, strict=True)}
        if keys is not None:
            wanted = list(keys)
            histories = {k: repo.log.history(k) for k in wanted}
        elif match is None:
            histories = repo.log.histories()
            wanted = sorted(set(histories) | set(found or ()))
        else:
            wanted = sorted(k for k in set(repo.log.keys()) | set(found or ()) if match(k))
            histories = repo.log.histories(wanted)
        return cls(repo, wanted, histories, found, with_ttl, expired)

    def history(self, key: StoreKey) -> list[Checkpoint]:
        return self.histories.get(key, [])

    def latest(self, key: StoreKey) -> Checkpoint | None:
        history = self.history(key)
        return history[-1] if history else None

    def listing(self, key: StoreKey) -> list[BlobInfo]:
        """The store's objects (blobs, indexes; leases are the TTLs) as the view listed them, sorted by id."""
        assert self.objects is not None, "a view taken without objects"
        return sorted((i for i in self.objects.get(key, []) if not layout.is_lease(i.blob_id)),
                      key=lambda i: i.blob_id)

    def with_ttl(self, key: StoreKey) -> set[str]:
        """The store's blobs that carried a TTL when the view was taken."""
        assert self.ttl is not None, "a view taken without ttl"
        return set(self.ttl.get(key, set()))

    def expired(self, key: StoreKey) -> set[str]:
        """The store's blobs whose TTL had expired (at the view's ``now_ms``) when the view was taken."""
        return set(self._expired.get(key, set()))


def _by_store(blob_ids: Iterable[str]) -> dict[StoreKey, set[str]]:
    """``blob_ids`` grouped by the store whose prefix names them (ids of no store left out)."""
    out: dict[StoreKey, set[str]] = {}
    for blob_id in blob_ids:
        name = layout.parse(blob_id)
        if name is not None and name.key is not None:
            out.setdefault(name.key, set()).add(blob_id)
    return out


def for_each_store(repo: Repository, fn: Callable[[StoreKey], R], keys: list[StoreKey]) -> list[R]:
    """``fn(key)`` for every key, at most ``max_concurrency`` at once (the store's pool: the first error raised
    after the others settled), results in the order of ``keys``."""
    return repo.store.map_concurrent(fn, keys)


def matching(job: str | None, task: str | None) -> Callable[[StoreKey], bool] | None:
    """The filter of ``--job``/``--task`` (None: every store)."""
    if job is None and task is None:
        return None
    return lambda k: (job is None or k.job == job) and (task is None or k.task == task)


def own_indexes(repo: Repository) -> Repository:
    """``repo``'s store and log with an index cache of its own (``reading_indexes_once``): one store's work reads
    each of its indexes once, while other stores' work runs beside it on the same repository."""
    return replace(repo)


def with_object_cache(repo: Repository, work_base: str | None = None) -> Repository:
    """``repo`` reading its records and indexes through this host's object cache (``work_base``: the work
    directories' base, default the repository's settings'; ``blobstate.local.object_cache``): a verb run again
    reads only what is new. Unless the repository's settings turn the cache off (``BLOBSTATE_OBJECT_CACHE=off``)."""
    from blobstate.local.object_cache import ObjectCache

    if repo.settings.object_cache:
        repo.use_object_cache(ObjectCache.for_repository(host.host_key(repo), work_base or repo.settings.work_base))
    return repo


def sweep_object_cache(repo: Repository, view: RepositoryView) -> None:
    """Bound this host's object cache by what the whole repository holds (``view``, taken with ``objects``): the
    entries of indexes it no longer lists and of records its log no longer names go (deleted by another host, by a
    process without the cache, by hand); what this process deleted went with its deletes (``discard``)."""
    cache = repo.object_cache
    if cache is None or view.objects is None:
        return
    live = [info.blob_id for infos in view.objects.values() for info in infos if layout.is_index_id(info.blob_id)]
    live += [layout.record_id(cp.store_key, cp.generation) for history in view.histories.values() for cp in history]
    removed = cache.retain_only(live)
    if removed:
        _logger.info("object cache: %d entries of objects the repository no longer holds removed", removed)


def calls_summary(verb: str, repo: Repository, stores: int, started: float) -> None:
    """Log (``-v``) what ``verb`` asked of the store, if it was counted: ``list: 3 store calls (list 2,
    get_bounded 1) for 1 store(s) in 0.12 s``, and what the object cache answered (``cache 40 hits, 0 misses``)."""
    counts = repo.calls
    if counts is None:
        return
    detail = ", ".join(f"{name} {n}" for name, n in counts.most_common())
    cache = repo.object_cache
    cached = f"; cache {cache.hits} hits, {cache.misses} misses" if cache is not None else ""
    _logger.info("%s: %d store calls (%s) for %d store(s) in %.2f s%s", verb, sum(counts.values()),
                 detail or "none", stores, time.perf_counter() - started, cached)
