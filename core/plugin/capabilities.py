"""The optional capabilities of a blob store or a checkpoint log: methods a plugin may offer beyond its interface
(``blobstate.plugin.interfaces``), each found by name through any wrapper that forwards it, with what the core does
with it. A plugin that does not offer one loses nothing but speed (or, for ``expired_delete``, a narrower window
in Safety rule 13)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blobstate.model.records import Checkpoint, StoreKey
    from blobstate.plugin.interfaces import BlobInfo


def listing_with_ttl(store: object) -> Callable[[str, int], tuple[list[BlobInfo], set[str], set[str]] | None] | None:
    """The optional capability ``list_with_ttl(prefix, now_ms) -> (objects, with_ttl, expired) | None`` of ``store``
    (through any wrapper that forwards attributes), or None when its class does not offer it: one listing of
    ``prefix`` answering what ``list(prefix)``, ``expired(prefix, far future)`` and ``expired(prefix, now_ms)``
    answer, where the TTL marks are objects beside the blobs (lease mode); the call returns None in a mode where they
    are not. A repository-wide gc lists the repository once with it instead of twice
    (``blobstate.maintenance.repository_view.RepositoryView``)."""
    fn = getattr(store, "list_with_ttl", None)
    return fn if callable(fn) else None


def recorded_expiry(store: object) -> Callable[[Sequence[str]], dict[str, int | None] | None] | None:
    """The optional capability ``recorded_expiry(blob_ids) -> {blob id: expiry ms or None} | None`` of ``store``
    (through any wrapper that forwards attributes), or None when its class does not offer it.

    A store offers it when, in its present mode, a data blob's TTL is the expiry its writer recorded on the object
    itself when it wrote it (S3 native mode: user metadata set in the PUT, no tag), never removed: until that
    expiry the blob is protected like one that carries a TTL mark, after it only a record that references it
    protects it (``records_data_ttl``). Such a blob carries no mark, so gc sees it as an orphan when no retained
    record references it, and deletes it only once its recorded expiry has passed (``blobstate.maintenance.gc``,
    Safety rule 2). Each id maps to its expiry in ms since the epoch, or None (no expiry recorded, or no such
    blob); the call returns None in a mode where data blobs carry marks."""
    fn = getattr(store, "recorded_expiry", None)
    return fn if callable(fn) else None


def after_append_history(log: object) -> Callable[[StoreKey, float], list[Checkpoint] | None] | None:
    """The optional capability ``history_after_append(key, max_age_s) -> records | None`` of a checkpoint log
    (through a wrapper that implements it: ``SealedCheckpointLog``), or None when its class does not offer it.

    A log offers it when its append already reads the log after writing (the file log's listing after its
    exclusive create, Safety rule 1): the records as that read named them, when it is at most ``max_age_s`` old by
    the monotonic clock, once; None otherwise. A commit's retention acts on it instead of reading the log again
    (Safety rule 15: the log as it is after the append; one request less per commit)."""
    fn = getattr(log, "history_after_append", None)
    return fn if callable(fn) else None


def expired_delete(store: object) -> Callable[[Sequence[str], int], list[str] | None] | None:
    """The optional capability ``delete_if_expired(blob_ids, now_ms) -> refused ids | None`` of ``store`` (through
    any wrapper that forwards attributes, ``RetryingBlobStore``), or None when its class does not offer it.

    A store offers it when it can condition a delete, in the same request, on the TTL mark being still expired at
    ``now_ms`` (Azure's ``x-ms-if-tags`` on Delete Blob: the expiry tag ``<= now``): each blob is deleted only while
    its mark says expired; the ids the store refused (its mark was removed or moved since gc read it: 412) are
    returned, a missing blob counts as deleted. It returns None when it cannot condition in its present mode (lease
    mode: the mark is another object). gc deletes expired blobs through it (``blobstate.maintenance.gc``), which
    closes Safety rule 13's residual window for them: a committer removes its TTL marks before its heal check, so
    gc's delete either lands before the removal (the heal check puts the blob back) or is refused."""
    fn = getattr(store, "delete_if_expired", None)
    return fn if callable(fn) else None


def folder_removal(store: object) -> Callable[[str], None] | None:
    """The optional capability ``remove_empty_folder(prefix)`` of ``store`` (through any wrapper that forwards
    attributes), or None when its class does not offer it: a store whose objects live in real directories (file://)
    removes the folder ``prefix`` and its parents below the root while they are empty, so that objects written and
    removed again under a folder of their own (``blobstate doctor``'s scratch objects, a key rotation's copy of the
    marker) leave nothing behind. Stores without folders need nothing."""
    fn = getattr(store, "remove_empty_folder", None)
    return fn if callable(fn) else None
