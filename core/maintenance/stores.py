"""Repository-wide verbs over many stores (``list``, ``stats``, ``verify``, ``gc`` of a whole repository): one
listing per kind of object for the whole repository instead of one per store, and the stores worked on
concurrently.

What a verb reads once for every store is a ``RepositoryView`` (``blobstate.maintenance.repository_view``). Per
store the verb then reads only what is its own: its indexes, its blobs (``verify``), its expired TTLs when it
has any (gc). ``for_each_store`` runs that per-store work on the store's bounded pool (``max_concurrency``),
in the order of the keys, the first error raised once the rest have settled.

gc keeps its order (Safety, rule 3): the view lists the objects and the TTLs *before* it reads the log, so a
commit that landed before the listing is seen as a reference; the re-checks before each delete
(``DeleteGuard``) read the store and the log afresh, never the view.

A verb reports what it asked of the store with ``-v``: ``calls_summary`` of the repository opened with
``count_calls`` (``blobstate.repository.repo.CallCounter``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from blobstate.maintenance.repository_view import (
    RepositoryView,
    calls_summary,
    for_each_store,
    matching,
    own_indexes,
    sweep_object_cache,
    with_object_cache,
)
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

if TYPE_CHECKING:
    from blobstate.maintenance.gc import GcReport
    from blobstate.maintenance.verify import DataSubset, VerifyReport
    from blobstate.model.retention import RetentionPolicy

_logger = logging.getLogger("blobstate.api")


def gc_repository(repo: Repository, *, keys: list[StoreKey] | None, job: str | None, task: str | None,
                  now_ms: int, ttl_ms: int, retain: int | RetentionPolicy | None, dry_run: bool,
                  work_base: str | None) -> list[GcReport]:
    """``blobstate gc``: the stores ``keys`` names (each listed on its own), or every store matching
    ``job``/``task`` from one ``RepositoryView`` (then the file log's temporaries too, for the whole
    repository); stores collected concurrently (``blobstate.maintenance.gc.collect``)."""
    from blobstate.maintenance.gc import collect, collect_temporaries

    started = time.perf_counter()
    with_object_cache(repo, work_base)  # the indexes of retained snapshots: read once per host, not per run

    def one(key: StoreKey, view: RepositoryView | None = None) -> GcReport:
        own = own_indexes(repo)
        with own.reading_indexes_once():
            return collect(own, key, now_ms=now_ms, ttl_ms=ttl_ms, retain=retain, dry_run=dry_run,
                           work_base=work_base, view=view)

    if keys is not None:
        reports = for_each_store(repo, one, keys)
    else:
        view = RepositoryView.take(repo, objects=True, ttl=True, match=matching(job, task), now_ms=now_ms)
        reports = for_each_store(repo, lambda k: one(k, view), view.keys)
        if job is None and task is None:
            temporaries = collect_temporaries(repo, now_ms=now_ms, ttl_ms=ttl_ms, dry_run=dry_run)
            sweep_object_cache(repo, view)
            if temporaries.temporaries_deleted:
                reports.append(temporaries)
    calls_summary("gc", repo, len(reports), started)
    return reports


def verify_repository(repo: Repository, *, keys: list[StoreKey] | None, job: str | None, task: str | None,
                      checkpoint: str | int | None, all_checkpoints: bool,
                      subset: DataSubset | None = None) -> list[VerifyReport]:
    """``blobstate verify``: the latest checkpoint (or ``checkpoint``, or with ``all_checkpoints`` every retained
    one) of the stores ``keys`` names, or of every store matching ``job``/``task``, stores verified concurrently;
    a partitioned store's latest state partition by partition; with ``subset``, only the data of the files it
    picks (``blobstate.maintenance.verify.DataSubset``). Raises ``NothingToRestore`` when a store ``keys`` names
    has no checkpoint, or there is nothing to verify."""
    from blobstate.config.options import redact
    from blobstate.entry import check_store
    from blobstate.errors import NothingToRestore
    from blobstate.maintenance.verify import add_chain_problems, verify_checkpoint, verify_partitions
    from blobstate.model.chain import overridden_parts

    started = time.perf_counter()
    for key in keys or ():
        check_store(repo, key)
    view = RepositoryView.take(repo, keys=keys, match=matching(job, task))

    def one(key: StoreKey) -> list[VerifyReport]:
        own, history, latest = own_indexes(repo), view.history(key), view.latest(key)
        if all_checkpoints:
            chosen = history
        elif latest is not None and latest.is_group and checkpoint in (None, "latest"):
            _logger.info("verifying the latest state of every partition of %s", key)
            return verify_partitions(own, history, subset)
        elif len(view.keys) == 1 or latest is not None:
            chosen = [own.choose(key, checkpoint=checkpoint, history=history)]
        else:
            return []
        # a group's snapshot part a later delta of its batch voids may be gone: nothing restores it
        voided = overridden_parts(history) if any(cp.is_group for cp in chosen) else set()
        with own.reading_indexes_once():
            for cp in chosen:
                _logger.info("verifying %s checkpoint %s", cp.store_key, cp.checkpoint_id)
            return [verify_checkpoint(own, cp, subset, overridden=voided) for cp in chosen]

    reports = [r for found in for_each_store(repo, one, view.keys) for r in found]
    if not reports:
        raise NothingToRestore(f"no checkpoint to verify in {redact(repo.url)}")
    add_chain_problems(repo, reports, history=view.history)  # each store's latest chain, not only its blobs
    calls_summary("verify", repo, len(view.keys), started)
    return reports
