"""``blobstate.repository.marker`` on a real ``file://`` blob store: the marker created exclusively (two first
writers agree on one), a damaged, oversized or newer marker refused, a repository never created over foreign
objects, one from before the marker accepted, the Rewrite door (``update_marker``) putting a missing marker back
from its kept copy, and ``bind_log``: one checkpoint log per repository."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from blobstate.errors import ConfigurationError, CorruptIndexError, LogMismatchError, RepositoryNotFound
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository import marker
from blobstate.repository.backends import open_blob_store
from blobstate.repository.log_identity import REPOSITORY_LOG

URL = "file:///unused-in-messages"
SQL = "sqlite:///var/log.db"


@pytest.fixture
def store(tmp_path):
    blob_store = open_blob_store(f"file://{tmp_path}/repo")
    yield blob_store
    blob_store.close()


def test_the_marker_is_created_once_and_a_second_writer_gets_the_first_ones(store):
    first = marker.write_marker(store, REPOSITORY_LOG)
    second = marker.write_marker(store, "some-other-log")
    assert first.created and not second.created
    assert second == first and second.checkpoint_log == REPOSITORY_LOG
    doc = json.loads(store.get_bytes(marker.MARKER_ID))
    assert doc["format"] == marker.FORMAT and doc["formatVersion"] == marker.PLAIN_FORMAT_VERSION
    assert len(doc["repositoryId"]) == 32 and "encryption" not in doc


def test_a_damaged_or_newer_marker_is_refused(store):
    with pytest.raises(CorruptIndexError, match="damaged"):
        marker.parse_marker(b'{"format": "something-else", "formatVersion": 1}')
    with pytest.raises(CorruptIndexError):
        marker.parse_marker(b"not json")
    newer = json.dumps({"format": marker.FORMAT, "formatVersion": marker.FORMAT_VERSION + 1,
                        "createdBy": "blobstate 99"}).encode()
    with pytest.raises(ConfigurationError, match="written by a newer blobstate \\(blobstate 99\\)"):
        marker.parse_marker(newer)
    store.put(PutRequest(marker.MARKER_ID, b" " * (marker.MAX_MARKER_BYTES + 1)))
    with pytest.raises(CorruptIndexError, match="larger than"):
        marker.read_marker(store)


def test_an_empty_location_becomes_a_repository_only_for_a_writer(store):
    with pytest.raises(RepositoryNotFound, match="no blobstate repository"):
        marker.ensure_repository(store, URL, create=False)
    assert marker.read_marker(store) is None
    info = marker.ensure_repository(store, URL, create=True, checkpoint_log=REPOSITORY_LOG)
    assert info.created and marker.ensure_repository(store, URL, create=False) == info


def test_a_repository_is_never_created_over_foreign_objects(store):
    store.put(PutRequest("photos/cat.jpg", b"meow"))
    with pytest.raises(RepositoryNotFound, match="not empty"):
        marker.ensure_repository(store, URL, create=True)
    assert marker.read_marker(store) is None


def test_a_repository_from_before_the_marker_is_accepted_and_marked_by_a_writer(store):
    store.put(PutRequest(layout.new_blob_id(StoreKey("job", "0", "s")), b"x"))
    legacy = marker.ensure_repository(store, URL, create=False)
    assert legacy.legacy and legacy.repository_id == "" and marker.read_marker(store) is None
    written = marker.ensure_repository(store, URL, create=True, checkpoint_log=REPOSITORY_LOG)
    assert not written.legacy and marker.read_marker(store) == written


def test_a_missing_marker_reads_as_its_kept_copy_and_the_door_puts_it_back(store, caplog):
    info = marker.write_marker(store, REPOSITORY_LOG)
    marker.keep_copy(store, info)
    store.delete(marker.MARKER_ID)
    with caplog.at_level(logging.WARNING, logger="blobstate.repository.marker"):
        assert marker.read_marker(store) == info
    assert any("copy an interrupted key rotation kept" in r.getMessage() for r in caplog.records)
    assert marker.update_marker(store, lambda current: None) == info  # nothing to change, but repaired
    assert marker.parse_marker(store.get_bytes(marker.MARKER_ID)) == info


def test_update_marker_asks_the_change_on_the_marker_as_it_is(store):
    marker.write_marker(store, REPOSITORY_LOG)
    seen = []

    def change(current: marker.RepositoryInfo) -> marker.RepositoryInfo | None:
        seen.append(current.checkpoint_log)
        return None if current.checkpoint_log == SQL else replace(current, checkpoint_log=SQL)

    assert marker.update_marker(store, change).checkpoint_log == SQL
    assert marker.update_marker(store, change).checkpoint_log == SQL
    assert seen == [REPOSITORY_LOG, SQL] and marker.read_marker(store).checkpoint_log == SQL
    assert list(store.list(layout.MARKER_COPIES)) == []  # the rewrite's own copy, if any, is gone
    store.delete(marker.MARKER_ID)
    with pytest.raises(RepositoryNotFound):
        marker.update_marker(store, change)


def test_a_repository_has_exactly_one_log(store):
    info = marker.write_marker(store, REPOSITORY_LOG)
    assert marker.bind_log(store, info, URL, REPOSITORY_LOG) == info
    with pytest.raises(LogMismatchError, match="--change-log"):
        marker.bind_log(store, info, URL, SQL)
    moved = marker.bind_log(store, info, URL, SQL, change=True)
    assert moved.checkpoint_log == SQL and marker.read_marker(store).checkpoint_log == SQL


def test_a_marker_without_a_log_records_one_only_for_a_writer_with_evidence(store):
    info = marker.write_marker(store, None)
    assert marker.bind_log(store, info, URL, SQL, read_only=True) == info
    with pytest.raises(LogMismatchError, match="holds no checkpoint record"):
        marker.bind_log(store, info, URL, SQL, holds_records=lambda: False)
    assert marker.read_marker(store).checkpoint_log is None
    assert marker.bind_log(store, info, URL, SQL, holds_records=lambda: True).checkpoint_log == SQL
    assert marker.read_marker(store).checkpoint_log == SQL
