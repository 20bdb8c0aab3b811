"""``blobstate.commit.copy`` between two ``file://`` repositories: every record copied in order with what it
references (restorable at the target, marked as a copy's), a rerun copying nothing, a copy up to a checkpoint, a
damaged source blob aborting the commit with nothing referenced, and a target that took writes of its own refused
(fast-forward only)."""

from __future__ import annotations

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.copy import COPIED, copied_by, copy_stores, to_copy
from blobstate.errors import DivergedTargetError, IntegrityError
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "files")
TTL = 3_600_000


@pytest.fixture
def repos(tmp_path):
    src = Repository.open(f"file://{tmp_path}/src", create=True)
    dst = Repository.open(f"file://{tmp_path}/dst", create=True)
    data = tmp_path / "data"
    data.mkdir()
    for n in range(3):
        (data / "f.txt").write_text(f"version {n} " * 50)
        with StoreCommitter(KEY, src, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
            committer.backup(str(data))
    yield src, dst, tmp_path
    src.close()
    dst.close()


def _copy(src, dst, tmp_path, checkpoint=None):  # noqa: ANN001, ANN202
    return copy_stores(src, dst, [KEY], checkpoint=checkpoint, ttl_ms=TTL, max_concurrency=4,
                       work_base=str(tmp_path / "base"))


def test_every_record_is_copied_in_order_and_a_rerun_copies_nothing(repos):
    src, dst, tmp_path = repos
    [report] = _copy(src, dst, tmp_path)
    source = src.log.history(KEY)
    assert report.copied == [cp.checkpoint_id for cp in source] and report.blobs_uploaded > 0
    copied = dst.log.history(KEY)
    assert [(cp.checkpoint_id, cp.generation) for cp in copied] == [(cp.checkpoint_id, cp.generation) for cp in source]
    assert all(cp.writer_id.startswith(COPIED) for cp in copied)
    latest = dst.read_index(copied[-1])
    assert set(latest.files()) == {"f.txt"}
    assert all(b.blob_id in {i.blob_id for i in dst.store.list(KEY.prefix)} for b in latest.files()["f.txt"].blobs)
    assert dst.store.expired(KEY.prefix, layout.FAR_FUTURE_MS) == []  # every copied object is permanent
    [again] = _copy(src, dst, tmp_path)
    assert again.copied == [] and again.present == report.copied and again.blobs_uploaded == 0


def test_a_copy_up_to_a_checkpoint(repos):
    src, dst, tmp_path = repos
    [report] = _copy(src, dst, tmp_path, checkpoint=2)
    assert [cp.generation for cp in dst.log.history(KEY)] == [1, 2] and len(report.skipped) == 1


def test_a_damaged_source_blob_aborts_the_commit_with_nothing_referenced(repos):
    src, dst, tmp_path = repos
    first = src.log.history(KEY)[0]
    blob = src.read_index(first).files()["f.txt"].blobs[0].blob_id
    src.store.put(PutRequest(blob, b"damaged at the source"))
    with pytest.raises(IntegrityError):
        _copy(src, dst, tmp_path)
    assert dst.log.history(KEY) == []


def test_a_target_with_writes_of_its_own_is_refused(repos):
    src, dst, tmp_path = repos
    _copy(src, dst, tmp_path, checkpoint=1)
    with StoreCommitter(KEY, dst, store_type="dir", work_dir=str(tmp_path / "failover")) as own:
        own.backup(str(tmp_path / "data"))  # the target's own writer took over
    with pytest.raises(DivergedTargetError) as caught:
        _copy(src, dst, tmp_path)
    assert caught.value.own == (dst.log.latest(KEY).checkpoint_id,)
    assert len(dst.log.history(KEY)) == 2


def test_to_copy_and_copied_by_are_pure():
    assert copied_by("host:1") == COPIED + "host:1" and copied_by(COPIED + "host:1") == COPIED + "host:1"
    assert to_copy([], []) == ([], [], [])
