"""The Open door: how every writer opens a store, so that it never commits on records it did not plan from.

In this order, for the driver binding, the partitioned driver, ``write_state``, a rescale's destination and (for its
target) ``copy``:

1. the committer: this host's lock of the store and its journal recovered (``StoreCommitter``; recovery may append
   a commit whose outcome was unknown, so it goes before the view);
2. the view: the store's records read once (``blobstate.repository.view.read_view``) and the committer's generation
   pinned from exactly that read (``CommitPoint.pin``): whatever another writer appends after it fences this
   writer's first append (rules 1 and 16);
3. the plan, from that view and nothing else (``plan(history)``: the alignment with Spark's checkpoint location, a
   destination that must be empty, the records a copy lacks).

A writer that planned first and pinned last could pin a generation another writer reached in between (a second
query adopting the same initial state while the first committed its batches) and stack its commit on records its
plan never saw (issue 39 case 5). Before each later commit a writer whose plan depends on the whole log checks that
the log still ends at its view (``check_current``), and is refused (``FencedError``) otherwise; every append is
fenced the same way at the commit point. A failure anywhere closes the committer (its lock released).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from blobstate.commit.backup import StoreCommitter
from blobstate.errors import FencedError
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository
from blobstate.repository.view import StoreView, read_view

T = TypeVar("T")


@dataclass
class OpenStore(Generic[T]):
    """A store opened for writing: ``committer`` pinned at ``view`` (the records read once after its journal was
    recovered), and ``plan``, what the caller's plan made of that view."""

    committer: StoreCommitter
    view: StoreView
    plan: T

    @property
    def history(self) -> list[Checkpoint]:
        return list(self.view.history)


def pin_view(committer: StoreCommitter) -> StoreView:
    """Step 2 of the module docstring on an open ``committer`` (its journal recovered): the store's records read
    once and its generation pinned from them; the read ``StoreCommitter`` made when it opened, when its view is
    still pinned from it (``CommitPoint.pinned``). Returns the view."""
    pinned = committer.commit_point.pinned
    if pinned is not None:
        return StoreView(committer.key, pinned)
    view = read_view(committer.repo, committer.key)
    committer.commit_point.pin(list(view.history))
    return view


def open_store(key: StoreKey, repo: Repository, plan: Callable[[list[Checkpoint]], T], *,
               committer: Callable[[], StoreCommitter] | None = None, **options: Any) -> OpenStore[T]:
    """Open ``key`` in ``repo`` for writing (steps 1-3 of the module docstring): ``committer()`` (default
    ``StoreCommitter(key, repo, **options)``), its view pinned, then ``plan(history)``. Raises what the committer,
    the read and ``plan`` raise (``SparkAlignmentError``, ``DestinationNotEmpty``, ...), with the committer closed.

    Example (``blobstate copy`` opening its target)::

        opened = open_store(key, target, lambda held: to_copy(source_history, held, upto),
                            committer=lambda: StoreCommitter(key, target, work_dir=work_dir, ...))
        records, present, skipped = opened.plan
    """
    made = committer() if committer is not None else StoreCommitter(key, repo, **options)
    try:
        view = pin_view(made)
        return OpenStore(made, view, plan(list(view.history)))
    except BaseException:
        made.close()
        raise


def check_current(committer: StoreCommitter, newest: Checkpoint | None) -> None:
    """``FencedError`` unless ``newest`` (the log's newest record as just read) is at the generation ``committer``
    expects: another writer appended since this one's view, whose plan would no longer hold."""
    base = committer.commit_point.generation()
    latest = newest.generation if newest is not None else 0
    if latest != base:
        raise FencedError(f"fenced: {committer.key} is at generation {latest}, this writer expected {base}: another "
                          "writer commits this store", expected=base, actual=latest)


__all__ = ["OpenStore", "check_current", "open_store", "pin_view"]
