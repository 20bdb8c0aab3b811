"""The snapshot index as a msgspec schema (issue 28, "schemas, not hand parsers"): the limits declared on the
schema are enforced (a list, a dict, a string or an integer beyond them is a ``CorruptIndexError``), a version-1
index as blobstate wrote it still parses, names that are not UTF-8 survive, and any index round-trips."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import CorruptIndexError
from blobstate.model.index import MAX_ENTRIES, DirIndex, FileBlob, FileIndex, SnapshotIndex, SymlinkIndex

# A version-1 index exactly as blobstate wrote it before schema version 2 (core/index.py at 3c508b4, to_bytes()).
VERSION_1 = (
    b'{"schemaVersion":1,"checkpointId":"1700000000000-0000beef","createdTimeMs":1700000000000,"jobName":"job",'
    b'"jobInstance":"worker-1","taskName":"0","storeName":"store","dirIndex":{"dirName":"","filesPresent":['
    b'{"fileName":"000012.sst","blobs":[{"blobId":"job/0/store/blobs/00000000000000000000000000000001","offset":0},'
    b'{"blobId":"job/0/store/blobs/00000000000000000000000000000002","offset":64}],"mtime":1700000000000,'
    b'"ctime":1700000000001,"sizeInBytes":100,"crc32c":4026531840,"attribs":{}},{"fileName":"CURRENT","blobs":['
    b'{"blobId":"job/0/store/blobs/00000000000000000000000000000003","offset":0}],"mtime":1700000000002,'
    b'"ctime":1700000000003,"sizeInBytes":16,"crc32c":7,"attribs":{}}],"filesRemoved":[{"fileName":"000009.sst",'
    b'"blobs":[{"blobId":"job/0/store/blobs/00000000000000000000000000000004","offset":0}],"mtime":0,"ctime":0,'
    b'"sizeInBytes":10,"crc32c":9,"attribs":{}}],"subDirectoriesPresent":[{"dirName":"archive","filesPresent":['
    b'{"fileName":"empty","blobs":[],"mtime":0,"ctime":0,"sizeInBytes":0,"crc32c":0,"attribs":{}}],'
    b'"filesRemoved":[],"subDirectoriesPresent":[],"subDirectoriesRemoved":[]}],"subDirectoriesRemoved":['
    b'{"dirName":"gone","filesPresent":[{"fileName":"x.log","blobs":[{"blobId":'
    b'"job/0/store/blobs/00000000000000000000000000000005","offset":0}],"mtime":0,"ctime":0,"sizeInBytes":5,'
    b'"crc32c":5,"attribs":{}}],"filesRemoved":[],"subDirectoriesPresent":[],"subDirectoriesRemoved":[]}]},'
    b'"prevSnapshotIndexBlobId":"job/0/store/indexes/abababababababababababababababab.json","batchId":41,'
    b'"storeType":"rocksdb"}'
)
BLOB = "job/0/store/blobs/" + "0" * 31 + "1"


def test_a_version_1_index_as_blobstate_wrote_it_still_parses():
    index = SnapshotIndex.from_bytes(VERSION_1)
    assert index.schema_version == 1 and index.batch_id == 41 and index.store_type == "rocksdb"
    assert sorted(index.files()) == ["000012.sst", "CURRENT", "archive/empty"]
    big = index.files()["000012.sst"]
    assert (big.size_in_bytes, big.crc32c, big.mtime, big.ctime, big.mode, big.content_hash) == (
        100, 4026531840, 1700000000000, 1700000000001, None, None)
    assert [length for _, length in big.chunk_ranges()] == [64, 36]
    assert {f.file_name for f in index.dir_index.walk_removed()} == {"000009.sst", "x.log"}
    assert index.prev_snapshot_index_blob_id == "job/0/store/indexes/" + "ab" * 16 + ".json"
    # written back as version 1 with the same document (key order may differ: schemaVersion stays first)
    again = index.to_bytes()
    assert json.loads(again) == json.loads(VERSION_1) and again.startswith(b'{"schemaVersion":1,')
    assert SnapshotIndex.from_bytes(again) == index


def _doc() -> dict:
    return json.loads(VERSION_1)


def _first_file(doc: dict) -> dict:
    return doc["dirIndex"]["filesPresent"][0]


@pytest.mark.parametrize("case, mutate", [
    ("a size of 2^63 bytes", lambda d: _first_file(d).update(sizeInBytes=1 << 63)),
    ("a negative offset", lambda d: _first_file(d)["blobs"][0].update(offset=-1)),
    ("a crc32c of 33 bits", lambda d: _first_file(d).update(crc32c=1 << 32)),
    ("an mtime below -2^63", lambda d: _first_file(d).update(mtime=-(1 << 63) - 1)),
    ("a created time of 2^64", lambda d: d.update(createdTimeMs=1 << 64)),
    ("a bool for an integer", lambda d: _first_file(d).update(sizeInBytes=True)),
    ("a job instance of 1001 characters", lambda d: d.update(jobInstance="w" * 1001)),
    ("a file name of 1001 characters", lambda d: _first_file(d).update(fileName="n" * 1001)),
    ("a link target of 4096 characters", lambda d: d["dirIndex"].update(
        symlinksPresent=[{"linkName": "l", "target": "t" * 4096}])),
    ("attribs of 1001 keys", lambda d: _first_file(d).update(attribs={str(i): i for i in range(1001)})),
    ("a blob id of another shape", lambda d: _first_file(d)["blobs"][0].update(blobId=BLOB + "0")),
    ("a checkpoint id ending in a newline", lambda d: d.update(checkpointId="1700000000000-0000beef\n")),
    ("schema version 4", lambda d: d.update(schemaVersion=4)),
])
def test_a_value_beyond_the_schemas_limits_is_a_corrupt_index_error(case, mutate):
    doc = _doc()
    mutate(doc)
    with pytest.raises(CorruptIndexError, match="corrupt snapshot index"):
        SnapshotIndex.from_bytes(json.dumps(doc).encode())
    with pytest.raises(CorruptIndexError, match="corrupt snapshot index"):
        SnapshotIndex.from_json(doc)


@pytest.mark.parametrize("where", ["blobs", "filesPresent", "filesRemoved", "subDirectoriesPresent",
                                   "symlinksPresent"])
def test_a_list_longer_than_max_entries_is_a_corrupt_index_error(where):
    doc = _doc()
    entry = {"blobs": _first_file(doc)["blobs"][0], "filesPresent": _first_file(doc),
             "filesRemoved": _first_file(doc), "subDirectoriesPresent": {"dirName": "d", "filesPresent": []},
             "symlinksPresent": {"linkName": "l", "target": "t"}}[where]
    too_many = [entry] * (MAX_ENTRIES + 1)  # one object, MAX_ENTRIES + 1 references: 32 MiB, not 1 GiB of JSON
    if where == "blobs":
        _first_file(doc)["blobs"] = too_many
    else:
        doc["dirIndex"][where] = too_many
    with pytest.raises(CorruptIndexError, match=f"length <= {MAX_ENTRIES}"):
        SnapshotIndex.from_json(doc)


def test_names_that_are_not_utf8_keep_their_escapes_and_parse():
    name = b"caf\xe9.sst".decode("utf-8", "surrogateescape")  # what os.fsdecode gives for a Latin-1 name
    doc = _doc()
    _first_file(doc)["fileName"] = name
    data = json.dumps(doc).encode()
    assert b"\\udce9" in data
    index = SnapshotIndex.from_bytes(data)
    assert name in index.files() and index.to_bytes() == SnapshotIndex.from_bytes(index.to_bytes()).to_bytes()
    assert b"\\udce9" in index.to_bytes()


def test_attribs_take_no_part_in_equality_or_hashing():
    a = FileIndex("a", (FileBlob(BLOB, 0),), 1, 2, attribs={"posix": {"uid": 0}})
    b = FileIndex("a", (FileBlob(BLOB, 0),), 1, 2)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != FileIndex("a", (FileBlob(BLOB, 0),), 1, 3)
    assert SnapshotIndex.from_bytes(_index_with(a).to_bytes()).files()["a"].attribs == {"posix": {"uid": 0}}


def _index_with(*files: FileIndex, links: tuple[SymlinkIndex, ...] = (), dirs: tuple[DirIndex, ...] = ()
                ) -> SnapshotIndex:
    return SnapshotIndex("1700000000000-0000beef", 5, "job", "w", "0", "store",
                         DirIndex("", files_present=files, sub_dirs_present=dirs, symlinks_present=links))


# -- round trip ------------------------------------------------------------------------------------------------
_names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"), min_size=1,
                 max_size=12).filter(lambda n: n not in (".", ".."))
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_hex32 = st.integers(0, (1 << 128) - 1).map(lambda n: f"{n:032x}")
_optional = {"mode": st.none() | st.integers(0, 0o7777), "mtime_ns": st.none() | _int64,
             "content_hash": st.none() | _hex32.map(lambda h: f"xxh3-128:{h}")}


@st.composite
def _files(draw, name: str) -> FileIndex:
    sizes = draw(st.lists(st.integers(1, 1 << 40), max_size=3))
    offsets = [sum(sizes[:i]) for i in range(len(sizes))]
    blobs = tuple(FileBlob("job/0/store/blobs/" + draw(_hex32), o)
                  for o in offsets)
    return FileIndex(name, blobs, sum(sizes), draw(st.integers(0, 0xFFFFFFFF)), draw(_int64), draw(_int64),
                     draw(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=2)),
                     **{k: draw(v) for k, v in _optional.items()})


@st.composite
def _dirs(draw, name: str, depth: int) -> DirIndex:
    names = draw(st.lists(_names, unique=True, max_size=4))
    kinds = [draw(st.sampled_from(["file", "link", "dir"] if depth < 2 else ["file", "link"])) for _ in names]
    return DirIndex(
        name,
        files_present=tuple(draw(_files(n)) for n, k in zip(names, kinds, strict=True) if k == "file"),
        files_removed=tuple(draw(st.lists(_names.flatmap(_files), max_size=2))),
        sub_dirs_present=tuple(draw(_dirs(n, depth + 1)) for n, k in zip(names, kinds, strict=True) if k == "dir"),
        symlinks_present=tuple(SymlinkIndex(n, draw(st.text(min_size=1, max_size=20).filter(lambda t: "\x00" not in t)),
                                            draw(st.none() | _int64))
                               for n, k in zip(names, kinds, strict=True) if k == "link"),
        mode=draw(_optional["mode"]), mtime_ns=draw(_optional["mtime_ns"]))


_indexes = st.builds(
    SnapshotIndex, st.integers(0, 1 << 60).map(lambda n: f"{n}-0000beef"), st.integers(0, (1 << 63) - 1),
    st.just("job"), st.text(max_size=10), st.just("0"), st.just("store"), _dirs("", 0),
    st.none() | _hex32.map(lambda h: f"job/0/store/indexes/{h}.json"),
    st.none() | st.integers(0, 1 << 40), st.none() | st.sampled_from(["rocksdb", "dir"]), st.none() | st.integers(0, 9),
    st.sampled_from([1, 2]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_indexes)
def test_every_index_round_trips_through_its_bytes(index):
    data = index.to_bytes()
    assert data.startswith(b'{"schemaVersion":') and data.isascii()
    again = SnapshotIndex.from_bytes(data)
    assert again == index and again.to_bytes() == data
    attribs = [f.attribs for _, f in index.dir_index.walk_present()]
    assert [f.attribs for _, f in again.dir_index.walk_present()] == attribs
    assert SnapshotIndex.from_json(json.loads(data)) == index
