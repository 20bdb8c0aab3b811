"""``blobstate.restoring.download`` against a real ``file://`` repository: files are assembled from their chunks
(stored plain or compressed), verified as they stream, and every defect of what the repository holds (a blob gone,
longer or shorter than its chunk, bytes that do not match the index) is a typed error naming the file, never a
file left looking restored; ``certain_downloads`` names exactly the files no plan can keep; ``Prefetch`` fetches
them into the staging directory ahead of the plan."""

from __future__ import annotations

import os
import threading

import pytest
import xxhash

from blobstate.codec import frame
from blobstate.errors import BlobNotFound, ChecksumMismatch
from blobstate.local.checksum import content_hash_of, crc32c_bytes
from blobstate.model import layout
from blobstate.model.index import FileBlob, FileIndex
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.restoring.download import AHEAD, Prefetch, certain_downloads, download_files
from blobstate.restoring.swap import Staging

KEY = StoreKey("job", "0", "store")


class Recorder:
    """A ``Progress`` that remembers what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.lock = threading.Lock()

    def start(self, label, total_bytes, total_files):
        self.calls.append(("start", label, total_bytes, total_files))

    def advance(self, nbytes, nfiles=0):
        with self.lock:
            self.calls.append(("advance", nbytes, nfiles))

    def finish(self):
        self.calls.append(("finish",))


def put_file(repo, name: str, data: bytes, *, chunk: int = 1000, codec: str | None = None, mutable: bool = False,
             blob_bytes=None) -> FileIndex:
    """Store ``data`` as blobs of ``chunk`` bytes and return its index entry; ``blob_bytes(i, piece)`` may change
    what blob ``i`` holds (damage)."""
    blobs = []
    for i, offset in enumerate(range(0, len(data), chunk)):
        blob_id = layout.new_blob_id(KEY)
        piece = data[offset:offset + chunk]
        stored = blob_bytes(i, piece) if blob_bytes else piece
        if stored is not None:
            repo.store.put(PutRequest(blob_id, stored, codec=codec))
        blobs.append(FileBlob(blob_id, offset, codec))
    digest = content_hash_of(xxhash.xxh3_128(data)) if mutable else None
    return FileIndex(name, tuple(blobs), len(data), crc32c_bytes(data), content_hash=digest)


def into(root):
    def target(rel: str) -> str:
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path
    return target


def test_files_are_assembled_from_their_chunks_and_reported(repository, tmp_path):
    data = {"a.sst": os.urandom(3500), "sub/MANIFEST": b"manifest " * 300, "empty": b""}
    files = {"a.sst": put_file(repository, "a.sst", data["a.sst"]),
             "sub/MANIFEST": put_file(repository, "MANIFEST", data["sub/MANIFEST"], codec=frame.ZSTD, mutable=True),
             "empty": put_file(repository, "empty", b"")}
    progress = Recorder()
    download_files(repository, files, into(tmp_path / "out"), progress, sum(map(len, data.values())))
    for rel, content in data.items():
        assert (tmp_path / "out" / rel).read_bytes() == content
    assert progress.calls[0] == ("start", "download", 3500 + 2700, 3) and progress.calls[-1] == ("finish",)
    advances = [c for c in progress.calls if c[0] == "advance"]
    assert sum(c[1] for c in advances) == 6200 and sum(c[2] for c in advances) == 3


def test_an_existing_target_is_never_overwritten(repository, tmp_path):
    files = {"a": put_file(repository, "a", b"new")}
    (tmp_path / "a").write_bytes(b"someone else's")
    with pytest.raises(FileExistsError):
        download_files(repository, files, into(tmp_path), Recorder(), 3)
    assert (tmp_path / "a").read_bytes() == b"someone else's"


def test_a_missing_blob_names_the_chunk_and_the_file(repository, tmp_path):
    files = {"d/a.sst": put_file(repository, "a.sst", b"x" * 2500, blob_bytes=lambda i, p: None if i == 1 else p)}
    progress = Recorder()
    with pytest.raises(BlobNotFound, match=r"chunk at offset 1000 of file 'd/a.sst'") as info:
        download_files(repository, files, into(tmp_path), progress, 2500)
    assert info.value.exit_code == 3 and progress.calls[-1] == ("finish",)


@pytest.mark.parametrize("codec", [None, frame.ZSTD])
def test_a_blob_longer_than_its_chunk_is_stopped_before_it_fills_the_disk(repository, tmp_path, codec):
    files = {"a": put_file(repository, "a", b"y" * 1500, codec=codec, blob_bytes=lambda i, p: p + b"more" * 10_000)}
    with pytest.raises(ChecksumMismatch, match=r"of file 'a': a blob holds more than the 1000 bytes the index "
                                               r"declares"):
        download_files(repository, files, into(tmp_path), Recorder(), 1500)
    assert os.path.getsize(tmp_path / "a") <= 1000


def test_a_blob_shorter_than_its_chunk_is_refused(repository, tmp_path):
    files = {"a": put_file(repository, "a", b"z" * 1500, blob_bytes=lambda i, p: p[:-1] if i == 0 else p)}
    with pytest.raises(ChecksumMismatch, match=r"of file 'a' holds 999 bytes, the index says 1000"):
        download_files(repository, files, into(tmp_path), Recorder(), 1500)


def test_bytes_that_do_not_match_the_index_are_refused(repository, tmp_path):
    files = {"a": put_file(repository, "a", b"good" * 100, blob_bytes=lambda i, p: b"evil" * 100)}
    with pytest.raises(ChecksumMismatch, match=r"file 'a' does not match the snapshot index after download \(size "
                                               r"400 vs 400, CRC32C"):
        download_files(repository, files, into(tmp_path), Recorder(), 400)


def test_a_mutable_file_is_checked_by_its_content_hash_too(repository, tmp_path):
    entry = put_file(repository, "MANIFEST", b"manifest", mutable=True)
    wrong = FileIndex(entry.file_name, entry.blobs, entry.size_in_bytes, entry.crc32c,
                      content_hash="xxh3-128:" + "0" * 32)
    with pytest.raises(ChecksumMismatch, match="content hash xxh3-128:"):
        download_files(repository, {"MANIFEST": wrong}, into(tmp_path), Recorder(), 8)


def test_a_set_stop_skips_the_files_not_begun(repository, tmp_path):
    files = {f"f{i}": put_file(repository, f"f{i}", b"data") for i in range(5)}
    stop = threading.Event()
    stop.set()
    download_files(repository, files, into(tmp_path / "out"), Recorder(), 20, stop=stop)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_the_certain_downloads_are_the_files_no_root_holds_at_their_size(tmp_path):
    entry = lambda name, size: FileIndex(name, (), size, 0)  # noqa: E731
    files = {"same": entry("same", 3), "other-size": entry("other-size", 3), "in-second": entry("in-second", 4),
             "a-link": entry("a-link", 3), "a-dir": entry("a-dir", 3), "nowhere": entry("nowhere", 1),
             "sub/deep": entry("deep", 2)}
    first, second = tmp_path / "dest", tmp_path / "checkpoint"
    (first / "sub").mkdir(parents=True)
    second.mkdir()
    (first / "same").write_bytes(b"abc")
    (first / "other-size").write_bytes(b"abcd")
    (second / "in-second").write_bytes(b"abcd")
    os.symlink("abc", first / "a-link")  # a link of the file's size (its target's length) is never the file
    (first / "a-dir").mkdir()
    files["a-dir"] = entry("a-dir", os.lstat(first / "a-dir").st_size)  # nor a directory of its size
    (second / "sub").mkdir()
    (second / "sub" / "deep").write_bytes(b"de")
    assert sorted(certain_downloads(files, [str(first), str(second)])) == ["a-dir", "a-link", "nowhere", "other-size"]
    assert sorted(certain_downloads(files, [])) == sorted(files)
    assert sorted(certain_downloads(files, iter([str(second)]))) == ["a-dir", "a-link", "nowhere", "other-size", "same"]


def test_files_fetched_ahead_are_taken_into_the_staging_directory(repository, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    staging = Staging.create(str(dest), avoid=set())
    files = {"a.sst": put_file(repository, "a.sst", b"A" * 2100), "sub/b.sst": put_file(repository, "b.sst", b"B")}
    progress = Recorder()
    ahead = Prefetch(repository, staging, files, progress)
    ahead.wait()
    assert os.path.isfile(os.path.join(staging.root, AHEAD, "sub", "b.sst"))
    os.makedirs(staging.new_path("sub"))
    assert ahead.take("a.sst") and ahead.take("sub/b.sst") and not ahead.take("c.sst")
    assert open(staging.new_path("a.sst"), "rb").read() == b"A" * 2100
    assert open(staging.new_path("sub/b.sst"), "rb").read() == b"B"
    assert progress.calls[0] == ("start", "download", 2101, 2)
    ahead.discard()
    assert not os.path.exists(staging.root)


def test_a_failed_fetch_ahead_is_raised_by_wait_and_forgotten_by_stop(repository, tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    files = {"a": put_file(repository, "a", b"x" * 10, blob_bytes=lambda i, p: None)}
    failing = Prefetch(repository, Staging.create(str(dest), avoid=set()), files)
    with pytest.raises(BlobNotFound, match="of file 'a'"):
        failing.wait()
    stopped = Prefetch(repository, Staging.create(str(dest), avoid=set()), files)
    stopped.stop()  # the restore already fails or plans again: not its error
    stopped.discard()
    assert not os.path.exists(stopped.staging.root)
