"""``blobstate.commit.healing``: which lost blobs a commit puts back and from where (``plan_heal`` before the index,
``heal_committed`` after a late commit point), the kept index copy, on a real ``file://`` repository under
``tmp_path``: a blob comes back under its own id, only from a local file that still has its size and CRC32C."""

from __future__ import annotations

import hashlib
import os

from blobstate.commit.healing import (
    chunk_puts,
    drop_index_copy,
    heal_blob,
    heal_committed,
    index_copy_path,
    load_index_copy,
    plan_heal,
    present_blobs,
    save_index_copy,
)
from blobstate.commit.planner import build_dir_index
from blobstate.local.checksum import crc32c_bytes
from blobstate.model.index import FileBlob, FileIndex, SnapshotIndex
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import BoundedSink, FileRange, PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "store")


def blob(name: str) -> str:
    return f"{KEY.prefix}/blobs/{hashlib.md5(name.encode()).hexdigest()}"


def metadata(repository: Repository, blob_id: str) -> bytes:
    """The plain bytes of an index or changelog (the repository stores them compressed: ``blobstate.codec``)."""
    return repository.store.get_bounded(blob_id, BoundedSink(1 << 20, blob_id))


def chunked(name: str, data: bytes, chunk: int) -> FileIndex:
    blobs = tuple(FileBlob(blob(f"{name}@{o}"), o) for o in range(0, len(data), chunk))
    return FileIndex(name.rsplit("/", 1)[-1], blobs, len(data), crc32c_bytes(data))



def test_chunk_puts_reads_the_wanted_chunks_at_their_recorded_offsets():
    f = chunked("f", b"0123456789", 4)
    wanted = {f.blobs[0].blob_id, f.blobs[2].blob_id}
    puts = chunk_puts(f, "/local/f", wanted, 500)
    assert puts == [PutRequest(f.blobs[0].blob_id, FileRange("/local/f", 0, 4), 500),
                    PutRequest(f.blobs[2].blob_id, FileRange("/local/f", 8, 2), 500)]


def test_plan_heal_uploads_again_only_the_reused_blobs_the_store_lacks():
    a, b = chunked("a", b"aaaaaaaa", 4), chunked("b", b"bb", 4)
    files = {"a": a, "b": b}
    present = {a.blobs[0].blob_id, b.blobs[0].blob_id}
    puts = plan_heal(files, {"a": "/cp/a", "b": "/cp/b"}, present, new_blob_ids=set(), ttl_ms=9)
    assert puts == [PutRequest(a.blobs[1].blob_id, FileRange("/cp/a", 4, 4), 9)]
    # a blob about to be uploaded by this commit anyway is not planned twice
    assert plan_heal(files, {"a": "/cp/a"}, present, new_blob_ids={a.blobs[1].blob_id}, ttl_ms=9) == []
    assert plan_heal(files, {}, present | {a.blobs[1].blob_id}, set(), 9) == []


def test_the_index_copy_is_returned_only_while_it_matches_its_record(tmp_path):
    work = str(tmp_path)
    data = b'{"index": 1}'
    save_index_copy(work, "cp1", data)
    assert load_index_copy(work, "cp1", crc32c_bytes(data), len(data)) == data
    assert load_index_copy(work, "cp1", crc32c_bytes(data) ^ 1, len(data)) is None
    assert load_index_copy(work, "cp1", crc32c_bytes(data), len(data) + 1) is None
    assert load_index_copy(work, "cp1", crc32c_bytes(data), len(data), kind="changelog") is None
    save_index_copy(work, "cp1", b"log", kind="changelog", sync=False)
    assert index_copy_path(work, "cp1", kind="changelog").endswith("changelog-cp1.bin")
    drop_index_copy(work, "cp1")
    drop_index_copy(work, "cp1")  # idempotent
    assert os.listdir(work) == ["changelog-cp1.bin"]


def test_a_lost_changelog_is_put_back_when_there_is_a_copy(repository):
    assert heal_blob(repository, KEY, blob("log"), None) is False
    assert heal_blob(repository, KEY, blob("log"), b"changes") is True
    assert metadata(repository, blob("log")) == b"changes" and not repository.store.has_ttl(blob("log"))
    assert heal_blob(repository, KEY, blob("log"), None) is True  # present: nothing to do


def snapshot_with(repository: Repository, tmp_path, files: dict[str, bytes], chunk: int = 4):
    """Upload a snapshot of ``files`` (also written to a local checkpoint directory); returns index, id, bytes,
    local root."""
    local = tmp_path / "local"
    entries = {}
    for rel, data in files.items():
        (local / rel).parent.mkdir(parents=True, exist_ok=True)
        (local / rel).write_bytes(data)
        entries[rel] = chunked(rel, data, chunk)
        for b, length in entries[rel].chunk_ranges():
            repository.store.put(PutRequest(b.blob_id, data[b.offset:b.offset + length]))
    index = SnapshotIndex("cp1", 1, KEY.job, "inst", KEY.task, KEY.store, build_dir_index(entries, {}))
    index_id = f"{KEY.prefix}/indexes/{1:032x}.json"
    repository.store.put(PutRequest(index_id, index.to_bytes()))
    return index, index_id, index.to_bytes(), str(local)


def test_a_committed_snapshot_gets_its_lost_blobs_and_index_back_from_the_local_checkpoint(repository, tmp_path):
    index, index_id, data, local = snapshot_with(repository, tmp_path, {"a": b"0123456789", "sub/b": b"bbbbb"})
    lost = [index.files()["a"].blobs[1].blob_id, index.files()["sub/b"].blobs[0].blob_id]
    for blob_id in [*lost, index_id]:
        repository.store.delete(blob_id)
    assert heal_committed(repository, index, index_id, data, local) == []
    assert repository.store.get_bytes(lost[0]) == b"4567" and repository.store.get_bytes(lost[1]) == b"bbbb"
    assert metadata(repository, index_id) == data
    assert not any(repository.store.has_ttl(b) for b in [*lost, index_id])  # a committed snapshot's: permanent


def test_what_cannot_be_healed_from_this_host_is_reported(repository, tmp_path):
    index, index_id, data, local = snapshot_with(repository, tmp_path, {"a": b"0123456789", "c": b"cc"})
    lost_a = index.files()["a"].blobs[0].blob_id
    lost_c = index.files()["c"].blobs[0].blob_id
    repository.store.delete(lost_a)
    repository.store.delete(lost_c)
    with open(os.path.join(local, "a"), "wb") as fh:  # the local file changed since: never uploaded under the id
        fh.write(b"9876543210")
    assert heal_committed(repository, index, index_id, data, local) == [lost_a]
    assert lost_a not in present_blobs(repository, KEY) and lost_c in present_blobs(repository, KEY)
    assert sorted(heal_committed(repository, index, index_id, data, None)) == [lost_a]  # no local checkpoint at all
    repository.store.delete(index_id)
    assert heal_committed(repository, index, index_id, None, local) == [index_id]  # the index, with no copy kept
