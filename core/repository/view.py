"""A store's records read once: the view every reader plans from, and the read the Open door pins a writer's view
with (``blobstate.commit.opening``).

A reader (``blobstate restore``, ``read_state``/``read_changes``, ``blobstate state``, a rescale's source, the
partitioned client's check) reads a store's records exactly once and decides everything from that read
(``blobstate.model.align`` then picks the chain): never the log's latest from one read and the records from
another, between which a writer may append.
"""

from __future__ import annotations

from dataclasses import dataclass

from blobstate.model.records import Checkpoint, StoreKey
from blobstate.repository.repo import Repository


@dataclass(frozen=True)
class StoreView:
    """``key``'s records as one read returned them, oldest generation first."""

    key: StoreKey
    history: tuple[Checkpoint, ...]

    @property
    def generation(self) -> int:
        """The generation the view ends at (0: an empty store): the one a writer opened on it expects."""
        return self.history[-1].generation if self.history else 0

    @property
    def latest(self) -> Checkpoint | None:
        return self.history[-1] if self.history else None


def read_view(repo: Repository, key: StoreKey) -> StoreView:
    """``key``'s records in ``repo``, read once (``CheckpointLog.history``). Raises ``StorageError``,
    ``CorruptCheckpointError``."""
    return StoreView(key, tuple(repo.log.history(key)))


__all__ = ["StoreView", "read_view"]
