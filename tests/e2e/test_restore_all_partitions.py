"""Issue 31: every partition of a partitioned store restored in one process (``restore --all-partitions``,
``blobstate.restore_partitions``), partitions in parallel, each exactly what ``restore --partition P`` gives, with
each partition's and the group's throughput."""

from __future__ import annotations

import os
import sys

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
    assert "MB/s for the group" in again.stderr and "0 files downloaded" in again.stderr
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
