"""``blobstate.commit.cleanup``: what retention, the restore-time init and an abort decide to delete, on a real
``file://`` repository under ``tmp_path`` (its blob store and file checkpoint log, no server): only blobs no
retained snapshot references, nothing at all while a retained index is unreadable, never a path outside the work
directory, never a commit the log holds."""

from __future__ import annotations

import os

import pytest
from snapshot_records import KEY, blob, commit_delta, commit_snapshot, index_id, present

from blobstate.commit.cleanup import (
    CleanupExecutor,
    apply_retention,
    checked_local_path,
    init_cleanup,
    last_completed,
    mark_completed,
)
from blobstate.commit.session import StoreSession
from blobstate.errors import ForeignObjectError, StorageError
from blobstate.journal import events as ev
from blobstate.local import workdir
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest


def test_retention_deletes_only_the_blobs_no_retained_snapshot_references(repository):
    commit_snapshot(repository, 1, {"a": "a1", "shared": "shared"})
    commit_snapshot(repository, 2, {"a": "a2", "shared": "shared"})
    commit_snapshot(repository, 3, {"a": "a3", "shared": "shared"})
    deleted, pruned = apply_retention(repository, KEY, 2)
    assert pruned == ["cp1"]
    assert sorted(deleted) == sorted([blob("a1"), index_id(1)])
    assert present(repository) == {blob("a2"), blob("a3"), blob("shared")}
    assert [cp.checkpoint_id for cp in repository.log.history(KEY)] == ["cp2", "cp3"]
    assert apply_retention(repository, KEY, 2) == ([], [])  # idempotent: nothing left to do
    assert apply_retention(repository, KEY, 0)[1] == ["cp2"]  # at least one checkpoint is always kept


def test_an_unreadable_retained_index_deletes_nothing_but_still_prunes(repository):
    commit_snapshot(repository, 1, {"a": "a1"})
    second = commit_snapshot(repository, 2, {"a": "a2"})
    repository.store.delete(second.index_blob_id)  # a retained index lost
    deleted, pruned = apply_retention(repository, KEY, 1)
    assert deleted == [] and pruned == ["cp1"]
    assert blob("a1") in present(repository)  # an orphan for gc, never deleted on incomplete knowledge


def test_an_expiring_snapshot_with_an_unreadable_index_leaves_its_blobs_to_gc(repository):
    first = commit_snapshot(repository, 1, {"a": "a1"})
    commit_snapshot(repository, 2, {"a": "a2"})
    repository.store.delete(first.index_blob_id)
    deleted, pruned = apply_retention(repository, KEY, 1)
    assert deleted == [first.index_blob_id] and pruned == ["cp1"]
    assert blob("a1") in present(repository)


def test_a_log_with_deltas_is_pruned_only_by_its_writer(repository):
    commit_snapshot(repository, 1, {"a": "a1"}, batch=0)
    commit_delta(repository, 2, 1)
    commit_snapshot(repository, 3, {"a": "a3"}, batch=1)
    commit_delta(repository, 4, 2)
    assert apply_retention(repository, KEY, 1) == ([], [])  # no commit point: another host leaves it alone
    assert len(repository.log.history(KEY)) == 4


def test_the_restore_time_init_makes_the_latest_snapshot_permanent_and_a_reader_prunes_nothing(repository, tmp_path):
    commit_snapshot(repository, 1, {"a": "a1"})
    commit_snapshot(repository, 2, {"a": "a2", "b": "b2"}, retain=1, ttl_ms=3_600_000)
    assert repository.store.has_ttl(blob("b2"))
    work = tmp_path / "work"
    work.mkdir()
    init_cleanup(repository, KEY, str(work))  # a reader (a restore on another host): no commit point
    assert not any(repository.store.has_ttl(b) for b in (blob("a2"), blob("b2"), index_id(2)))
    assert blob("a1") in present(repository) and len(repository.log.history(KEY)) == 2  # retention is a writer's
    assert last_completed(str(work)) == "cp2"


def test_a_writers_take_over_applies_the_retention_the_latest_snapshot_records(repository, tmp_path):
    from blobstate.commit.point import CommitPoint

    commit_snapshot(repository, 1, {"a": "a1"})
    commit_snapshot(repository, 2, {"a": "a2", "b": "b2"}, retain=1, ttl_ms=3_600_000)
    with StoreSession(KEY, str(tmp_path / "work")) as session:
        init_cleanup(repository, KEY, session.work_dir,
                     commit_point=CommitPoint(session, repository, append_resolve_s=1.0))
    assert present(repository) == {blob("a2"), blob("b2")}  # snapshot 1 left retention (the writer recorded 1)
    assert [cp.checkpoint_id for cp in repository.log.history(KEY)] == ["cp2"]


def test_the_restore_time_init_of_an_older_writer_prunes_nothing(repository):
    commit_snapshot(repository, 1, {"a": "a1"})
    commit_snapshot(repository, 2, {"a": "a2"})  # no retention recorded
    init_cleanup(repository, KEY)
    assert len(repository.log.history(KEY)) == 2
    init_cleanup(repository, StoreKey("job", "0", "empty"))  # no checkpoint at all: nothing to do


def test_last_completed_is_remembered_atomically_and_a_damaged_file_reads_as_none(tmp_path):
    assert last_completed(str(tmp_path)) is None
    mark_completed(str(tmp_path), "cp9")
    assert last_completed(str(tmp_path)) == "cp9"
    assert os.listdir(tmp_path) == ["last-completed.json"]  # no temporary left behind
    (tmp_path / "last-completed.json").write_text("{not json")
    assert last_completed(str(tmp_path)) is None


def test_a_local_checkpoint_path_must_lie_in_the_work_directory(tmp_path):
    work = str(tmp_path / "work")
    inside = os.path.join(workdir.checkpoints_dir(work), "cp1")
    os.makedirs(inside)
    assert checked_local_path(work, inside) == inside
    for outside in (str(tmp_path), os.path.join(workdir.checkpoints_dir(work), "cp1", "deeper"), "/etc"):
        with pytest.raises(ForeignObjectError, match="refused"):
            checked_local_path(work, outside)
    os.symlink(str(tmp_path), os.path.join(workdir.checkpoints_dir(work), "link"))
    with pytest.raises(ForeignObjectError, match="symlink"):
        checked_local_path(work, os.path.join(workdir.checkpoints_dir(work), "link"))


def test_an_abort_deletes_what_the_commit_created_except_what_a_retained_snapshot_references(repository, tmp_path):
    commit_snapshot(repository, 1, {"a": "shared"})
    work = str(tmp_path / "work")
    local = os.path.join(workdir.checkpoints_dir(work), "cp2")
    os.makedirs(local)
    planned = (blob("shared"), blob("new"), blob("never-uploaded"))
    repository.store.put(PutRequest(blob("new"), b"new", 60_000))
    with StoreSession(KEY, work) as session:
        for event in (ev.CommitStarted("cp2", 1, str(KEY), 1), ev.LocalCheckpointCreated("cp2", 2, local),
                      ev.UploadsPlanned("cp2", 3, planned, index_id(2))):
            session.record(event)
        state = session.states()["cp2"]
        deleted = CleanupExecutor(session, repository, retain=3).abort(state, "test")
        assert sorted(deleted) == sorted([blob("new"), blob("never-uploaded"), index_id(2)])
        assert present(repository) == {blob("shared")}
        assert not os.path.exists(local)
        assert "cp2" not in session.states()  # aborted, then compacted out of the journal


def test_an_abort_refuses_a_commit_the_log_holds_and_ids_of_another_store(repository, tmp_path):
    committed = commit_snapshot(repository, 1, {"a": "a1"})
    with StoreSession(KEY, str(tmp_path / "work")) as session:
        session.record(ev.CommitStarted("cp1", 1, str(KEY), 0))
        session.record(ev.UploadsPlanned("cp1", 2, (blob("a1"),), committed.index_blob_id))
        executor = CleanupExecutor(session, repository, retain=3)
        with pytest.raises(StorageError, match="the checkpoint log has it"):
            executor.abort(session.states()["cp1"], "test")
        session.record(ev.CommitStarted("x", 1, str(KEY), 1))
        session.record(ev.UploadsPlanned("x", 2, ("job/0/other/blobs/" + "0" * 32,), ""))
        with pytest.raises(ForeignObjectError):
            executor.abort(session.states()["x"], "test")
    assert blob("a1") in present(repository)
