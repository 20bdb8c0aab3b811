"""Snapshots and deltas written straight into a real repository by the unit tests of the cleanup, healing and
catalog code: the blobs, the index and the checkpoint record, as a commit leaves them, without the commit engine
(whose decisions are not what these tests are about). Blob ids are derived from a name (``blob``)."""

from __future__ import annotations

import hashlib

from blobstate.commit.planner import build_dir_index
from blobstate.local.checksum import crc32c_bytes
from blobstate.model.index import FileBlob, FileIndex, SnapshotIndex
from blobstate.model.records import DELTA, Checkpoint, StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "store")


def blob(name: str, key: StoreKey = KEY) -> str:
    """The blob id ``name`` stands for under ``key``'s ``blobs/``."""
    return f"{key.prefix}/blobs/{hashlib.md5(name.encode()).hexdigest()}"


def index_id(n: int, key: StoreKey = KEY) -> str:
    """The index id of snapshot ``n``."""
    return f"{key.prefix}/indexes/{n:032x}.json"


def present(repo: Repository, key: StoreKey = KEY) -> set[str]:
    """The blob ids under ``key``'s ``blobs/`` in the store."""
    return {info.blob_id for info in repo.store.list(f"{key.prefix}/blobs")}


def commit_snapshot(repo: Repository, n: int, files: dict[str, str], *, retain: int | None = None,
                    ttl_ms: int | None = None, batch: int | None = None, key: StoreKey = KEY) -> Checkpoint:
    """Snapshot ``n`` (the n-th record of the log) of ``files`` (relative path -> blob name; a file's content is
    its blob name): upload the blobs it does not share yet and its index, then append its record."""
    return repo.log.append(stage_snapshot(repo, n, files, retain=retain, ttl_ms=ttl_ms, batch=batch, key=key), n - 1)


def stage_snapshot(repo: Repository, n: int, files: dict[str, str], *, retain: int | None = None,
                   ttl_ms: int | None = None, batch: int | None = None, key: StoreKey = KEY) -> Checkpoint:
    """``commit_snapshot`` up to its append: the blobs and index uploaded, the record returned (not appended)."""
    have = present(repo, key)
    entries = {}
    for rel, name in files.items():
        data = name.encode()
        if blob(name, key) not in have:
            repo.store.put(PutRequest(blob(name, key), data, ttl_ms))
        entries[rel] = FileIndex(rel.rsplit("/", 1)[-1], (FileBlob(blob(name, key), 0),), len(data), crc32c_bytes(data))
    index = SnapshotIndex(f"cp{n}", n, key.job, "inst", key.task, key.store, build_dir_index(entries, {}),
                          batch_id=batch, retain=retain, store_type="dir")
    data = index.to_bytes()
    repo.store.put(PutRequest(index_id(n, key), data, ttl_ms))
    return Checkpoint(key, f"cp{n}", 0, index_id(n, key), crc32c_bytes(data), len(data), n, batch,
                      writer_id=f"host{n}:1:x")


def commit_delta(repo: Repository, n: int, batch: int, key: StoreKey = KEY) -> Checkpoint:
    """Delta ``n`` (the n-th record of the log) of batch ``batch``: its changelog blob, then its record."""
    data = f"changelog {n}".encode()
    repo.store.put(PutRequest(blob(f"log{n}", key), data))
    record = Checkpoint(key, f"d{n}", 0, "", 0, 0, n, batch, kind=DELTA, changelog_blob_id=blob(f"log{n}", key),
                        changelog_crc32c=crc32c_bytes(data), changelog_size=len(data))
    return repo.log.append(record, n - 1)
