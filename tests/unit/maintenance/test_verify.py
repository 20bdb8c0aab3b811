"""``blobstate.maintenance.verify`` on a real ``file://`` repository: every file of a snapshot read and checked, a
damaged or missing blob reported against its file (never raised until ``raise_for_reports``), a data subset reading
only the files it picks (restic's ``n/t`` buckets and ``x%``), and a delta's changelog checked too."""

from __future__ import annotations

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import ChecksumMismatch, ConfigurationError
from blobstate.maintenance.verify import DataSubset, bucket_of, chain_problems, raise_for_reports, verify_checkpoint
from blobstate.model import changelog, layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "files")
NAMES = [f"file-{n:02d}.txt" for n in range(12)]


@pytest.fixture
def repo(tmp_path):
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    data = tmp_path / "data"
    data.mkdir()
    for n, name in enumerate(NAMES):
        (data / name).write_text(f"content of file {n} " * (n + 1))
    with StoreCommitter(KEY, repository, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
        committer.backup(str(data))
    yield repository
    repository.close()


def _blob_of(repo: Repository, name: str) -> str:
    return repo.read_index(repo.log.latest(KEY)).files()[name].blobs[0].blob_id


def test_an_intact_snapshot_reads_every_file(repo):
    report = verify_checkpoint(repo, repo.log.latest(KEY))
    assert report.ok and report.files == len(NAMES) and report.files_skipped == 0
    assert report.bytes_read == sum(len(f"content of file {n} " * (n + 1)) for n in range(len(NAMES)))
    raise_for_reports([report])


def test_a_damaged_and_a_missing_blob_are_reported_against_their_files(repo):
    repo.store.put(PutRequest(_blob_of(repo, "file-03.txt"), b"tampered"))
    repo.store.delete(_blob_of(repo, "file-07.txt"))
    report = verify_checkpoint(repo, repo.log.latest(KEY))
    assert sorted(f for f, _ in report.problems) == ["file-03.txt", "file-07.txt"] and not report.ok
    with pytest.raises(ChecksumMismatch, match="verification failed for 2 files"):
        raise_for_reports([report])


def test_a_subset_reads_only_the_files_it_picks(repo):
    first_blobs = [_blob_of(repo, name) for name in NAMES]
    bucket = DataSubset.parse("1/3")
    assert (bucket.bucket, bucket.buckets, bucket.describe()) == (1, 3, "1/3")
    picked = bucket.choose(first_blobs)
    assert picked == {b for b in first_blobs if bucket_of(b, 3) == 0}
    report = verify_checkpoint(repo, repo.log.latest(KEY), bucket)
    assert report.files == len(picked) and report.files_skipped == len(NAMES) - len(picked)
    half = DataSubset.parse("50%", seed=7)
    assert len(half.choose(first_blobs)) == 6 and half.choose(first_blobs) == half.choose(first_blobs)
    every = set()
    for n in range(1, 4):
        every |= DataSubset.parse(f"{n}/3").choose(first_blobs)
    assert every == set(first_blobs)  # the buckets split the files between them


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/300", "0%", "101%", "half", "1/"])
def test_a_bad_subset_is_a_configuration_error(text):
    with pytest.raises(ConfigurationError, match="use n/t"):
        DataSubset.parse(text)


def test_a_foreign_name_still_falls_in_one_fixed_bucket():
    assert bucket_of("job/0/s/blobs/ff" + "0" * 30, 16) == 0xFF % 16
    assert bucket_of("not-hex", 5) == bucket_of("not-hex", 5) < 5


def test_a_deltas_changelog_is_checked_and_a_store_without_deltas_has_no_chain_problem(repo, tmp_path):
    assert chain_problems(repo.log.history(KEY)) == []
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "w2")) as committer:
        ops = changelog.encode([(changelog.PUT, f"k{n}", "v" * 200) for n in range(200)])
        cp = DeltaCommitter(committer, inline_max_bytes=0).commit_changelog(ops, batch_id=0).checkpoint
    assert verify_checkpoint(repo, cp).ok
    repo.store.put(PutRequest(cp.changelog_blob_id, b"garbage"))
    assert not verify_checkpoint(repo, cp).ok
    assert layout.is_blob_of(KEY, cp.changelog_blob_id)
