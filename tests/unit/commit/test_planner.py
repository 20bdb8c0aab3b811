"""``blobstate.commit.planner``: the scan of a local checkpoint (real files under ``tmp_path``), the diff against the
previous snapshot index (never by name alone), and the index tree it builds."""

from __future__ import annotations

import os
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.commit.planner import BackupPreview, Scan, ScannedDir, ScannedFile, build_dir_index, diff, scan_directory
from blobstate.errors import UnsafePathError
from blobstate.local.checksum import ChecksumCache, crc32c_bytes, digest_file
from blobstate.model.index import FileBlob, FileIndex, SnapshotIndex, SymlinkIndex
from blobstate.model.names import MAX_DEPTH
from blobstate.model.records import StoreKey

KEY = StoreKey("job", "0", "store")


def write(root, rel: str, data: bytes) -> str:
    path = os.path.join(root, *rel.split("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)
    return path


def scanned(rel: str, data: bytes, content_hash: str | None = None) -> ScannedFile:
    return ScannedFile(rel, f"/local/{rel}", len(data), crc32c_bytes(data), 1, 2, 0o644, 1_000_000, content_hash)


def index_of(files: dict[str, FileIndex]) -> SnapshotIndex:
    return SnapshotIndex("cp-prev", 1, KEY.job, "inst", KEY.task, KEY.store, build_dir_index(files, {}))


def test_scan_records_files_directories_and_links_never_following_a_link(tmp_path):
    root = tmp_path / "cp"
    write(root, "a.sst", b"aaaa")
    write(root, "sub/deep/b.log", b"bbbbbbbb")
    os.makedirs(root / "empty")
    os.symlink("/etc/passwd", root / "sub" / "link")
    os.chmod(root / "a.sst", 0o600)

    scan = scan_directory(str(root), ChecksumCache(), is_mutable=lambda rel: rel.endswith(".log"))

    by_rel = {f.relpath: f for f in scan}
    assert set(by_rel) == {"a.sst", "sub/deep/b.log"}  # the link is not a file, its target never read
    assert by_rel["a.sst"].size == 4 and by_rel["a.sst"].crc32c == crc32c_bytes(b"aaaa")
    assert by_rel["a.sst"].mode == 0o600
    assert by_rel["a.sst"].content_hash is None  # immutable: CRC32C only
    assert by_rel["sub/deep/b.log"].content_hash == digest_file(str(root / "sub/deep/b.log")).content_hash
    assert set(scan.dirs) == {"", "empty", "sub", "sub/deep"}
    assert scan.links == {"sub/link": SymlinkIndex("link", "/etc/passwd", os.lstat(root / "sub/link").st_mtime_ns)}
    assert len(scan) == 2


def test_scan_refuses_what_a_restore_could_not_give_back(tmp_path):
    root = tmp_path / "cp"
    root.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "s"))
        with pytest.raises(UnsafePathError, match="not a regular file"):
            scan_directory(str(root), ChecksumCache())
    finally:
        sock.close()


def test_scan_refuses_a_tree_deeper_than_a_restore_accepts(tmp_path):
    root = tmp_path / "cp"
    os.makedirs(os.path.join(str(root), *(["d"] * (MAX_DEPTH + 1))))  # the deepest a restore accepts
    assert len(scan_directory(str(root), ChecksumCache()).dirs) == MAX_DEPTH + 2
    os.makedirs(os.path.join(str(root), *(["d"] * (MAX_DEPTH + 2))))
    with pytest.raises(UnsafePathError, match="deeper"):
        scan_directory(str(root), ChecksumCache())


def test_scan_of_many_files_in_parallel_gives_each_its_own_digest(tmp_path):
    root = tmp_path / "cp"
    contents = {f"f{i:02d}": os.urandom(100 + i) for i in range(12)}
    for rel, data in contents.items():
        write(root, rel, data)
    scan = scan_directory(str(root), ChecksumCache(), workers=4)
    assert {f.relpath: (f.size, f.crc32c) for f in scan} == {
        rel: (len(data), crc32c_bytes(data)) for rel, data in contents.items()}


def test_diff_reuses_only_same_size_crc_and_content_hash_never_by_name():
    old_same = FileIndex("same", (FileBlob(f"{KEY.prefix}/blobs/{'1' * 32}", 0),), 3, crc32c_bytes(b"abc"), 0, 0)
    old_changed = FileIndex("changed", (FileBlob(f"{KEY.prefix}/blobs/{'2' * 32}", 0),), 3, crc32c_bytes(b"abc"),
                            0, 0)
    old_gone = FileIndex("gone", (FileBlob(f"{KEY.prefix}/blobs/{'3' * 32}", 0),), 1, 1, 0, 0)
    old_hashless = FileIndex("mutable", (FileBlob(f"{KEY.prefix}/blobs/{'4' * 32}", 0),), 3, crc32c_bytes(b"abc"),
                             0, 0)
    prev = index_of({"same": old_same, "changed": old_changed, "gone": old_gone, "mutable": old_hashless})
    files = [scanned("same", b"abc"), scanned("changed", b"abd"), scanned("new", b"x"),
             scanned("mutable", b"abc", content_hash="xxh3-128:" + "0" * 32)]

    plan = diff(files, prev, key=KEY, chunk_size=1 << 20, ttl_ms=5000)

    assert plan.files["same"].blobs == old_same.blobs  # reused
    assert (plan.files["same"].mtime, plan.files["same"].mode) == (1, 0o644)  # attributes refreshed
    assert sorted(plan.uploaded) == ["changed", "mutable", "new"]  # a hash on one side only is a difference
    assert set(plan.removed) == {"changed", "gone", "mutable"}  # replaced entries and the dropped file
    assert all(KEY.owns_blob(p.blob_id) and p.ttl_ms == 5000 for p in plan.puts)
    assert plan.files_uploaded == 3


@settings(deadline=None)
@given(size=st.integers(0, 5000), chunk=st.integers(1, 1500))
def test_diff_cuts_a_file_into_chunks_that_cover_it_exactly(size, chunk):
    plan = diff([ScannedFile("f", "/local/f", size, 0, 0, 0)], None, key=KEY, chunk_size=chunk, ttl_ms=1)
    f = plan.files["f"]
    assert len(f.blobs) == -(-size // chunk)
    assert [r.source.offset for r in plan.puts] == [b.offset for b in f.blobs] == list(range(0, size, chunk))
    assert sum(r.size for r in plan.puts) == size
    assert [length for _, length in f.chunk_ranges()] == [r.size for r in plan.puts]
    assert len({b.blob_id for b in f.blobs}) == len(f.blobs)  # fresh ids, never shared between chunks


def test_a_scan_carries_its_directories_and_links_into_the_index_tree():
    scan = Scan(files=[scanned("d/a", b"1")], dirs={"": ScannedDir(0o755, 5), "d": ScannedDir(0o700, 6),
                                                    "empty": ScannedDir(0o750, 7)},
                links={"d/l": SymlinkIndex("l", "a", 8)})
    tree = diff(scan, None, key=KEY, chunk_size=10, ttl_ms=1).dir_index()
    assert (tree.mode, tree.mtime_ns) == (0o755, 5)
    d, empty = tree.sub_dirs_present
    assert (d.dir_name, d.mode, [f.file_name for f in d.files_present], d.symlinks_present) == (
        "d", 0o700, ["a"], (SymlinkIndex("l", "a", 8),))
    assert (empty.dir_name, empty.mode, empty.files_present) == ("empty", 0o750, ())


def test_build_dir_index_puts_a_dropped_directory_among_the_removed_ones():
    def f(rel: str) -> FileIndex:
        return FileIndex(rel.rsplit("/", 1)[-1], (), 0, 0)

    tree = build_dir_index({"keep/a": f("keep/a")}, {"keep/b": f("keep/b"), "gone/sub/c": f("gone/sub/c")})
    assert [d.dir_name for d in tree.sub_dirs_present] == ["keep"]
    assert [d.dir_name for d in tree.sub_dirs_removed] == ["gone"]
    assert [f.file_name for f in tree.sub_dirs_present[0].files_removed] == ["b"]
    assert {g.file_name for g in tree.walk_removed()} == {"b", "c"}


names = st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=8).filter(
    lambda n: n not in (".", ".."))


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.lists(names, min_size=1, max_size=4).map("/".join), st.integers(0, 10**6), max_size=20))
def test_the_tree_of_any_flat_listing_walks_back_to_the_same_listing(listing):
    # a path that is also a directory of another path cannot exist on a disk: keep the listing a real tree
    paths = {p for p in listing if not any(q.startswith(p + "/") for q in listing)}
    files = {p: FileIndex(p.rsplit("/", 1)[-1], (FileBlob(f"{KEY.prefix}/blobs/{i:032x}", 0),) if listing[p] else (),
                          listing[p], 0) for i, p in enumerate(sorted(paths))}
    tree = build_dir_index(files, {})
    assert dict(tree.walk_present()) == files
    index = SnapshotIndex("cp", 1, KEY.job, "inst", KEY.task, KEY.store, tree)
    assert SnapshotIndex.from_bytes(index.to_bytes()).files() == files


def test_the_backup_preview_counts_what_the_plan_uploads():
    old = FileIndex("a", (FileBlob(f"{KEY.prefix}/blobs/{'1' * 32}", 0),), 3, crc32c_bytes(b"abc"), 0, 0)
    prev = index_of({"a": old, "b": FileIndex("b", (), 0, 0)})
    plan = diff([scanned("a", b"abc"), scanned("c", b"hello")], prev, key=KEY, chunk_size=2, ttl_ms=1)
    preview = BackupPreview.of(plan, prev)
    assert (preview.files_total, preview.upload, preview.unchanged, preview.removed) == (2, ("c",), 1, ("b",))
    assert (preview.bytes_total, preview.bytes_upload, preview.previous_checkpoint_id) == (8, 5, "cp-prev")
    assert preview.to_json()["filesToUpload"] == ["c"] and preview.to_json()["dryRun"] is True
