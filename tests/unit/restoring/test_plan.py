"""``blobstate.restoring.plan.plan_restore``: a destination on disk (real files under ``tmp_path``) compared with a
snapshot's entries, one test per branch: missing destination, kept entries, attributes, extra entries, content and
link changes, changes of kind at any depth, staging from a local checkpoint (host affinity) or by download, the
skipped staging names, and ``file_matches``."""

from __future__ import annotations

import os
import shutil

import pytest

from blobstate.commit.planner import diff, scan_directory
from blobstate.local.checksum import ChecksumCache
from blobstate.model.index import FileIndex, SnapshotIndex
from blobstate.model.records import StoreKey
from blobstate.restoring.plan import file_matches, plan_restore
from blobstate.restoring.swap import SwapStep

KEY = StoreKey("job", "0", "store")
TREE = {"a.sst": b"alpha", "MANIFEST": b"manifest-1", "sub/b.sst": b"bravo", "sub/deep/c.sst": b"charlie"}


def make_tree(root, files: dict[str, bytes], links: dict[str, str] | None = None, dirs: tuple[str, ...] = ()) -> str:
    os.makedirs(root, exist_ok=True)
    for rel, data in files.items():
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    for rel, target in (links or {}).items():
        os.symlink(target, os.path.join(root, *rel.split("/")))
    for rel in dirs:
        os.makedirs(os.path.join(root, *rel.split("/")), exist_ok=True)
    return str(root)


def entries_of(root: str, is_mutable=lambda rel: False) -> dict:
    """The entries of a snapshot of ``root``, made by the planner as a backup makes them."""
    plan = diff(scan_directory(root, ChecksumCache(), is_mutable=is_mutable), None, key=KEY, chunk_size=1 << 20,
                ttl_ms=1)
    return SnapshotIndex("cp", 1, KEY.job, "inst", KEY.task, KEY.store, plan.dir_index()).entries()


def plan(dest, entries, *, sources=(), skip=(), is_mutable=lambda rel: False):
    return plan_restore(str(dest), entries, cache=ChecksumCache(), is_mutable=is_mutable, sources=list(sources),
                        skip=set(skip))


@pytest.fixture
def snapshot(tmp_path):
    source = make_tree(tmp_path / "source", TREE, links={"sub/link": "b.sst"}, dirs=("empty",))
    return source, entries_of(source)


def test_a_missing_destination_stages_everything_at_the_top_level_steps(tmp_path, snapshot):
    _, entries = snapshot
    p = plan(tmp_path / "nowhere", entries)
    assert p.steps == [SwapStep(rel, False, True) for rel in ("MANIFEST", "a.sst", "empty", "sub")]
    assert sorted(p.download) == sorted(TREE)
    assert sorted(p.staged_dirs) == ["empty", "sub", "sub/deep"]
    assert p.staged_links == ["sub/link"]
    assert (p.keep, p.removed, p.reuse) == ([], [], {})


def test_an_identical_destination_keeps_everything_and_changes_nothing(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True, copy_function=shutil.copy2)
    p = plan(dest, entries)
    assert sorted(p.keep) == sorted([*TREE, "sub/link"])
    assert p.steps == [] and p.download == [] and p.changes() == []
    assert {"empty", "sub", "sub/deep"} <= set(p.attributes)  # every directory gets its attributes back


def test_a_kept_file_with_other_permissions_or_mtime_gets_its_attributes_set(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True, copy_function=shutil.copy2)
    os.chmod(dest / "a.sst", 0o600)
    os.utime(dest / "MANIFEST", ns=(1, 1))
    p = plan(dest, entries)
    assert {"a.sst", "MANIFEST"} <= set(p.keep)
    assert {"a.sst", "MANIFEST"} <= set(p.attributes)
    assert "sub/b.sst" not in p.attributes


def test_extra_entries_are_removed_with_everything_under_them(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    make_tree(dest, {"stray.log": b"x", "junk/one": b"1", "junk/two/three": b"3"}, links={"junk/dirlink": "two"})
    p = plan(dest, entries)
    assert SwapStep("stray.log", True, False) in p.steps and SwapStep("junk", True, False) in p.steps
    assert sorted(p.removed) == ["junk/dirlink", "junk/one", "junk/two/three", "stray.log"]
    assert ("remove", "junk") in p.changes() and ("remove", "stray.log") in p.changes()


def test_the_staging_names_at_the_top_level_are_not_content(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    make_tree(dest, {".blobstate-staging/x": b"x"})
    assert plan(dest, entries, skip={".blobstate-staging"}).steps == []
    assert SwapStep(".blobstate-staging", True, False) in plan(dest, entries).steps


def test_a_changed_file_is_replaced_from_a_local_checkpoint_that_holds_it_else_downloaded(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    (dest / "a.sst").write_bytes(b"ALPHA")  # same size, other content
    (dest / "sub" / "b.sst").write_bytes(b"bravo, longer")
    stale = make_tree(tmp_path / "stale", {"a.sst": b"other"})  # a local checkpoint without the right content
    p = plan(dest, entries, sources=[stale, source])
    assert SwapStep("a.sst", True, True) in p.steps and SwapStep("sub/b.sst", True, True) in p.steps
    assert p.reuse == {"a.sst": os.path.join(source, "a.sst"), "sub/b.sst": os.path.join(source, "sub", "b.sst")}
    assert p.download == []
    assert ("reuse", "a.sst") in p.changes() and ("replace", "a.sst") in p.changes()
    assert plan(dest, entries, sources=[stale]).download == ["a.sst", "sub/b.sst"]


def test_a_link_with_another_target_is_replaced(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    os.unlink(dest / "sub" / "link")
    os.symlink("deep/c.sst", dest / "sub" / "link")
    p = plan(dest, entries)
    assert p.steps == [SwapStep("sub/link", True, True)] and p.staged_links == ["sub/link"]
    assert p.removed == []  # a replaced entry is not counted as removed


def test_a_file_where_the_snapshot_has_a_directory_goes_out_whole_at_any_depth(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    shutil.rmtree(dest / "sub" / "deep")
    (dest / "sub" / "deep").write_bytes(b"a file now")
    p = plan(dest, entries)
    assert p.steps == [SwapStep("sub/deep", True, True)]
    assert p.removed == ["sub/deep"]
    assert p.staged_dirs == ["sub/deep"] and p.download == ["sub/deep/c.sst"]


def test_a_directory_where_the_snapshot_has_a_file_is_removed_with_its_content(tmp_path, snapshot):
    source, entries = snapshot
    dest = tmp_path / "dest"
    shutil.copytree(source, dest, symlinks=True)
    os.unlink(dest / "a.sst")
    make_tree(dest, {"a.sst/inner": b"i"})
    p = plan(dest, entries, sources=[source])
    assert p.steps == [SwapStep("a.sst", True, True)]
    assert p.removed == ["a.sst/inner"]
    assert p.reuse == {"a.sst": os.path.join(source, "a.sst")}


def test_a_file_that_changes_in_place_is_read_even_when_size_and_crc_match(tmp_path):
    source = make_tree(tmp_path / "source", {"LOG": b"same bytes"})
    entries = entries_of(source, is_mutable=lambda rel: rel == "LOG")
    assert entries["LOG"].content_hash is not None
    dest = make_tree(tmp_path / "dest", {"LOG": b"same bytes"})
    assert plan(dest, entries, is_mutable=lambda rel: rel == "LOG").keep == ["LOG"]


def test_file_matches_needs_a_regular_file_of_the_recorded_size_crc_and_hash(tmp_path):
    source = make_tree(tmp_path / "source", {"f": b"content", "g": b"content"})
    f = entries_of(source)["f"]
    assert isinstance(f, FileIndex)
    cache = ChecksumCache()
    assert file_matches(os.path.join(source, "f"), f, cache, mutable=False)
    assert file_matches(os.path.join(source, "g"), f, cache, mutable=True)
    assert not file_matches(str(tmp_path / "missing"), f, cache, mutable=False)  # OSError is "no"
    os.symlink(os.path.join(source, "f"), tmp_path / "link")
    assert not file_matches(str(tmp_path / "link"), f, cache, mutable=False)  # a link is never followed
    (tmp_path / "short").write_bytes(b"conten")
    assert not file_matches(str(tmp_path / "short"), f, cache, mutable=False)
    (tmp_path / "other").write_bytes(b"CONTENT")
    assert not file_matches(str(tmp_path / "other"), f, cache, mutable=False)
    hashed = FileIndex(f.file_name, f.blobs, f.size_in_bytes, f.crc32c, content_hash="xxh3-128:" + "0" * 32)
    assert not file_matches(os.path.join(source, "f"), hashed, cache, mutable=False)  # the hash is checked too
