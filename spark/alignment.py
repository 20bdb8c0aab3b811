"""Alignment of a store's snapshots with a Spark query's own checkpoint location.

Spark's checkpoint location holds ``offsets/<batchId>`` (written when a micro-batch is planned) and
``commits/<batchId>`` (written when it completed); the file names are batch ids, ``.<batchId>.crc`` are Hadoop
checksum side files. On restart Spark resumes after the newest commit, and re-runs a batch that has offsets but no
commit. The state must match: restore the newest snapshot whose batch id is ``<=`` the last committed batch ``C``.

Snapshots are uploaded asynchronously, after Spark committed their batch, one in flight per store (the next local
checkpoint waits for the previous upload). So a crash leaves the newest snapshot at ``C`` or ``C - 1``:

- snapshot ``C``: restore it; Spark continues with ``C + 1``.
- snapshot ``C - 1`` (the crash came between batch ``C``'s local checkpoint and its upload): restore it and *rewind*
  Spark's commit of ``C`` (delete ``commits/C``, and ``offsets/C+1`` when Spark planned the next batch already),
  which puts Spark exactly where a crash just before that commit would have left it: it re-runs batch ``C`` from
  ``offsets/C``, the same input, on the restored state.
- anything older: the state of some committed batches is gone; ``SparkAlignmentError`` (nothing is changed).
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Any

import fsspec

from blobstate.errors import NothingToRestore, StorageError
from blobstate.model import Checkpoint, StoreKey
from blobstate.repository import Repository

log = logging.getLogger(__name__)


class SparkAlignmentError(NothingToRestore):
    """No retained snapshot matches the batches Spark committed (exit code 5, like ``NothingToRestore``)."""


def _fs(location: str, storage_options: dict[str, Any] | None) -> tuple[fsspec.AbstractFileSystem, str]:
    fs, path = fsspec.core.url_to_fs(location, **(storage_options or {}))
    return fs, path.rstrip("/")


def _batch_ids(location: str, sub: str, storage_options: dict[str, Any] | None) -> list[int]:
    fs, root = _fs(location, storage_options)
    folder = posixpath.join(root, sub)
    try:
        names = [posixpath.basename(p.rstrip("/")) for p in fs.ls(folder, detail=False)]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"cannot list Spark's {sub}/ in {location}: {exc}") from exc
    return sorted(int(n) for n in names if n.isdigit())


def committed_batches(checkpoint_location: str, storage_options: dict[str, Any] | None = None) -> list[int]:
    """Batch ids Spark committed (``commits/``), ascending; ``[]`` for a new checkpoint location.

    ``checkpoint_location``: a local path or any fsspec URL. Raises ``StorageError`` when it cannot be listed.
    """
    return _batch_ids(checkpoint_location, "commits", storage_options)


def planned_batches(checkpoint_location: str, storage_options: dict[str, Any] | None = None) -> list[int]:
    """Batch ids Spark planned (``offsets/``), ascending."""
    return _batch_ids(checkpoint_location, "offsets", storage_options)


def last_committed_batch(checkpoint_location: str, storage_options: dict[str, Any] | None = None) -> int | None:
    """The newest batch id in ``commits/``, or ``None`` when Spark committed nothing yet."""
    batches = committed_batches(checkpoint_location, storage_options)
    return batches[-1] if batches else None


def _remove(location: str, sub: str, batch_id: int, storage_options: dict[str, Any] | None) -> None:
    fs, root = _fs(location, storage_options)
    for name in (f".{batch_id}.crc", str(batch_id)):  # the side file first: never a crc without its file
        path = posixpath.join(root, sub, name)
        if fs.exists(path):
            fs.rm(path)


def rewind_commit(checkpoint_location: str, batch_id: int, storage_options: dict[str, Any] | None = None) -> None:
    """Make Spark re-run ``batch_id``, its newest committed batch, from its offsets.

    Spark plans batch ``C + 1`` (writes ``offsets/C+1``) right after committing ``C``; it re-runs only the newest
    planned batch. So the uncommitted ``offsets/C+1`` is deleted first, then ``commits/C``. Each step leaves the
    checkpoint location in a state a crash of Spark itself could have left (offsets of ``C + 1`` not yet written;
    then ``C`` planned but not committed), which Spark's recovery handles; a crash between the two steps is
    finished by rewinding again.

    Raises ``SparkAlignmentError`` when ``batch_id`` is not the newest commit, ``offsets/<batch_id>`` is missing,
    or more than one batch is planned beyond it.
    """
    committed = committed_batches(checkpoint_location, storage_options)
    if not committed or committed[-1] != batch_id:
        raise SparkAlignmentError(f"refusing to rewind batch {batch_id}: the newest commit in "
                                  f"{checkpoint_location} is {committed[-1] if committed else None}")
    planned = planned_batches(checkpoint_location, storage_options)
    if batch_id not in planned:
        raise SparkAlignmentError(f"cannot rewind batch {batch_id}: {checkpoint_location}/offsets/{batch_id} is "
                                  "missing, Spark could not re-run it")
    beyond = [b for b in planned if b > batch_id]
    if beyond and beyond != [batch_id + 1]:
        raise SparkAlignmentError(f"cannot rewind batch {batch_id}: offsets of batches {beyond} exist beyond it")
    if beyond:
        _remove(checkpoint_location, "offsets", batch_id + 1, storage_options)
    _remove(checkpoint_location, "commits", batch_id, storage_options)
    log.info("rewound Spark's commit of batch %d in %s: Spark re-runs it on the restored state", batch_id,
             checkpoint_location)


@dataclass(frozen=True)
class AlignmentPlan:
    """What a restart does: restore ``checkpoint`` (``None``: start from an empty store), and when ``rewind`` is
    set, delete Spark's commit of that batch so Spark re-runs it. ``last_committed``: Spark's newest commit."""

    key: StoreKey
    last_committed: int | None
    checkpoint: Checkpoint | None
    rewind: int | None

    @property
    def restored_batch(self) -> int | None:
        return self.checkpoint.batch_id if self.checkpoint is not None else None

    def describe(self) -> str:
        what = (f"snapshot {self.checkpoint.checkpoint_id} (batch {self.checkpoint.batch_id})"
                if self.checkpoint is not None else "an empty store")
        extra = f", rewinding Spark's commit of batch {self.rewind}" if self.rewind is not None else ""
        return f"Spark committed batch {self.last_committed}: restoring {what}{extra}"


def plan_alignment(repo: Repository, key: StoreKey, checkpoint_location: str, *, allow_rewind: bool = True,
                   storage_options: dict[str, Any] | None = None) -> AlignmentPlan:
    """Decide which snapshot matches Spark's commits (reads ``commits/``, ``offsets/`` and the checkpoint log).

    Raises ``SparkAlignmentError`` when Spark committed batches whose state no retained snapshot holds and a
    rewind of the newest commit cannot fix it.
    """
    last = last_committed_batch(checkpoint_location, storage_options)
    history = repo.log.history(key)
    if last is None:
        if any(cp.batch_id is not None for cp in history):
            log.warning("%s has snapshots of Spark batches, but Spark committed nothing in %s: starting %s empty",
                        repo.url, checkpoint_location, key)
        return AlignmentPlan(key, None, None, None)
    chosen = next((cp for cp in reversed(history) if cp.batch_id is not None and cp.batch_id <= last), None)
    if chosen is not None and chosen.batch_id == last:
        return AlignmentPlan(key, last, chosen, None)
    if (chosen is None and last == 0) or (chosen is not None and chosen.batch_id == last - 1):
        if allow_rewind and last in planned_batches(checkpoint_location, storage_options):
            return AlignmentPlan(key, last, chosen, last)
    retained = [cp.batch_id for cp in history]
    raise SparkAlignmentError(
        f"Spark committed batch {last} in {checkpoint_location}, but the newest snapshot of {key} with a batch id "
        f"<= {last} is {'batch ' + str(chosen.batch_id) if chosen else 'none'} (retained batch ids: {retained}); "
        f"restoring it would lose the state of committed batches. "
        + ("Rewinding is disabled." if not allow_rewind else
           "Spark can re-run only its newest batch, so this cannot be aligned: restore an older Spark checkpoint "
           "location or start the query afresh.")
    )
