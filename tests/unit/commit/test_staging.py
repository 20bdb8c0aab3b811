"""``blobstate.commit.staging.stage_snapshot`` on a real ``file://`` repository and real files under ``tmp_path``: a
local checkpoint staged as blobs and an index, every one under a TTL, the caller's steps told in order; a second
stage against the first uploads only what changed and reuses the rest; a reused blob the store lost is put back
under its id; an unreadable previous index means everything is uploaded."""

from __future__ import annotations

import os

from blobstate.commit.healing import HealWalks
from blobstate.commit.staging import SnapshotSpec, StagedIndex, StageSteps, stage_snapshot
from blobstate.local.checksum import ChecksumCache
from blobstate.model.layout import is_blob_of, is_index_of, new_checkpoint_id, now_ms
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.model.retention import RetentionPolicy
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
TTL = 60_000
CHUNK = 4096


class Recorded(StageSteps):
    """The steps as told, in order."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, object]] = []

    def planned(self, index_id: str, puts: list[PutRequest], bytes_planned: int, index_data: bytes) -> None:
        self.steps.append(("planned", (index_id, sorted(r.blob_id for r in puts), bytes_planned, index_data)))

    def uploaded(self, request: PutRequest) -> None:
        self.steps.append(("uploaded", request.blob_id))

    def indexed(self, index_id: str, crc32c: int, size: int) -> None:
        self.steps.append(("indexed", (index_id, crc32c, size)))


def _write(directory: str, files: dict[str, bytes]) -> str:
    os.makedirs(directory, exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(data)
    return directory


def _stage(repo: Repository, directory: str, previous: StagedIndex | None = None, *, steps: StageSteps | None = None,
           policy: RetentionPolicy | None = None, walks: HealWalks | None = None,
           readable: bool = True) -> StagedIndex:
    spec = SnapshotSpec(new_checkpoint_id(), now_ms(), 7, "writer-1", "directory", TTL, CHUNK, policy)
    record = None if previous is None else Checkpoint(KEY, previous.index.checkpoint_id, 1, previous.index_id,
                                                      previous.crc32c, len(previous.data), now_ms())
    return stage_snapshot(repo, KEY, directory, spec, previous=record,
                          previous_index=previous.index if previous is not None and readable else None,
                          walks=walks or HealWalks(repo, KEY), cache=ChecksumCache(), is_mutable=lambda _: False,
                          steps=steps or StageSteps())


def test_a_checkpoint_is_staged_as_blobs_and_an_index_under_ttls_with_its_steps_in_order(repo, tmp_path):
    files = {"a.sst": os.urandom(1000), "b.sst": os.urandom(3 * CHUNK + 5), "CURRENT": b"MANIFEST-1\n"}
    recorded = Recorded()
    staged = _stage(repo, _write(str(tmp_path / "ck"), files), steps=recorded, policy=RetentionPolicy(last=2))

    blob_ids = sorted(r.blob_id for r in staged.puts)
    assert len(blob_ids) == 1 + 4 + 1 and all(is_blob_of(KEY, b) for b in blob_ids)  # b.sst in 4 chunks
    assert staged.bytes_planned == sum(len(d) for d in files.values())
    assert set(staged.files) == set(files) and staged.files_uploaded == 3 and is_index_of(KEY, staged.index_id)
    assert recorded.steps[0] == ("planned", (staged.index_id, blob_ids, staged.bytes_planned, staged.data))
    assert sorted(b for step, b in recorded.steps[1:-1] if step == "uploaded") == blob_ids
    assert recorded.steps[-1] == ("indexed", (staged.index_id, staged.crc32c, len(staged.data)))
    assert all(repo.store.has_ttl(b) for b in [*blob_ids, staged.index_id])  # nothing permanent before a commit
    record = Checkpoint(KEY, staged.index.checkpoint_id, 1, staged.index_id, staged.crc32c, len(staged.data), 1)
    assert repo.read_index(record) == staged.index  # stored as built: its size and CRC32C are the record's
    index = staged.index
    assert (index.batch_id, index.job_instance, index.store_type, index.retain) == (7, "writer-1", "directory", 2)
    assert index.prev_snapshot_index_blob_id is None


def test_a_second_stage_uploads_only_what_changed_and_reuses_the_rest(repo, tmp_path):
    directory = _write(str(tmp_path / "ck"), {"a.sst": os.urandom(1000), "b.sst": os.urandom(2000)})
    first = _stage(repo, directory)
    _write(directory, {"b.sst": os.urandom(2000)})
    second = _stage(repo, directory, first)
    assert second.files_uploaded == 1 and second.bytes_planned == 2000
    assert second.files["a.sst"].blobs == first.files["a.sst"].blobs  # reused, not uploaded again
    assert second.files["b.sst"].blobs != first.files["b.sst"].blobs
    assert second.index.prev_snapshot_index_blob_id == first.index_id and second.walked  # a fresh walk: it reused


def test_a_reused_blob_the_store_lost_is_put_back_under_its_id(repo, tmp_path):
    directory = _write(str(tmp_path / "ck"), {"a.sst": os.urandom(1000), "b.sst": os.urandom(2000)})
    first = _stage(repo, directory)
    lost = first.files["a.sst"].blobs[0].blob_id
    repo.store.delete(lost)
    second = _stage(repo, directory, first)
    assert [r.blob_id for r in second.puts] == [lost] and second.walked
    assert lost in {i.blob_id for i in repo.store.list(KEY.prefix)}


def test_an_unreadable_previous_index_means_every_file_is_uploaded(repo, tmp_path):
    directory = _write(str(tmp_path / "ck"), {"a.sst": os.urandom(1000), "b.sst": os.urandom(2000)})
    first = _stage(repo, directory)
    second = _stage(repo, directory, first, readable=False)
    assert second.files_uploaded == 2 and second.bytes_planned == 3000 and not second.walked
    assert second.index.prev_snapshot_index_blob_id == first.index_id
