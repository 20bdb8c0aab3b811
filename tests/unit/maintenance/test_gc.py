"""``blobstate.maintenance.gc`` on a real ``file://`` repository: an expired upload nobody references is deleted,
an expired blob a retained snapshot references is healed (its TTL removed), an orphan only once older than the
TTL, nothing of what an open commit on this host planned, retention prunes records, a store whose indexes the log
does not know is skipped, and a dry run deletes nothing."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.local import workdir
from blobstate.maintenance.gc import collect, discover_keys
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository import host
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
LATER = layout.FAR_FUTURE_MS - 1  # every TTL has expired, every orphan is old
TTL = 60_000


@pytest.fixture
def repo(tmp_path):
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    data = tmp_path / "data"
    data.mkdir()
    for n in range(3):
        (data / "f.txt").write_text(f"version {n}" * 20)
        with StoreCommitter(KEY, repository, store_type="dir", work_dir=str(tmp_path / "w"), retain=3) as c:
            c.backup(str(data))
    yield repository
    repository.close()


def _ids(repo: Repository) -> set[str]:
    return {i.blob_id for i in repo.store.list(KEY.prefix)}


def test_an_expired_upload_nobody_references_is_deleted_and_a_dry_run_deletes_nothing(repo, tmp_path):
    abandoned = layout.new_blob_id(KEY)
    repo.store.put(PutRequest(abandoned, b"a crashed commit's upload", ttl_ms=1))
    assert discover_keys(repo) == [KEY]
    dry = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, dry_run=True, work_base=str(tmp_path / "base"))
    assert dry.expired_deleted == [abandoned] and abandoned in _ids(repo)
    report = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, work_base=str(tmp_path / "base"))
    assert report.expired_deleted == [abandoned] and abandoned not in _ids(repo)
    assert report.orphans_deleted == [] and report.skipped is None


def test_an_expired_blob_a_retained_snapshot_references_is_healed_not_deleted(repo, tmp_path):
    index_id = repo.log.latest(KEY).index_blob_id
    repo.store.put(PutRequest(index_id, repo.store.get_bytes(index_id), ttl_ms=1))  # as if its cleanup never ran
    report = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, work_base=str(tmp_path / "base"))
    assert report.expired_healed == [index_id] and report.expired_deleted == []
    assert index_id in _ids(repo) and not repo.store.has_ttl(index_id)


def test_an_orphan_goes_only_once_older_than_the_ttl_and_never_one_an_open_commit_planned(repo, tmp_path):
    orphan, planned = layout.new_blob_id(KEY), layout.new_blob_id(KEY)
    for blob_id in (orphan, planned):
        repo.store.put(PutRequest(blob_id, b"no ttl, no reference"))
    base = str(tmp_path / "base")
    work = host.work_dir(repo, KEY, base)
    os.makedirs(work)
    journal = Journal(os.path.join(work, workdir.JOURNAL))
    journal.open()
    journal.append(ev.CommitStarted("open-commit", 1, str(KEY), 3))
    journal.append(ev.UploadsPlanned("open-commit", 2, (planned,), ""))
    journal.close()
    young = collect(repo, KEY, now_ms=layout.now_ms(), ttl_ms=TTL, work_base=base)
    assert young.orphans_deleted == [] and {orphan, planned} <= _ids(repo)
    old = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, work_base=base)
    assert old.orphans_deleted == [orphan] and planned in _ids(repo) and orphan not in _ids(repo)


def test_retention_prunes_records_and_their_blobs_become_orphans(repo, tmp_path):
    first = repo.log.history(KEY)[0]
    report = collect(repo, KEY, now_ms=layout.now_ms(), ttl_ms=TTL, retain=1, work_base=str(tmp_path / "b"))
    assert len(report.checkpoints_pruned) == 2 and first.checkpoint_id in report.checkpoints_pruned
    assert [cp.generation for cp in repo.log.history(KEY)] == [3]
    later = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, retain=1, work_base=str(tmp_path / "b"))
    assert first.index_blob_id in later.orphans_deleted


def test_a_store_whose_indexes_the_log_does_not_know_is_skipped(tmp_path):
    with Repository.open(f"file://{tmp_path}/repo", create=True) as repo:
        index = layout.new_index_id(KEY)
        repo.store.put(PutRequest(index, b"{}"))
        report = collect(repo, KEY, now_ms=LATER, ttl_ms=TTL, work_base=str(tmp_path / "base"))
        assert report.skipped and "is --log right?" in report.skipped and index in _ids(repo)
