"""``blobstate.model.index``: the snapshot index serialised and parsed back. Any tree the planner can build round
trips byte for byte (Hypothesis); a version-1 index still reads; every defect of a hostile document is a
``CorruptIndexError`` (exit 3), one case per rule of the module docstring."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import CorruptIndexError
from blobstate.model.index import INDEX_SCHEMA_VERSION, DirIndex, FileBlob, FileIndex, SnapshotIndex, SymlinkIndex
from blobstate.model.names import MAX_DEPTH, PATH_MAX
from blobstate.model.records import StoreKey

KEY = StoreKey("job", "0", "store")
BLOB = f"{KEY.prefix}/blobs/" + "a" * 32


def blob(i: int) -> str:
    return f"{KEY.prefix}/blobs/{i:032x}"


names = st.text(st.characters(codec="utf-8", exclude_characters="/\x00"), min_size=1, max_size=8).filter(
    lambda n: n not in (".", ".."))
nanos = st.integers(0, (1 << 63) - 1)
hashes = st.binary(min_size=16, max_size=16).map(lambda b: f"xxh3-128:{b.hex()}")


@st.composite
def files(draw, name: str) -> FileIndex:
    size = draw(st.integers(0, 10_000))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, size - 1)), max_size=4))) if size > 1 else []
    offsets = [0, *cuts] if size else []
    return FileIndex(name, tuple(FileBlob(blob(draw(st.integers(0, 1 << 64))), o) for o in offsets), size,
                     draw(st.integers(0, 0xFFFFFFFF)), draw(st.integers(0, 1 << 45)), draw(st.integers(0, 1 << 45)),
                     mode=draw(st.none() | st.integers(0, 0o7777)), mtime_ns=draw(st.none() | nanos),
                     content_hash=draw(st.none() | hashes))


@st.composite
def directories(draw, name: str = "", depth: int = 0) -> DirIndex:
    taken = draw(st.lists(names, max_size=5, unique=True))
    kinds = [draw(st.sampled_from(["file", "link", "dir"] if depth < 2 else ["file", "link"])) for _ in taken]
    of_kind = {kind: [n for n, k in zip(taken, kinds, strict=True) if k == kind] for kind in ("file", "link", "dir")}
    return DirIndex(
        name,
        files_present=tuple(draw(files(n)) for n in of_kind["file"]),
        files_removed=tuple(draw(files(n)) for n in draw(st.lists(names, max_size=2))),
        sub_dirs_present=tuple(draw(directories(n, depth + 1)) for n in of_kind["dir"]),
        symlinks_present=tuple(SymlinkIndex(n, draw(names), draw(st.none() | nanos)) for n in of_kind["link"]),
        mode=draw(st.none() | st.integers(0, 0o7777)), mtime_ns=draw(st.none() | nanos))


indexes = st.builds(
    lambda tree, batch, retain, created, store_type, prev: SnapshotIndex(
        "1700000000000-abcdef01", created, KEY.job, "inst", KEY.task, KEY.store, tree,
        f"{KEY.prefix}/indexes/{'b' * 32}.json" if prev else None, batch, store_type, retain),
    directories(), st.none() | st.integers(0, 1 << 40), st.none() | st.integers(1, 100), st.integers(0, 1 << 45),
    st.none() | st.sampled_from(["rocksdb", "dir"]), st.booleans())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(indexes)
def test_every_index_round_trips_byte_for_byte(index):
    data = index.to_bytes()
    again = SnapshotIndex.from_bytes(data)
    assert again == index
    assert again.to_bytes() == data
    assert again.files() == index.files()
    assert again.referenced_blob_ids() == {b.blob_id for f in index.files().values() for b in f.blobs}
    assert again.total_bytes() == sum(f.size_in_bytes for f in index.files().values())


def doc_of(**files_present) -> dict:
    tree = DirIndex("", files_present=tuple(FileIndex(n, (FileBlob(BLOB, 0),), s, 1) for n, s in files_present.items()))
    return json.loads(SnapshotIndex("cp1", 5, KEY.job, "inst", KEY.task, KEY.store, tree).to_bytes())


def test_a_version_1_index_reads_and_keeps_its_version():
    doc = doc_of(a=3)
    doc["schemaVersion"] = 1
    index = SnapshotIndex.from_bytes(json.dumps(doc).encode())
    assert index.schema_version == 1 and INDEX_SCHEMA_VERSION == 3
    assert index.files()["a"].mode is None and index.files()["a"].content_hash is None


def test_walks_of_a_tree_name_removed_files_and_whole_removed_directories():
    f = FileIndex("f", (FileBlob(blob(1), 0),), 1, 0)
    deeper = DirIndex("deeper", files_present=(FileIndex("h", (FileBlob(blob(3), 0),), 1, 0),))
    gone = DirIndex("gone", files_present=(FileIndex("g", (FileBlob(blob(2), 0),), 1, 0),), sub_dirs_present=(deeper,))
    tree = DirIndex("", files_present=(f,), files_removed=(FileIndex("old", (FileBlob(blob(4), 0),), 1, 0),),
                    sub_dirs_present=(DirIndex("d", symlinks_present=(SymlinkIndex("l", "../f"),)),),
                    sub_dirs_removed=(gone,))
    index = SnapshotIndex("cp", 1, KEY.job, "i", KEY.task, KEY.store, tree)
    assert list(index.entries()) == ["f", "d", "d/l"]  # parents before children
    assert index.removed_blob_ids() == {blob(2), blob(3), blob(4)}
    assert index.referenced_blob_ids() == {blob(1)}


def test_chunk_ranges_cover_the_file():
    f = FileIndex("f", (FileBlob(blob(1), 0), FileBlob(blob(2), 4), FileBlob(blob(3), 9)), 10, 0)
    assert [(b.blob_id, n) for b, n in f.chunk_ranges()] == [(blob(1), 4), (blob(2), 5), (blob(3), 1)]
    assert f.same_content(10, 0) and not f.same_content(10, 1) and not f.same_content(10, 0, "xxh3-128:" + "0" * 32)


def first_file(doc: dict) -> dict:
    return doc["dirIndex"]["filesPresent"][0]


def nest(depth: int) -> dict:
    doc = doc_of(a=3)
    node = doc["dirIndex"]
    for _ in range(depth):
        child = {"dirName": "d", "filesPresent": [], "filesRemoved": [], "subDirectoriesPresent": [],
                 "subDirectoriesRemoved": []}
        node["subDirectoriesPresent"] = [child]
        node = child
    return doc


HOSTILE = {
    "a blob of another store": lambda d: first_file(d)["blobs"][0].update(blobId=f"job/0/other/blobs/{'a' * 32}"),
    "a blob id that climbs out": lambda d: first_file(d)["blobs"][0].update(blobId=f"{BLOB}/../../x"),
    "a previous index of another store": lambda d: d.update(prevSnapshotIndexBlobId=f"j/0/x/indexes/{'a' * 32}.json"),
    "a name twice in one directory": lambda d: d["dirIndex"]["filesPresent"].append(copy.deepcopy(first_file(d))),
    "a file and a link of one name": lambda d: d["dirIndex"].update(symlinksPresent=[{"linkName": "a", "target": "x"}]),
    "a name with a slash": lambda d: first_file(d).update(fileName="x/y"),
    "a dot-dot name": lambda d: first_file(d).update(fileName=".."),
    "a name longer than NAME_MAX": lambda d: first_file(d).update(fileName="n" * 256),
    "a bool for a size": lambda d: first_file(d).update(sizeInBytes=True),
    "a float for a size": lambda d: first_file(d).update(sizeInBytes=3.0),
    "a CRC32C above 32 bits": lambda d: first_file(d).update(crc32c=1 << 32),
    "a mode beyond 0o7777": lambda d: first_file(d).update(mode=0o10000),
    "an unknown content hash": lambda d: first_file(d).update(contentHash="md5:" + "0" * 32),
    "a chunk past the end": lambda d: first_file(d)["blobs"].append({"blobId": BLOB, "offset": 4}),
    "chunks out of order": lambda d: first_file(d)["blobs"].insert(0, {"blobId": BLOB, "offset": 2}),
    "a non-empty file without blobs": lambda d: first_file(d).update(blobs=[]),
    "a link target with NUL": lambda d: d["dirIndex"].update(symlinksPresent=[{"linkName": "l", "target": "a\x00"}]),
    "an empty link target": lambda d: d["dirIndex"].update(symlinksPresent=[{"linkName": "l", "target": ""}]),
    "a checkpoint id with a slash": lambda d: d.update(checkpointId="../x"),
    "a store key part that climbs": lambda d: d.update(storeName=".."),
    "a newer schema": lambda d: d.update(schemaVersion=4),
    "a bool schema": lambda d: d.update(schemaVersion=True),
    "attribs that are not an object": lambda d: first_file(d).update(attribs=[1]),
    "a directory that is a list": lambda d: d["dirIndex"].update(subDirectoriesPresent=[[]]),
    "a missing field": lambda d: d.pop("jobInstance"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_each_defect_is_a_corrupt_index_error(case):
    doc = doc_of(a=3)
    SnapshotIndex.from_json(copy.deepcopy(doc))  # the document before the defect reads
    HOSTILE[case](doc)
    with pytest.raises(CorruptIndexError, match="corrupt snapshot index the-source"):
        SnapshotIndex.from_bytes(json.dumps(doc).encode(), source="the-source")


@pytest.mark.parametrize("text", [b'{"schemaVersion": NaN}', b'{"createdTimeMs": Infinity}', b"\xff\xfe",
                                  b"[" * 100_000, b"", b"null", b'"index"'])
def test_what_is_not_an_index_document_is_a_corrupt_index_error(text):
    with pytest.raises(CorruptIndexError):
        SnapshotIndex.from_bytes(text)


def test_nesting_is_bounded_by_max_depth():
    SnapshotIndex.from_json(nest(MAX_DEPTH))
    with pytest.raises(CorruptIndexError, match="deeper"):
        SnapshotIndex.from_json(nest(MAX_DEPTH + 1))


def test_a_path_is_bounded_by_path_max_bytes():
    doc = doc_of(a=3)
    doc["dirIndex"]["subDirectoriesPresent"] = [{"dirName": "d" * 255, "filesPresent": [
        {"fileName": "f" * 255, "blobs": [], "sizeInBytes": 0, "crc32c": 0}]}] * 1
    SnapshotIndex.from_json(copy.deepcopy(doc))
    node = doc["dirIndex"]
    for _ in range(PATH_MAX // 256 + 1):
        child = {"dirName": "d" * 255, "filesPresent": []}
        node["subDirectoriesPresent"] = [child]
        node = child
    with pytest.raises(CorruptIndexError, match=f"longer than {PATH_MAX} bytes"):
        SnapshotIndex.from_json(doc)
