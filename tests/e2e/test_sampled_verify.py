"""``verify --read-data-subset`` (restic's ``check --read-data-subset``): ``n/t`` buckets read every blob exactly
once over ``1/t .. t/t``; a damaged blob is found by the subset holding it and by no other; ``x%`` is a seedable
random sample; metadata (records, indexes) is checked by every subset."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from blobstate import api
from blobstate.maintenance.verify import bucket_of
from blobstate.repository.repo import Repository
from blobstate.repository.retry import RetryingBlobStore

FILES = 40


@pytest.fixture
def reads(monkeypatch):
    """Blob ids read through the core's store (every backend's reads pass here), in order."""
    seen: list[str] = []
    original = RetryingBlobStore.get

    def get(self, blob_id, sink):  # noqa: ANN001, ANN202
        seen.append(blob_id)
        return original(self, blob_id, sink)

    monkeypatch.setattr(RetryingBlobStore, "get", get)
    return seen


def _store(tmp_path, url, **kw):
    src = tmp_path / "src"
    src.mkdir()
    for i in range(FILES):
        (src / f"f{i:02d}").write_bytes(bytes([i]) * (100 + i))
    api.backup(str(src), repo=url, store="s", store_type="dir", **kw)
    with Repository.open(url, create=False, **({"storage_options": kw["storage_options"]}
                                               if "storage_options" in kw else {})) as repo:
        key = repo.log.keys()[0]
        index = repo.read_index(repo.log.latest(key))
    return sorted(b.blob_id for _, f in index.files().items() for b in f.blobs)


@pytest.mark.parametrize("where", ["file", pytest.param("s3", marks=pytest.mark.slow)])
def test_the_buckets_read_every_blob_exactly_once(tmp_path, work_base, reads, where, request):
    options = {}
    url = f"file://{tmp_path}/repo"
    if where == "s3":
        target = request.getfixturevalue("s3_target")
        url, options = target.url, {"storage_options": target.storage_options}
    blobs = _store(tmp_path, url, **options)
    reads.clear()
    per_subset = []
    for n in (1, 2, 3):
        before = len(reads)
        (report,) = api.verify(repo=url, store="s", read_data_subset=f"{n}/3", **options)
        got = [b for b in reads[before:] if "/blobs/" in b]
        assert {bucket_of(b, 3) for b in got} <= {n - 1}
        assert report.files == len(got) and report.files_skipped == FILES - len(got)
        per_subset.append(got)
    assert all(per_subset), "a bucket of 40 random ids is empty: the rotation would read nothing"
    assert sorted(b for subset in per_subset for b in subset) == blobs  # each blob once, none twice
    assert not [b for b, n in Counter(b for subset in per_subset for b in subset).items() if n != 1]


def test_a_damaged_blob_is_found_by_its_subset_only_and_metadata_by_every_one(tmp_path, work_base, cli):
    url = f"file://{tmp_path}/repo"
    blobs = _store(tmp_path, url)
    victim = blobs[7]
    path = tmp_path / "repo" / victim
    data = path.read_bytes()
    path.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])  # same size, one byte changed
    holder = bucket_of(victim, 5) + 1
    for n in range(1, 6):
        (report,) = api.verify(repo=url, store="s", read_data_subset=f"{n}/5", raise_on_error=False)
        assert len(report.problems) == (n == holder), (n, report.problems)
    result = cli("verify", "--repo", url, "--store", "s", "--read-data-subset", f"{holder}/5", "--json")
    assert result.returncode == 3, result.stderr
    (report,) = json.loads(result.stdout)
    assert len(report["problems"]) == 1 and "CRC32C" in report["problems"][0]["message"]
    # a damaged index is metadata: every subset reads it and fails
    index = next((tmp_path / "repo").glob("*/*/*/indexes/*.json"))
    index.write_bytes(index.read_bytes().replace(b'"f00"', b'"g00"'))
    for n in (1, 2):
        (report,) = api.verify(repo=url, store="s", read_data_subset=f"{n}/5", raise_on_error=False)
        assert [f for f, _ in report.problems] == ["<index>"], report.problems


def test_a_percentage_is_a_seedable_random_sample(tmp_path, work_base, reads):
    url = f"file://{tmp_path}/repo"
    _store(tmp_path, url)
    picks = []
    for seed in (1, 1, 2):
        reads.clear()
        (report,) = api.verify(repo=url, store="s", read_data_subset="10%", seed=seed)
        assert report.files == FILES // 10 and report.files_skipped == FILES - FILES // 10
        picks.append(sorted(b for b in reads if "/blobs/" in b))
    assert picks[0] == picks[1] != picks[2]
    with pytest.raises(Exception, match="n/t"):
        api.verify(repo=url, store="s", read_data_subset="4/3")
