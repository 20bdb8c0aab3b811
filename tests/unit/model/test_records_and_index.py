"""Snapshot index and checkpoint record: JSON shape, round trips, validation; path safety."""

from __future__ import annotations

import hashlib
import json

import pytest

from blobstate.commit.planner import build_dir_index
from blobstate.errors import ConfigurationError, CorruptIndexError, UnsafePathError
from blobstate.local.paths import safe_join
from blobstate.model.index import FileBlob, FileIndex, SnapshotIndex
from blobstate.model.records import Checkpoint, StoreKey


def _blob(name: str, i: int) -> str:
    return f"job/0/store/blobs/{hashlib.md5(f'{name}/{i}'.encode()).hexdigest()}"


def _file(name: str, size: int = 10, blobs: int = 1) -> FileIndex:
    step = max(1, size // blobs)
    return FileIndex(name, tuple(FileBlob(_blob(name, i), i * step) for i in range(blobs)), size, 123, 1, 2)


def test_index_json_is_camel_case_with_schema_version_first_and_round_trips():
    present = {"a.sst": _file("a.sst"), "sub/x": _file("x", 100, 3), "sub/deep/y": _file("y")}
    removed = {"old.sst": _file("old.sst"), "gone/z": _file("z")}
    index = SnapshotIndex("cp1", 5, "job", "inst", "0", "store", build_dir_index(present, removed),
                          "job/0/store/indexes/" + "0" * 32 + ".json", 7)
    doc = json.loads(index.to_bytes())
    assert list(doc)[0] == "schemaVersion"
    assert set(doc["dirIndex"]) == {"dirName", "filesPresent", "filesRemoved", "subDirectoriesPresent",
                                    "subDirectoriesRemoved"}
    assert set(doc["dirIndex"]["filesPresent"][0]) == {"fileName", "blobs", "mtime", "ctime", "sizeInBytes",
                                                       "crc32c", "attribs"}
    again = SnapshotIndex.from_bytes(index.to_bytes())
    assert again == index
    assert set(again.files()) == set(present)
    assert {f.file_name for f in again.dir_index.walk_removed()} == {"old.sst", "z"}
    assert again.removed_blob_ids() == {_blob("old.sst", 0), _blob("z", 0)}


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("checkpointId"),
    lambda d: d.update(schemaVersion=99),
    lambda d: d["dirIndex"]["filesPresent"][0].update(sizeInBytes=-1),
    lambda d: d["dirIndex"]["filesPresent"][0]["blobs"][0].update(offset=5),
    lambda d: d["dirIndex"]["filesPresent"][0].update(blobs=[]),
    lambda d: d.update(dirIndex="nope"),
])
def test_malformed_index_is_a_corrupt_index_error(mutate):
    index = SnapshotIndex("cp1", 5, "job", "inst", "0", "store", build_dir_index({"a": _file("a")}, {}))
    doc = json.loads(index.to_bytes())
    mutate(doc)
    with pytest.raises(CorruptIndexError):
        SnapshotIndex.from_bytes(json.dumps(doc).encode())
    with pytest.raises(CorruptIndexError):
        SnapshotIndex.from_bytes(b"{not json")


def test_checkpoint_record_round_trip_and_validation():
    index = "j/t/s/indexes/" + "ab" * 16 + ".json"
    cp = Checkpoint(StoreKey("j", "t", "s"), "cp", 3, index, 99, 10, 1000, 4, "w")
    assert Checkpoint.from_bytes(cp.to_bytes()) == cp
    doc = json.loads(cp.to_bytes())
    doc["generation"] = 0
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(json.dumps(doc).encode())
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(b"\x00garbage")


@pytest.mark.parametrize("field, value", [
    ("indexBlobId", "j/t/other/indexes/" + "ab" * 16 + ".json"),  # another store's index
    ("indexBlobId", "j/t/s/blobs/" + "ab" * 16),                   # a data blob, not an index
    ("indexBlobId", "j/t/s/indexes/../../other/x.json"),
    ("checkpointId", "cp\x1b[31mred"),                              # a terminal escape sequence
    ("indexSizeInBytes", 1 << 40),
    ("writerId", "w\n"),
])
def test_a_record_naming_anything_but_its_own_store_objects_is_corrupt(field, value):
    index = "j/t/s/indexes/" + "ab" * 16 + ".json"
    doc = json.loads(Checkpoint(StoreKey("j", "t", "s"), "cp", 3, index, 99, 10, 1000, 4, "w").to_bytes())
    doc[field] = value
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(json.dumps(doc).encode())


def test_a_record_too_large_or_too_deep_is_corrupt_not_a_crash():
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(CorruptIndexError):
        Checkpoint.from_bytes(b" " * (1 << 20))


@pytest.mark.parametrize("bad", ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\x00b", "x" * 256])
def test_safe_join_refuses_escapes(tmp_path, bad):
    with pytest.raises(UnsafePathError):
        safe_join(str(tmp_path), bad)


def test_safe_join_refuses_symlink_out_of_destination(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "link").symlink_to(outside)
    with pytest.raises(UnsafePathError):
        safe_join(str(dest), "link/file")
    assert safe_join(str(dest), "sub/file") == str(dest / "sub" / "file")


@pytest.mark.parametrize("part", ["", "..", "a/b", "x" * 300, "-lead"])
def test_store_key_parts_are_validated(part):
    with pytest.raises(ConfigurationError):
        StoreKey("job", part, "store")
