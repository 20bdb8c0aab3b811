"""``blobstate.model.references``: what records reference (indexes, the blobs they name, delta changelogs, a group's
parts), and an index that cannot be read (raised, or counted as itself when the caller says what to do)."""

from __future__ import annotations

import pytest

from blobstate.errors import BlobNotFound
from blobstate.model import layout, references
from blobstate.model.index import DirIndex, FileBlob, FileIndex, SnapshotIndex
from blobstate.model.records import DELTA, GROUP, Checkpoint, PartitionEntry, StoreKey

KEY = StoreKey("job", "0", "store")


def _records():
    def index(cp: Checkpoint, *blobs: str) -> SnapshotIndex:
        files = tuple(FileIndex(f"f{i}", (FileBlob(b, 0),), 1, 0) for i, b in enumerate(blobs))
        return SnapshotIndex(cp.checkpoint_id, 0, KEY.job, "", KEY.task, KEY.store, DirIndex("", files))

    ids = {n: layout.blob_id(KEY, f"{n:032x}") for n in range(10)}
    snap = Checkpoint(KEY, "c1", 1, layout.index_id(KEY, "1" * 32), 0, 1, 0)
    delta = Checkpoint(KEY, "c2", 2, "", 0, 0, 0, 2, kind=DELTA, changelog_blob_id=ids[2])
    group = Checkpoint(KEY, "c3", 3, "", 0, 0, 0, 3, kind=GROUP, num_partitions=2, partitions=(
        PartitionEntry(0, "delta", "p0", 3, ids[3], 0, 1),
        PartitionEntry(1, "snapshot", "p1", 2, layout.index_id(KEY, "4" * 32), 0, 1)))
    parts = {r.checkpoint_id: r for r in group.expand()}
    indexes = {"c1": index(snap, ids[0], ids[1]), "p1": index(parts["p1"], ids[1], ids[5])}
    return snap, delta, group, indexes, ids


def test_references_are_indexes_their_blobs_changelogs_and_a_groups_parts():
    snap, delta, group, indexes, ids = _records()
    read = lambda cp: indexes[cp.checkpoint_id]  # noqa: E731
    assert references.references([snap, delta, group], read) == {
        snap.index_blob_id, ids[0], ids[1], ids[2], ids[3], layout.index_id(KEY, "4" * 32), ids[5]}
    assert [r.own for r in references.walk_references([group], read)] == [ids[3], layout.index_id(KEY, "4" * 32)]


def test_an_unreadable_index_raises_unless_told_what_to_do_and_then_counts_only_itself():
    snap, delta, group, indexes, ids = _records()

    def read(cp):
        raise BlobNotFound(cp.index_blob_id)

    with pytest.raises(BlobNotFound):
        references.references([snap], read)
    unreadable = []
    assert references.references([snap, delta], read, on_unreadable=lambda cp, exc: unreadable.append(cp)) == {
        snap.index_blob_id, ids[2]}
    assert unreadable == [snap]
