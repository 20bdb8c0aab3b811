"""Issue 43 items 5 and 7, the operator's view of partitioned stores. Item 5: a partitioned store (group
checkpoints, task ``group``) is found by the CLI's reading verbs without ``--task``, as the Python readers find it:
one function for both (``blobstate.entry.find_store``); a name found under both tasks, or under neither, is an
error naming the stores there are. Item 7: ``gc --dry-run`` says what the writer keeps per partition. A real
group of two RocksDB changelog partitions committed through ``GroupCommitter``, on ``file://``; the CLI in this
process."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from rocksdict import AccessType, Rdict

import blobstate
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model import changelog
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.model.records import StoreKey
from blobstate.worker import stage_changelog

KEY = StoreKey("j", "group", "g")


def cli(*args: str) -> SimpleNamespace:
    """``blobstate ARGS`` in this process (click's runner): exit code, stdout, stderr."""
    from click.testing import CliRunner

    from blobstate.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args])
    return SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)


@pytest.fixture
def group_repo(tmp_path) -> str:
    """A repository holding one partitioned store ``j/group/g``: 2 partitions, 3 batches of deltas."""
    repo = f"file://{tmp_path}/repo"
    with StoreCommitter(KEY, repo, work_dir=str(tmp_path / "writer-work")) as committer:
        groups = GroupCommitter(committer, num_partitions=2)
        for batch in range(3):
            entries = [stage_changelog(committer.repo, KEY, partition=p, batch_id=batch, ttl_ms=DEFAULT_TTL_MS,
                                       data=changelog.encode([(changelog.PUT, f"p{p}-k{batch}", batch)]))
                       for p in (0, 1)]
            groups.commit(entries, batch_id=batch, query_id="q")
    return repo


def _keys(path) -> list[str]:
    db = Rdict(str(path), access_type=AccessType.read_only())
    try:
        return list(db.keys())
    finally:
        db.close()


def test_the_cli_finds_a_partitioned_store_without_task_as_the_python_reader_does(group_repo, tmp_path):
    """``restore``, ``restore --all-partitions``, ``verify``, ``list``, ``stats`` and ``state`` on ``--job j --store
    g`` with no ``--task``: each finds ``j/group/g`` (on 593d614 they looked for ``j/0/g`` and said
    NothingToRestore, "the store name defaults to the directory's name")."""
    assert sorted(k for k, _ in blobstate.read_state(repo=group_repo, job="j", store="g")) == [
        f"p{p}-k{b}" for p in (0, 1) for b in range(3)]
    where = ("--repo", group_repo, "--job", "j", "--store", "g")
    one = cli("restore", tmp_path / "p1", *where, "--partition", "1", "--work-dir", tmp_path / "wd")
    assert one.returncode == 0, one.stderr
    assert "restored j/group/g partition 1" in one.stderr and _keys(tmp_path / "p1") == ["p1-k0", "p1-k1", "p1-k2"]
    every = cli("restore", tmp_path / "all", *where, "--all-partitions", "--work-dir", tmp_path / "wd")
    assert every.returncode == 0, every.stderr
    assert "restored 2 partitions of j/group/g" in every.stderr
    assert _keys(tmp_path / "all" / "0") == ["p0-k0", "p0-k1", "p0-k2"]
    for verb in (("verify",), ("list",), ("stats",)):
        found = cli(*verb, *where, "--json")
        assert found.returncode == 0, (verb, found.stderr)
        assert "j/group/g" in found.stdout, (verb, found.stdout)
    dump = cli("state", "dump", *where)
    assert dump.returncode == 0, dump.stderr
    assert sorted(json.loads(line)["key"] for line in dump.stdout.splitlines()) == [
        f"p{p}-k{b}" for p in (0, 1) for b in range(3)]
    got = cli("state", "get", "p1-k2", *where, "--json")
    assert got.returncode == 0 and json.loads(got.stdout)["value"] == 2, got.stderr
    changes = cli("state", "changes", *where, "--from", "2")
    assert changes.returncode == 0 and len(changes.stdout.splitlines()) == 2, changes.stderr


def test_a_store_name_under_both_tasks_or_neither_is_an_error_naming_the_stores(group_repo, tmp_path):
    """A driver store of the same name beside the partitioned one: the CLI and the Python reader refuse alike
    (exit 2) naming both and ``--task``; ``--task`` chooses. A name under neither task: exit 5 naming the stores
    the log holds, not "NothingToRestore" about directory names."""
    source = tmp_path / "driver-db"
    db = Rdict(str(source))
    db["d"] = "1"
    db.close()
    blobstate.backup(str(source), repo=group_repo, job="j", store="g", store_type="rocksdb",
                     work_base=str(tmp_path / "wd"))
    where = ("--repo", group_repo, "--job", "j", "--store", "g")
    both = cli("restore", tmp_path / "x", *where, "--partition", "0", "--work-dir", tmp_path / "wd")
    assert both.returncode == 2, both.stderr
    assert "j/0/g" in both.stderr and "j/group/g" in both.stderr and "--task" in both.stderr
    with pytest.raises(blobstate.ConfigurationError, match="j/0/g .*j/group/g"):
        list(blobstate.read_state(repo=group_repo, job="j", store="g"))
    chosen = cli("restore", tmp_path / "x", *where, "--task", "group", "--partition", "0", "--work-dir",
                 tmp_path / "wd")
    assert chosen.returncode == 0, chosen.stderr
    for verb in (("restore", tmp_path / "y"), ("verify",), ("state", "dump")):
        missing = cli(*verb, "--repo", group_repo, "--job", "j", "--store", "nope", "--work-dir", tmp_path / "wd") \
            if verb[0] == "restore" else cli(*verb, "--repo", group_repo, "--job", "j", "--store", "nope")
        assert missing.returncode == 5, (verb, missing.stderr)
        assert "stores with checkpoints: j/0/g, j/group/g" in missing.stderr, (verb, missing.stderr)
        assert "directory" not in missing.stderr, (verb, missing.stderr)


def test_gc_dry_run_of_a_partitioned_store_says_what_its_writer_keeps_per_partition(group_repo):
    """Issue 43 item 7: a partitioned store's retention is its writer's (``retain``, 3 snapshots per partition by
    default, and the deltas after them), recorded nowhere gc reads: the dry run says so, per partition, and that gc
    itself keeps every checkpoint (it said "none recorded: every checkpoint is kept" on 593d614)."""
    text = cli("gc", "--repo", group_repo, "--job", "j", "--store", "g", "--task", "group", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "every checkpoint is kept" not in text.stdout
    assert "partitioned store (2 partitions)" in text.stdout, text.stdout
    assert "the last 3 snapshots of each partition and the deltas after them" in text.stdout, text.stdout
    doc = json.loads(cli("gc", "--repo", group_repo, "--job", "j", "--store", "g", "--task", "group", "--dry-run",
                         "--json").stdout)
    assert doc[0]["partitions"] == 2 and doc[0]["retention"] is None and doc[0]["checkpointsPruned"] == []
    assert "3 snapshots of each partition" in doc[0]["retentionNote"]
