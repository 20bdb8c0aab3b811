"""``blobstate.maintenance.catalog`` (``list``, ``ls``, ``diff``, ``stats``) on a real ``file://`` repository under
``tmp_path``: what each view counts, and an unreadable index reported, never raised, where a listing goes on."""

from __future__ import annotations

import pytest
from snapshot_records import KEY, blob, commit_delta, commit_snapshot

from blobstate.errors import BlobNotFound
from blobstate.maintenance.catalog import diff_snapshots, list_files, store_stats, summarize, writer_host


def test_writer_host_is_the_first_part_of_a_writer_id():
    assert (writer_host("host-a:123:abc"), writer_host("plain"), writer_host("")) == ("host-a", "plain", "")


def test_a_summary_counts_files_and_bytes_and_carries_an_unreadable_index_as_an_error(repository):
    cp = commit_snapshot(repository, 1, {"a": "aaaa", "sub/b": "bb"})
    summary, index = summarize(repository, cp)
    assert (summary.files_total, summary.bytes_total, summary.store_type, summary.host) == (2, 6, "dir", "host1")
    assert index is not None and set(index.files()) == {"a", "sub/b"}
    doc = summary.to_json()
    assert (doc["store"], doc["filesTotal"], doc["createdTime"]) == (str(KEY), 2, "1970-01-01T00:00:00.001Z")
    repository.store.delete(cp.index_blob_id)
    broken, none = summarize(repository, cp)
    assert none is None and broken.files_total is None and broken.error.startswith("BlobNotFound")
    delta = commit_delta(repository, 2, 0)
    assert summarize(repository, delta)[0].bytes_total == delta.changelog_size


def test_ls_lists_the_files_under_a_prefix_sorted(repository):
    cp = commit_snapshot(repository, 1, {"z": "z", "sub/b": "bb", "sub/a": "a", "other/c": "c"})
    listing = list_files(repository, cp, "sub/")
    assert [path for path, _ in listing.files] == ["sub/a", "sub/b"]
    assert (listing.summary.files_total, listing.summary.bytes_total) == (2, 3)
    assert [f["path"] for f in listing.to_json()["files"]] == ["sub/a", "sub/b"]
    repository.store.delete(cp.index_blob_id)
    with pytest.raises(BlobNotFound):
        list_files(repository, cp)


def test_diff_tells_added_removed_changed_and_shared_blobs(repository):
    base = commit_snapshot(repository, 1, {"same": "same", "gone": "gone", "grows": "g"})
    target = commit_snapshot(repository, 2, {"same": "same", "new": "new", "grows": "gg"})
    d = diff_snapshots(repository, base, target)
    assert (d.added, d.removed, d.changed, d.unchanged) == ([("new", 3)], [("gone", 4)], [("grows", 1, 2)], 1)
    assert (d.blobs_shared, d.blobs_new) == (1, 2)
    assert d.to_json()["changed"] == [{"path": "grows", "sizeBefore": 1, "sizeAfter": 2}]


def test_stats_add_up_retained_snapshots_and_tell_deduplication(repository):
    commit_snapshot(repository, 1, {"a": "aaaa", "b": "bbbb"})
    commit_snapshot(repository, 2, {"a": "aaaa", "b": "BBBB"})
    stats = store_stats(repository, KEY)
    assert (stats.checkpoints, stats.logical_bytes, stats.referenced_blobs, stats.referenced_bytes) == (2, 16, 3, 12)
    assert stats.dedup_ratio == round(16 / 12, 3) and stats.latest.checkpoint.checkpoint_id == "cp2"
    assert stats.stored_blobs == 5 and stats.unreferenced_bytes == 0  # 3 blobs + 2 indexes
    assert stats.problems == []
    repository.store.delete(blob("BBBB"))
    assert store_stats(repository, KEY).problems == [
        "1 referenced blob(s) missing from the store (run blobstate verify)"]
    assert store_stats(repository, KEY).to_json()["dedupRatio"] == round(16 / 8, 3)
