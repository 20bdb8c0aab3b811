"""Issue 31: every partition of a partitioned store restored in one process (``restore --all-partitions``,
``blobstate.restore_partitions``), partitions in parallel, each exactly what ``restore --partition P`` gives, with
each partition's and the group's throughput."""

from __future__ import annotations

import os
import re
import sys

import pytest
from fixtures_core import read_all

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import blobstate  # noqa: E402

KEY = ["--job", "bench", "--task", "group", "--store", "partitioned"]


def _group(tmp_path, partitions=3):
    from bench import partitioned_restore

    work = tmp_path / "states"
    work.mkdir()
    single, parts = partitioned_restore.write_states(str(work), size_bytes=600_000, keys=600, partitions=partitions)
    repo = "file://" + str(tmp_path / "repo")
    partitioned_restore.back_up(repo, str(work), single, parts)
    return repo, parts


def test_every_partition_is_restored_in_one_process_into_its_own_directory(tmp_path, cli):
    repo, parts = _group(tmp_path)
    dest = tmp_path / "dest"
    r = cli("restore", dest, "--repo", repo, *KEY, "--all-partitions", "--json", "--max-concurrency", "3")
    assert r.returncode == 0, r.stderr
    doc = r.json()
    assert [row["partition"] for row in doc["partitions"]] == [0, 1, 2]
    for p, source in enumerate(parts):
        assert read_all(dest / str(p)) == read_all(source)  # what restore --partition P gives
        assert doc["partitions"][p]["destination"] == str(dest / str(p))
        assert doc["partitions"][p]["throughputMBps"] > 0
    assert doc["bytesTotal"] == sum(row["bytesTotal"] for row in doc["partitions"]) and doc["throughputMBps"] > 0
    again = cli("restore", dest, "--repo", repo, *KEY, "--all-partitions")  # restored here: no --force needed
    assert again.returncode == 0, again.stderr
    assert re.search(r"\d (B|KiB|MiB|GiB)/s for the group", again.stderr), again.stderr  # IEC, as every size
    assert "0 files downloaded" in again.stderr
    one = cli("restore", tmp_path / "one" / "1", "--repo", repo, *KEY, "--partition", "1", "--json")
    assert one.json()["bytesTotal"] == doc["partitions"][1]["bytesTotal"]


def test_all_partitions_is_refused_for_a_store_that_is_not_partitioned_and_with_one_partition(tmp_path, cli):
    repo, _ = _group(tmp_path, partitions=2)
    single = cli("restore", tmp_path / "d", "--repo", repo, "--job", "bench", "--store", "single",
                 "--all-partitions")
    assert single.returncode == 5 and "not a partitioned store" in single.stderr
    both = cli("restore", tmp_path / "d", "--repo", repo, *KEY, "--all-partitions", "--partition", "1")
    assert both.returncode == 2
    picked = blobstate.restore_partitions(str(tmp_path / "api"), repo=repo, job="bench", task="group",
                                          store="partitioned", partitions=[1], work_base=str(tmp_path / "w"))
    assert sorted(picked.partitions) == [1] and os.listdir(tmp_path / "api") == ["1"]


def test_an_encrypted_group_is_restored_in_one_process_and_kept_files_are_trusted_as_verify_kept_says(
        tmp_path, monkeypatch):
    """restore_partitions and --verify-kept read through the repository's codec: on an encrypted repository the
    group restores exactly, a missing file of a partition is downloaded and decrypted again, the kept files are
    trusted as each mode says, and verify and list of the whole repository open the sealed records."""
    key_file = tmp_path / "k.key"
    key_file.write_text(os.urandom(32).hex())
    key_file.chmod(0o600)
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(key_file))
    repo = "file://" + str(tmp_path / "repo")
    assert blobstate.init(repo=repo, encrypt=True).encryption is not None
    _, parts = _group(tmp_path, partitions=2)  # written through the key the environment names
    dest, work = tmp_path / "dest", str(tmp_path / "host")
    args = dict(repo=repo, job="bench", task="group", store="partitioned", work_base=work)
    first = blobstate.restore_partitions(str(dest), **args)
    assert sorted(first.partitions) == [0, 1]
    for p, source in enumerate(parts):
        assert read_all(dest / str(p)) == read_all(source)
    missing = max((dest / "1").glob("*.sst"), key=lambda path: path.stat().st_size)
    missing.unlink()
    for mode, downloaded in (("identity", 1), ("full", 0), ("cache", 0)):
        again = blobstate.restore_partitions(str(dest), verify_kept=mode, **args)
        assert again.partitions[1].files_downloaded == downloaded, mode
        assert again.partitions[0].files_downloaded == 0 and again.partitions[0].files_kept > 0, mode
        assert [read_all(dest / str(p)) for p in (0, 1)] == [read_all(source) for source in parts], mode
    assert all(r.ok for r in blobstate.verify(repo=repo))  # every store, the records read at once and opened
    assert {str(s.checkpoint.store_key) for s in blobstate.describe_checkpoints(repo=repo)} == \
        {"bench/group/partitioned", "bench/0/single"}
    monkeypatch.delenv("BLOBSTATE_KEY_FILE")
    with pytest.raises(blobstate.EncryptionKeyError):
        blobstate.restore_partitions(str(tmp_path / "nokey"), **args)
