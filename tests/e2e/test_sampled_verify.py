"""``verify --read-data-subset`` (restic's ``check --read-data-subset``): ``n/t`` buckets read every blob exactly
once over ``1/t .. t/t``; a damaged blob is found by the subset holding it and by no other; ``x%`` is a seedable
random sample; metadata (records, indexes) is checked by every subset. The same on an encrypted repository (every
blob read through its codec, a damaged one failing authentication)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from blobstate import api
from blobstate.maintenance.verify import bucket_of
from blobstate.repository.repo import Repository
from blobstate.repository.retry import RetryingBlobStore

FILES = 40


@pytest.fixture
def encrypt(tmp_path, monkeypatch):
    """Make the next repository created encrypted (``BLOBSTATE_KEY_FILE`` for this test and its CLI runs)."""
    def use_a_key() -> None:
        key = tmp_path / "state.key"
        key.write_bytes(os.urandom(32))
        monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(key))

    return use_a_key


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


@pytest.mark.parametrize("where", ["file", "file-encrypted", pytest.param("s3", marks=pytest.mark.slow),
                                   pytest.param("azure", marks=pytest.mark.slow)])
def test_the_buckets_read_every_blob_exactly_once(tmp_path, work_base, reads, where, request, encrypt):
    options = {}
    url = f"file://{tmp_path}/repo"
    if where == "file-encrypted":
        encrypt()
    if where in ("s3", "azure"):
        target = request.getfixturevalue(f"{where}_target")
        url, options = target.url, {"storage_options": target.storage_options}
    blobs = _store(tmp_path, url, **options)
    with Repository.open(url, create=False, **options) as repo:
        assert (repo.cipher is not None) == (where == "file-encrypted")
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


def _flip(path) -> None:  # noqa: ANN001
    """Change the byte in the middle of the stored object at ``path`` (same size)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_damaged_blob_is_found_by_its_subset_only_and_metadata_by_every_one(tmp_path, work_base, cli, encrypt,
                                                                              encrypted):
    url = f"file://{tmp_path}/repo"
    if encrypted:
        encrypt()
    blobs = _store(tmp_path, url)
    victim = blobs[7]
    _flip(tmp_path / "repo" / victim)
    holder = bucket_of(victim, 5) + 1
    for n in range(1, 6):
        (report,) = api.verify(repo=url, store="s", read_data_subset=f"{n}/5", raise_on_error=False)
        assert len(report.problems) == (n == holder), (n, report.problems)
    result = cli("verify", "--repo", url, "--store", "s", "--read-data-subset", f"{holder}/5", "--json")
    assert result.returncode == 3, result.stderr
    (report,) = json.loads(result.stdout)
    assert len(report["problems"]) == 1
    assert ("does not authenticate" if encrypted else "CRC32C") in report["problems"][0]["message"]
    # a damaged index is metadata: every subset reads it and fails (stored compressed, and encrypted or not)
    _flip(next((tmp_path / "repo").glob("*/*/*/indexes/*.json")))
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
