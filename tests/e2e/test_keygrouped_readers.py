"""The readers of a key-grouped partitioned store show the user's keys (issue 42): every stored key is its key
group's two bytes then rocksdict's encoding of the user key (``blobstate.spark.partitioned.executor.keygrouped``),
and ``blobstate.read_state``, ``blobstate.read_changes``, ``blobstate state dump`` / ``changes`` / ``get`` strip
the prefix, as Spark's ``read_state`` does (``tests/e2e/test_bench_maintenance_smoke.py`` reads one on Spark).
A group written with real changelogs by the group engine, read back from the repository alone."""

from __future__ import annotations

import json

import pytest

from blobstate import api
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model import changelog
from blobstate.model.keygroups import key_group_range, prefix
from blobstate.model.records import StoreKey
from blobstate.restoring import entries
from blobstate.worker import open_repository, stage_changelog

KEY = StoreKey("flights", "group", "routes")
K, N, TTL = 16, 2, 600_000
USER = {"JFK-LAX": 3, "EWR-SFO": 5, "LGA-ORD": 7, 42: 1}


def _group_of(key) -> int:  # any fixed spread works for a reader: it never rehashes
    return sum(entries.encode(key)) % K


def _stored(key) -> bytes:
    return prefix(_group_of(key)) + entries.encode(key)


def _lines(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture
def grouped(tmp_path):
    """Batch 0 puts USER, batch 1 deletes 42 and bumps JFK-LAX; each key in the partition whose range holds it."""
    url = f"file://{tmp_path}/repo"
    repo = open_repository(url, create=True)
    try:
        with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "work"), ttl_ms=TTL) as owner:
            groups = GroupCommitter(owner, num_partitions=N, key_groups=K)
            for batch, ops in ((0, [(changelog.PUT, k, v) for k, v in USER.items()]),
                               (1, [(changelog.DELETE, 42, None), (changelog.PUT, "JFK-LAX", 4)])):
                parts = []
                for p in range(N):
                    mine = [(op, _stored(k), v) for op, k, v in ops if _group_of(k) in key_group_range(K, N, p)]
                    parts.append(stage_changelog(repo, KEY, partition=p, batch_id=batch, data=changelog.encode(mine),
                                                 ttl_ms=TTL))
                groups.commit(parts, batch_id=batch)
    finally:
        repo.close()
    return url


def test_read_state_of_a_key_grouped_store_gives_user_keys(grouped):
    state = dict(api.read_state(repo=grouped, job="flights", store="routes"))
    assert state == {"JFK-LAX": 4, "EWR-SFO": 5, "LGA-ORD": 7}
    assert dict(api.read_state(repo=grouped, job="flights", store="routes", batch_id=0)) == USER


def test_read_changes_of_a_key_grouped_store_gives_user_keys(grouped):
    found = [(c.batch_id, c.op, c.key, c.value) for c in api.read_changes(repo=grouped, job="flights", store="routes")]
    assert sorted(found, key=repr) == sorted([(0, "put", k, v) for k, v in USER.items()] +
                                             [(1, "delete", 42, None), (1, "put", "JFK-LAX", 4)], key=repr)


def test_state_dump_changes_and_get_show_user_keys(cli, grouped):
    dumped = cli("state", "dump", "--repo", grouped, "--job", "flights", "--store", "routes", "--format", "jsonl")
    assert dumped.returncode == 0, dumped.stderr
    assert {r["key"]: r["value"] for r in _lines(dumped)} == {"JFK-LAX": 4, "EWR-SFO": 5, "LGA-ORD": 7}
    changed = cli("state", "changes", "--repo", grouped, "--job", "flights", "--store", "routes", "--format", "jsonl")
    assert changed.returncode == 0, changed.stderr
    assert {r["key"] for r in _lines(changed)} == set(USER)
    got = cli("state", "get", "EWR-SFO", "--repo", grouped, "--job", "flights", "--store", "routes", "--json")
    assert got.returncode == 0, got.stderr
    assert got.json()["value"] == 5


def test_list_shows_the_key_groups_and_the_group_that_regrouped(cli, tmp_path):
    """Two group records of 2 partitions, then one of 3 (a rescale at restart's first group): ``blobstate list``
    names the key groups of each, and of the third, that it regrouped 2 -> 3."""
    url = f"file://{tmp_path}/repo"
    repo = open_repository(url, create=True)
    try:
        with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "work"), ttl_ms=TTL) as owner:
            for batch, n in ((0, 2), (1, 2), (2, 3)):
                parts = [stage_changelog(repo, KEY, partition=p, batch_id=batch, ttl_ms=TTL,
                                         data=changelog.encode([(changelog.PUT, _stored(f"k{p}"), batch)]))
                         for p in range(n)]
                GroupCommitter(owner, num_partitions=n, key_groups=K).commit(parts, batch_id=batch)
    finally:
        repo.close()
    listed = cli("list", "--repo", url, "--job", "flights", "--store", "routes", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = listed.json()
    rows = rows if isinstance(rows, list) else rows["checkpoints"]
    assert [(r["partitions"], r.get("keyGroups"), r.get("regroupedFrom")) for r in rows] == \
        [(2, K, None), (2, K, None), (3, K, 2)]
    text = cli("list", "--repo", url, "--job", "flights", "--store", "routes")
    assert text.returncode == 0, text.stderr
    assert "regrouped 2 -> 3" in text.stdout and f"{K} key groups" in text.stdout, text.stdout
