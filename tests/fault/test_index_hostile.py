"""Issue 14, the index and restore halves: an index names only its own store's blobs (items 2 and 10), a blob longer
than the index declares is cut off at that length (item 7), malformed indexes are typed errors with exit code 3
(item 10), and a Hypothesis fuzz test of the index parser: only typed errors, bounded time and memory per input."""

from __future__ import annotations

import copy
import json
import time
import tracemalloc
from datetime import timedelta

import pytest
from fixtures_core import read_all, repo_files, write_keys
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from restore_helpers import latest_record, plain_index, rewrite_index, tmpfs, write_index_bytes

from blobstate.errors import CorruptIndexError
from blobstate.model.index import SnapshotIndex


def _two_stores(tmp_path, repo, cli):
    """Stores ``a`` (a dir store) and ``b`` (a RocksDB) in one repository; returns b's data."""
    a = tmp_path / "a"
    a.mkdir()
    (a / "one.txt").write_text("store a")
    (a / "two.txt").write_text("store a, second file")
    b = tmp_path / "b"
    data = write_keys(b, n=2_000)
    assert cli("backup", b, "--repo", repo).returncode == 0
    assert cli("backup", a, "--repo", repo).returncode == 0  # a's record is the latest one
    return data


def _b_blobs(repo):
    return {p for p in repo_files(repo, "blobs") if p.startswith("default/0/b/")}


@pytest.mark.parametrize("where", ["filesPresent", "filesRemoved"])
def test_an_index_naming_another_stores_blobs_is_refused_and_nothing_is_deleted_or_downloaded(tmp_path, repo, cli,
                                                                                               where):
    data_b = _two_stores(tmp_path, repo, cli)
    victim = sorted(_b_blobs(repo))
    before = {"blobs": repo_files(repo, "blobs"), "indexes": repo_files(repo, "indexes")}

    def point_at_b(doc):
        files = doc["dirIndex"]["filesPresent"]
        if where == "filesPresent":
            files[0]["blobs"][0]["blobId"] = victim[0]
        else:
            doc["dirIndex"]["filesRemoved"] = [dict(files[1], blobs=[{"blobId": b, "offset": 0}]) for b in victim]

    rewrite_index(repo, point_at_b, store="a")
    dest = tmp_path / "out" / "a"
    r = cli("restore", dest, "--repo", repo, work=tmp_path / "new-host")
    assert r.returncode == 3, r.stderr
    assert "CorruptIndexError" in r.stderr and "is not a blob of default/0/a" in r.stderr
    assert not dest.exists()
    # a's next backup refuses to trust that index, never wedges (issue 12): it names it and uploads everything
    backup = cli("backup", tmp_path / "a", "--repo", repo)
    assert backup.returncode == 0, backup.stderr
    assert "is not a blob of default/0/a" in backup.stderr and "uploads every file" in backup.stderr
    later = str(int(time.time() * 1000) + 10 * 24 * 3600 * 1000)
    gc = cli("gc", "--repo", repo, "--now", later)  # gc skips a store whose retained index is unreadable
    assert gc.returncode == 0 and "default/0/a: skipped" in gc.stdout, gc.stdout + gc.stderr
    after = {"blobs": repo_files(repo, "blobs"), "indexes": repo_files(repo, "indexes")}
    assert before["blobs"] <= after["blobs"] and before["indexes"] <= after["indexes"]  # nothing deleted
    assert _b_blobs(repo) == set(victim)  # nothing of b written either
    assert cli("restore", tmp_path / "out" / "b", "--repo", repo, work=tmp_path / "h2").returncode == 0
    assert read_all(tmp_path / "out" / "b") == data_b


def test_a_blob_longer_than_the_index_declares_is_cut_off_and_never_fills_the_disk(tmp_path, repo, cli):
    src = tmp_path / "s"
    src.mkdir()
    (src / "small.txt").write_text("six b!")
    assert cli("backup", src, "--repo", repo).returncode == 0
    _, record = latest_record(repo)
    index = SnapshotIndex.from_bytes(plain_index((repo / record["indexBlobId"]).read_bytes()))
    blob = repo / index.files()["small.txt"].blobs[0].blob_id
    with open(blob, "wb") as fh:  # 64 MiB where the index declares 6 bytes
        fh.truncate(64 << 20)
    with tmpfs(tmp_path / "volume", size="16m") as volume:
        t0 = time.monotonic()
        r = cli("restore", volume, "--repo", repo, "--store", "s", work=tmp_path / "h")
        assert r.returncode == 3, r.stderr
        assert "more than the 6 bytes the index declares" in r.stderr
        assert time.monotonic() - t0 < 60
        assert list(volume.iterdir()) == []


def _doc(repo):
    _, record = latest_record(repo)
    return json.loads(plain_index((repo / record["indexBlobId"]).read_bytes()))


def _deep(doc):
    node = doc["dirIndex"]
    for i in range(450):  # beyond paths.MAX_DEPTH; deeper JSON than the parser's recursion is tested below
        child = {"dirName": f"d{i}", "filesPresent": [], "subDirectoriesPresent": []}
        node["subDirectoriesPresent"] = [child]
        node = child


HOSTILE = {
    "deep nesting": _deep,
    "mtime 1e999": lambda d: d["dirIndex"]["filesPresent"][0].update(mtime=1e999),
    "mtimeNs NaN": lambda d: d["dirIndex"]["filesPresent"][0].update(mtimeNs=float("nan")),
    "over-long name": lambda d: d["dirIndex"]["filesPresent"][0].update(fileName="x" * 300),
    "a name with a slash": lambda d: d["dirIndex"]["filesPresent"][0].update(fileName="sub/evil"),
    "file and directory of one name": lambda d: d["dirIndex"]["subDirectoriesPresent"].append(
        {"dirName": d["dirIndex"]["filesPresent"][0]["fileName"], "filesPresent": []}),
    "file and link of one name": lambda d: d["dirIndex"].update(symlinksPresent=[
        {"linkName": d["dirIndex"]["filesPresent"][0]["fileName"], "target": "/etc/passwd"}]),
    "duplicate entries": lambda d: d["dirIndex"]["filesPresent"].append(
        copy.deepcopy(d["dirIndex"]["filesPresent"][0])),
    "a .. blob id": lambda d: d["dirIndex"]["filesPresent"][0]["blobs"][0].update(
        blobId="default/0/s/blobs/../../../../etc/passwd"),
    "a mode beyond 0o7777": lambda d: d["dirIndex"]["filesPresent"][0].update(mode=1 << 40),
    "a content hash of another kind": lambda d: d["dirIndex"]["filesPresent"][0].update(contentHash="md5:00"),
    "a store key that is not one": lambda d: d.update(storeName="../s"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_malformed_index_is_a_typed_error_with_exit_code_3_and_nothing_is_written(tmp_path, repo, cli, case):
    src = tmp_path / "s"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_text("a")
    (src / "sub" / "b.txt").write_text("b")
    assert cli("backup", src, "--repo", repo).returncode == 0
    rewrite_index(repo, HOSTILE[case])
    dest = tmp_path / "out" / "s"
    r = cli("restore", dest, "--repo", repo, work=tmp_path / "h")
    assert r.returncode == 3, r.stderr
    assert "CorruptIndexError" in r.stderr and "unexpected" not in r.stderr
    assert not dest.exists()
    assert cli("verify", "--repo", repo, "--store", "s").returncode == 3


def test_an_index_of_one_megabyte_of_brackets_is_refused_quickly(tmp_path, repo, cli):
    src = tmp_path / "s"
    src.mkdir()
    (src / "a.txt").write_text("a")
    assert cli("backup", src, "--repo", repo).returncode == 0
    write_index_bytes(repo, b"[" * (1 << 20))
    r = cli("restore", tmp_path / "out" / "s", "--repo", repo, work=tmp_path / "h")
    assert r.returncode == 3 and "CorruptIndexError" in r.stderr, r.stderr


# -- fuzz ----------------------------------------------------------------------------------------------------------
def _valid_doc() -> dict:
    blob = "j/0/s/blobs/" + "a" * 32
    file = {"fileName": "f", "blobs": [{"blobId": blob, "offset": 0}], "mtime": 1, "ctime": 1, "sizeInBytes": 3,
            "crc32c": 7, "attribs": {}, "mode": 420, "mtimeNs": 5, "contentHash": "xxh3-128:" + "0" * 32}
    sub = {"dirName": "d", "filesPresent": [dict(file, fileName="g")], "filesRemoved": [],
           "subDirectoriesPresent": [], "subDirectoriesRemoved": [], "mode": 493,
           "symlinksPresent": [{"linkName": "l", "target": "../f", "mtimeNs": 3}]}
    return {"schemaVersion": 2, "checkpointId": "1700000000000-abcdef12", "createdTimeMs": 1, "jobName": "j",
            "jobInstance": "w", "taskName": "0", "storeName": "s",
            "dirIndex": {"dirName": "", "filesPresent": [file], "filesRemoved": [],
                         "subDirectoriesPresent": [sub], "subDirectoriesRemoved": []},
            "prevSnapshotIndexBlobId": None, "batchId": 3, "storeType": "dir", "retainCheckpoints": 2}


_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=300),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5),
    max_leaves=40,
)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _bounded_parse(data: bytes) -> None:
    """Parse ``data``: a ``SnapshotIndex`` or a ``CorruptIndexError``, in bounded time and memory."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        SnapshotIndex.from_bytes(data)
    except CorruptIndexError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 2.0
    assert peak < 64 * len(data) + (8 << 20), f"{peak} bytes for a {len(data)}-byte input"


def test_the_valid_fuzz_seed_parses():
    index = SnapshotIndex.from_bytes(json.dumps(_valid_doc()).encode())
    assert set(index.entries()) == {"f", "d", "d/g", "d/l"}


_FUZZ = settings(max_examples=300, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.binary(max_size=2000))
def test_fuzz_arbitrary_bytes(data):
    _bounded_parse(data)


@_FUZZ
@given(_json)
def test_fuzz_arbitrary_json(doc):
    _bounded_parse(json.dumps(doc).encode())


@_FUZZ
@given(st.data())
def test_fuzz_a_valid_index_with_one_part_replaced(data):
    doc = _valid_doc()
    path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
    value = data.draw(_json)
    node = doc
    for part in path[:-1]:
        node = node[part]
    if data.draw(st.booleans()) and isinstance(node, dict):
        node.pop(path[-1])
    else:
        node[path[-1]] = value
    _bounded_parse(json.dumps(doc).encode())


@_FUZZ
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=0, max_value=4000))
def test_fuzz_a_valid_index_with_bytes_spliced_in(chunk, at):
    raw = json.dumps(_valid_doc()).encode()
    at = at % len(raw)
    _bounded_parse(raw[:at] + chunk + raw[at:])


def test_fuzz_pathological_shapes():
    for data in (b"[" * 200_000, b'{"a":' * 100_000, b"1" * 100_000, b'"' + b"\\u0000" * 50_000 + b'"',
                 b'{"schemaVersion": 2, "dirIndex": ' + b'{"dirName":"x","filesPresent":[],"subDirectoriesPresent":['
                 * 5_000 + b"]}" * 5_000 + b"}"):
        _bounded_parse(data)

