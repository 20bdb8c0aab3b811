"""``blobstate.repository.location``: a location without a marker is told empty, a repository from before the
marker (blobstate's layout), or something else, from a listing of a real ``file://`` blob store; and whether any
store holds a snapshot index."""

from __future__ import annotations

import pytest

from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.backends import open_blob_store
from blobstate.repository.location import holds_indexes, scan_location

KEY = StoreKey("job", "0", "counts")


@pytest.fixture
def store(tmp_path):
    (tmp_path / "loc").mkdir()
    blob_store = open_blob_store(f"file://{tmp_path}/loc")
    yield blob_store
    blob_store.close()


def test_an_empty_location_is_empty(store):
    assert scan_location(store) == (True, False)
    assert holds_indexes(store) is False


def test_a_location_of_foreign_objects_is_neither_empty_nor_a_repository(store):
    store.put(PutRequest("notes/readme.txt", b"hello"))
    store.put(PutRequest("a/b/c/d/e/f", b"deeper than any store's object"))
    assert scan_location(store) == (False, False)
    assert holds_indexes(store) is False


@pytest.mark.parametrize("object_id", [layout.new_blob_id(KEY), layout.new_index_id(KEY)], ids=["blob", "index"])
def test_a_blob_or_an_index_of_some_store_is_a_repository_from_before_the_marker(store, object_id):
    store.put(PutRequest("notes/readme.txt", b"hello"))
    store.put(PutRequest(object_id, b"x"))
    assert scan_location(store) == (False, True)


def test_only_an_index_counts_as_a_snapshot_index(store):
    store.put(PutRequest(layout.new_blob_id(KEY), b"x"))
    assert holds_indexes(store) is False
    store.put(PutRequest(layout.new_index_id(KEY), b"{}"))
    assert holds_indexes(store) is True
