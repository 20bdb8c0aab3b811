"""Issue 33, compression: zstd decided per file from a sample and recorded per blob in the index, so compressed and
plain blobs mix in one repository (file://, moto S3, azurite) and restore byte-equal; indexes and changelogs always
compressed; a repository written before compression existed stays readable and takes compressed commits."""

from __future__ import annotations

import json
import os
import random
import tarfile
from pathlib import Path

from fixtures_core import read_all

import blobstate
from blobstate.codec.frame import ZSTD_MAGIC
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

FIXTURE = Path(__file__).resolve().parents[1] / "support" / "data" / "pre33-repository.tar.gz"
CHUNK = 64 << 10


def _text(seed: int, lines: int = 4000) -> bytes:
    rnd = random.Random(seed)
    return "".join(f"{i:06d} flight UA{rnd.randint(1, 999)} JFK-SFO delay {rnd.randint(0, 99)}\n"
                   for i in range(lines)).encode()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _latest_index(repo: Repository, key: StoreKey):
    cp = repo.log.latest(key)
    return cp, repo.read_index(cp)


def test_compressed_and_plain_blobs_mix_in_one_repository_and_restore_byte_equal(store_target, tmp_path,
                                                                                 monkeypatch):
    target = store_target
    src = tmp_path / "state"
    (src / "sub").mkdir(parents=True)
    (src / "events.log").write_bytes(_text(1))  # compressible, several chunks
    (src / "noise.bin").write_bytes(random.Random(2).randbytes(150_000))  # incompressible: stored as it is
    (src / "sub" / "tiny").write_bytes(b"x")
    common = dict(repo=target.url, storage_options=target.storage_options, store="state", store_type="dir",
                  chunk_size=CHUNK, work_base=str(tmp_path / "work"))
    blobstate.backup(str(src), **common)
    key = StoreKey("default", "0", "state")
    with Repository.open(target.url, storage_options=target.storage_options, create=False) as repo:
        cp, index = _latest_index(repo, key)
        files = index.files()
        assert {b.codec for b in files["events.log"].blobs} == {"zstd"} and len(files["events.log"].blobs) > 1
        assert {b.codec for b in files["noise.bin"].blobs} == {None}
        stored = {i.blob_id: i.size for i in repo.store.list(f"{key.prefix}/blobs")}
        assert sum(stored[b.blob_id] for b in files["events.log"].blobs) < files["events.log"].size_in_bytes / 3
        assert sum(stored[b.blob_id] for b in files["noise.bin"].blobs) == files["noise.bin"].size_in_bytes
        assert repo.codec.inner.get_bytes(cp.index_blob_id)[:4] == ZSTD_MAGIC  # the index itself: compressed
    # the next commit with compression off: a plain blob of a compressible file beside the compressed ones
    monkeypatch.setenv("BLOBSTATE_COMPRESSION", "off")
    (src / "more.log").write_bytes(_text(3))
    blobstate.backup(str(src), **common)
    monkeypatch.delenv("BLOBSTATE_COMPRESSION")
    with Repository.open(target.url, storage_options=target.storage_options, create=False) as repo:
        _, index = _latest_index(repo, key)
        codecs = {rel: {b.codec for b in f.blobs} for rel, f in index.files().items()}
        assert codecs["more.log"] == {None} and codecs["events.log"] == {"zstd"}  # reused, still compressed
    dest = tmp_path / "restored"
    blobstate.restore(str(dest), repo=target.url, storage_options=target.storage_options, store="state",
                      work_base=str(tmp_path / "other-host"))
    assert _tree(dest) == _tree(src)
    reports = blobstate.verify(repo=target.url, storage_options=target.storage_options, all_checkpoints=True)
    assert [r.ok for r in reports] == [True, True] and reports[-1].bytes_read == sum(map(len, _tree(src).values()))


def test_a_repository_written_before_compression_stays_readable_and_takes_compressed_commits(tmp_path):
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    url, work = f"file://{tmp_path}/repo", str(tmp_path / "work")
    expected_counts = json.loads((tmp_path / "expected" / "counts.json").read_text())
    for blob in (tmp_path / "repo").rglob("*"):
        if blob.is_file() and blob.name != "blobstate-repository.json":
            assert blob.read_bytes()[:4] != ZSTD_MAGIC  # nothing in it was written compressed
    # everything in it restores and verifies as it did
    blobstate.restore(str(tmp_path / "notes"), repo=url, store="notes", work_base=work)
    assert _tree(tmp_path / "notes") == _tree(tmp_path / "expected" / "notes")
    result = blobstate.restore(str(tmp_path / "counts"), repo=url, store="counts", work_base=work)
    assert result.deltas_applied == 1
    assert {k.decode() if isinstance(k, bytes) else k: v for k, v in read_all(tmp_path / "counts").items()} == \
        expected_counts
    assert all(r.ok for r in blobstate.verify(repo=url, all_checkpoints=True))
    # new commits into it: compressed blobs, index and changelog beside the old plain ones
    notes = tmp_path / "notes"
    (notes / "log.txt").write_bytes((notes / "log.txt").read_bytes() + _text(4))
    blobstate.backup(str(notes), repo=url, store="notes", store_type="dir", work_base=work)
    key = StoreKey("default", "0", "counts")
    with StoreCommitter(key, url, work_dir=os.path.join(work, "counts-writer")) as committer:
        DeltaCommitter(committer, inline_max_bytes=0).commit_changelog(  # a blob: compressed
            changelog.encode([(changelog.PUT, "route-0003", "new")]), batch_id=2)
    expected_counts["route-0003"] = "new"
    with Repository.open(url, create=False) as repo:
        _, index = _latest_index(repo, StoreKey("default", "0", "notes"))
        codecs = {rel: {b.codec for b in f.blobs} for rel, f in index.files().items()}
        assert codecs == {"log.txt": {"zstd"}, "random.bin": {None}, "sub/zero.dat": {None}}  # old blobs reused
        deltas = [cp for cp in repo.log.history(key) if cp.is_delta]
        forms = [repo.codec.inner.get_bytes(cp.changelog_blob_id)[:4] == ZSTD_MAGIC for cp in deltas]
        assert forms == [False, True]  # the old changelog plain, the new one compressed
    restored = tmp_path / "again"
    blobstate.restore(str(restored / "notes"), repo=url, store="notes", work_base=str(tmp_path / "w2"))
    assert _tree(restored / "notes") == _tree(notes)
    blobstate.restore(str(restored / "counts"), repo=url, store="counts", work_base=str(tmp_path / "w2"))
    assert {k.decode() if isinstance(k, bytes) else k: v for k, v in read_all(restored / "counts").items()} == \
        expected_counts
    old = blobstate.restore(str(restored / "old"), repo=url, store="notes", checkpoint=1,
                            work_base=str(tmp_path / "w2"))
    assert old.checkpoint.generation == 1 and (restored / "old" / "random.bin").read_bytes() == \
        (notes / "random.bin").read_bytes()
    assert all(r.ok for r in blobstate.verify(repo=url, all_checkpoints=True))
