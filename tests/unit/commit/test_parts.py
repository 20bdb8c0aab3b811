"""``blobstate.commit.parts``: the parts of a group record only executors hold (issue 27 case 2), on a real
``file://`` repository under ``tmp_path``: an executor puts back a committed changelog gc took, only from a copy
that matches its record and only once its group is old enough; a lost snapshot part is voided by re-committing
the delta of its batch, so every restore and gc works on without it."""

from __future__ import annotations

import pytest

from blobstate.codec import frame
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.commit.parts import heal_group, heal_parts, void_lost_snapshots
from blobstate.errors import BlobNotFound
from blobstate.maintenance.gc import collect
from blobstate.maintenance.verify import verify_checkpoint
from blobstate.model import changelog
from blobstate.model.chain import overridden_parts, partition_history, plan_chain
from blobstate.model.layout import now_ms
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
from blobstate.worker import stage_changelog, stage_snapshot

KEY = StoreKey("flights", "group", "routes")
TTL = 60_000


def _data(batch: int) -> bytes:
    return changelog.encode([(changelog.PUT, f"k{batch}", f"v{batch}")])


def _snapshot(repo: Repository, tmp_path, batch: int, previous=None):  # noqa: ANN001, ANN202
    ck = tmp_path / f"ck{batch}"
    ck.mkdir()
    (ck / "000001.sst").write_bytes(b"s" * 100 + bytes([batch]))
    return stage_snapshot(repo, KEY, partition=0, batch_id=batch, checkpoint_dir=str(ck), previous=previous,
                          ttl_ms=TTL)


def test_an_executor_puts_back_only_a_lost_changelog_it_kept_of_an_old_group(repo):
    with StoreCommitter(KEY, repo, work_dir=str(repo.url[7:]) + "-owner", ttl_ms=TTL) as committer:
        entry = stage_changelog(repo, KEY, partition=0, batch_id=0, data=_data(0), ttl_ms=TTL)
        GroupCommitter(committer, num_partitions=1).commit([entry], batch_id=0)
    (part,) = partition_history(repo.log.history(KEY), 0)
    written = repo.codec.inner.get_bytes(part.changelog_blob_id)  # as its task stored it: compressed
    repo.store.delete(part.changelog_blob_id)  # gc took it before the group's append landed

    assert heal_parts(repo, [part], lambda r: _data(0), ttl_ms=TTL) == []  # a young group: not even checked
    old = type(part)(**{**part.__dict__, "created_time_ms": now_ms() - TTL})
    assert heal_parts(repo, [old], lambda r: None, ttl_ms=TTL) == []  # nothing kept on this host
    assert heal_parts(repo, [old], lambda r: _data(0), ttl_ms=TTL) == [part.changelog_blob_id]
    assert repo.read_changelog(part) == _data(0)
    assert written[:4] == frame.ZSTD_MAGIC == repo.codec.inner.get_bytes(part.changelog_blob_id)[:4]  # the same form
    assert not repo.store.has_ttl(part.changelog_blob_id)  # committed: permanent
    assert heal_parts(repo, [old], lambda r: _data(0), ttl_ms=TTL) == []  # present now: nothing to do


def test_a_lost_snapshot_part_is_voided_and_the_partition_restores_from_the_one_before(repo, tmp_path):
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "owner"), ttl_ms=TTL) as committer:
        groups = GroupCommitter(committer, num_partitions=1)
        for batch in (0, 1):
            staged = _snapshot(repo, tmp_path, batch)
            delta = stage_changelog(repo, KEY, partition=0, batch_id=batch, data=_data(batch), ttl_ms=TTL)
            late = groups.commit([delta, staged.entry], batch_id=batch, new_blob_ids=staged.new_blob_ids)
        repo.store.delete(staged.entry.blob_id)  # batch 1's snapshot index: gc took it before the append

        missing, lost = heal_group(repo, late, committer.engine.cleanup.journal_sources(
            committer.session.states()[late.checkpoint_id], late))
        assert missing == [staged.entry.blob_id] and [p.checkpoint_id for p in lost] == [staged.entry.checkpoint_id]
        history = repo.log.history(KEY)
        with pytest.raises(BlobNotFound):
            repo.retained_references(history)  # what stopped gc and retention before the void
        void = void_lost_snapshots(committer.session, repo, late, lost, commit_point=committer.commit_point)
        assert void is not None and void.generation == 3
        assert void_lost_snapshots(committer.session, repo, late, lost, commit_point=committer.commit_point) is None
    history = repo.log.history(KEY)
    assert overridden_parts(history) == {staged.entry.checkpoint_id}
    chain = plan_chain(partition_history(history, 0))
    assert chain.snapshot.batch_id == 0 and [d.batch_id for d in chain.deltas] == [1]
    assert chain.deltas[0].changelog_blob_id == late.entry(0).blob_id  # the same changelog, committed again
    assert late.entry(0).blob_id in repo.retained_references(history, history=history)  # read without BlobNotFound
    report = collect(repo, KEY, now_ms=now_ms(), ttl_ms=TTL)
    assert report.skipped is None, report.skipped
    voided = [verify_checkpoint(repo, cp, overridden=overridden_parts(history)) for cp in history]
    assert all(not r.problems for r in voided), [r.problems for r in voided]  # `verify --all`: the void is no damage
    assert any(verify_checkpoint(repo, cp).problems for cp in history)  # without the history it is
