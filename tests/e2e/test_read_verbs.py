"""The read verbs from the CLI, as an operator meets them (issues 29 and 27): `diff` compares what a snapshot holds,
never ctime; a wrong `--store` is one error everywhere; `journal show` of a healthy store; `restore --dry-run` into
any directory; the restore line names the batch and deltas; partitioned (group) stores in `verify`, `ls`, `diff`,
`list`, `stats`; and a restore never deletes the repository, the log or the work directory."""

from __future__ import annotations

import json
import os

import pytest
from rocksdict import Rdict

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.group import GroupCommitter
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.backends import open_local_store
from blobstate.repository.repo import Repository
from blobstate.worker import stage_changelog, stage_snapshot

GROUP = StoreKey("flights", "group", "routes")
N = 4
TTL = 600_000


def write(path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)


# -- 29.3: diff ----------------------------------------------------------------------------------------------------

def test_diff_of_a_dir_store_counts_only_what_changed_never_ctime(cli, tmp_path):
    """50 files; then one changed, one added, one removed, and every other file's ctime moved (chmod to the same
    mode, a fresh link count): 1 changed, 1 added, 1 removed, 48 unchanged."""
    repo, store = tmp_path / "repo", tmp_path / "counts"
    write(store, {f"f{i:02d}.txt": f"file {i}\n".encode() * 10 for i in range(50)})
    assert cli("backup", store, "--repo", repo, "--store-type", "dir", "-q").returncode == 0
    ctimes = {p.name: os.stat(p).st_ctime_ns for p in store.iterdir()}
    for p in store.iterdir():
        os.chmod(p, os.stat(p).st_mode)  # ctime moves, content, mode and mtime do not
        os.link(p, tmp_path / f"link-{p.name}")
    before = os.stat(store / "f00.txt").st_mtime_ns
    (store / "f01.txt").write_bytes(b"changed\n")
    (store / "f02.txt").unlink()
    (store / "new.txt").write_bytes(b"new\n")
    assert os.stat(store / "f00.txt").st_mtime_ns == before
    assert all(os.stat(store / name).st_ctime_ns > ctime for name, ctime in ctimes.items() if name != "f02.txt")
    assert cli("backup", store, "--repo", repo, "--store-type", "dir", "-q").returncode == 0
    result = cli("diff", "1", "--repo", repo, "--store", "counts", "--json")
    assert result.returncode == 0, result.stderr
    doc = result.json()
    assert [c["path"] for c in doc["changed"]] == ["f01.txt"]
    assert [a["path"] for a in doc["added"]] == ["new.txt"]
    assert [r["path"] for r in doc["removed"]] == ["f02.txt"]
    assert doc["unchanged"] == 48
    text = cli("diff", "1", "--repo", repo, "--store", "counts")
    assert "1 added, 1 removed, 1 changed, 48 unchanged" in text.stdout, text.stdout
    # a mode change alone is a change of what the snapshot holds
    os.chmod(store / "f03.txt", 0o600)
    assert cli("backup", store, "--repo", repo, "--store-type", "dir", "-q").returncode == 0
    doc = cli("diff", "2", "--repo", repo, "--store", "counts", "--json").json()
    assert [c["path"] for c in doc["changed"]] == ["f03.txt"] and doc["unchanged"] == 49


# -- 29.6 / 29.7: consistent read verbs, dry run, the restore line ---------------------------------------------------

@pytest.fixture
def plain(cli, tmp_path):
    repo, store = tmp_path / "repo", tmp_path / "counts"
    write(store, {"a.txt": b"a" * 100})
    assert cli("backup", store, "--repo", repo, "-q").returncode == 0
    return repo


def test_a_wrong_store_is_the_same_error_in_every_read_verb(cli, plain, tmp_path):
    wrong = ["--repo", plain, "--store", "cuonts"]
    calls = {"list": ["list", *wrong], "ls": ["ls", *wrong], "diff": ["diff", "1", *wrong],
             "stats": ["stats", *wrong], "verify": ["verify", *wrong],
             "restore": ["restore", tmp_path / "out", *wrong], "journal show": ["journal", "show", *wrong]}
    for verb, args in calls.items():
        result = cli(*args)
        assert result.returncode == 5, (verb, result.returncode, result.stderr)
        assert "no checkpoint for default/0/cuonts" in result.stderr, (verb, result.stderr)
        assert "stores with checkpoints: default/0/counts" in result.stderr, (verb, result.stderr)
    assert not (tmp_path / "out").exists()


def test_journal_show_of_a_healthy_store_says_no_open_commit(cli, plain):
    result = cli("journal", "show", "--repo", plain, "--store", "counts")
    assert result.returncode == 0, result.stderr
    assert "no open commit" in result.stderr


def test_restore_dry_run_previews_into_a_non_empty_directory_and_messages_speak_cli(cli, plain, tmp_path):
    dest = tmp_path / "busy"
    write(dest, {"mine.txt": b"keep me"})
    preview = cli("restore", dest, "--repo", plain, "--store", "counts", "--dry-run")
    assert preview.returncode == 0, preview.stderr
    assert preview.stdout.splitlines() == ["reuse a.txt", "remove mine.txt"]  # this host's local checkpoint
    assert "--force" in preview.stderr  # the preview says a real restore needs it
    assert (dest / "mine.txt").read_bytes() == b"keep me" and not (dest / "a.txt").exists()
    refused = cli("restore", dest, "--repo", plain, "--store", "counts")
    assert refused.returncode == 2
    assert "(1 entry: 'mine.txt')" in refused.stderr and "--force" in refused.stderr, refused.stderr
    assert "force=True" not in refused.stderr


@pytest.fixture
def target(repo_target):
    return repo_target


def _rocksdb_checkpoint(tmp_path, name: str, rows: int) -> str:
    db = Rdict(str(tmp_path / f"{name}-db"))
    try:
        for i in range(rows):
            db[f"route/{name}/{i}"] = i
        db.flush(True)
        open_local_store("rocksdb").create_checkpoint(db, str(tmp_path / f"{name}-ck"))
    finally:
        db.close()
    return str(tmp_path / f"{name}-ck")


@pytest.fixture
def grouped(target, tmp_path, cli):
    """A repository with a partitioned store (group records: snapshots of batch 0 in every partition, then the
    deltas of batches 1 and 2, then snapshots of batch 2 of partitions 0 and 1 that reuse batch 0's files) and a
    plain dir store beside it."""
    repo = Repository.open(target.url, storage_options=target.options, create=True)
    with StoreCommitter(GROUP, repo, store_type="rocksdb", work_dir=str(tmp_path / "gw"), ttl_ms=TTL) as committer:
        group = GroupCommitter(committer, num_partitions=N)
        staged = [stage_snapshot(repo, GROUP, partition=p, batch_id=0, previous=None, ttl_ms=TTL,
                                 checkpoint_dir=_rocksdb_checkpoint(tmp_path, f"p{p}", 10 + p)) for p in range(N)]
        first = group.commit([s.entry for s in staged], batch_id=0, query_id="q",
                             new_blob_ids=[b for s in staged for b in s.new_blob_ids])
        for batch in (1, 2):
            group.commit([stage_changelog(repo, GROUP, partition=p, batch_id=batch, ttl_ms=TTL, data=changelog.encode(
                [(changelog.PUT, f"b{batch}", batch)])) for p in range(N)], batch_id=batch, query_id="q")
        previous = {p.partition: p for p in first.expand()}
        again = [stage_snapshot(repo, GROUP, partition=p, batch_id=2, previous=previous[p], ttl_ms=TTL,
                                checkpoint_dir=str(tmp_path / f"p{p}-ck")) for p in range(2)]
        group.commit([s.entry for s in again], batch_id=2, query_id="q",
                     new_blob_ids=[b for s in again for b in s.new_blob_ids])
    repo.close()
    plain = tmp_path / "counts"
    write(plain, {"a.txt": b"a" * 100})
    assert cli("backup", plain, "--repo", target.url, "-q", env=target.env).returncode == 0
    return target


def test_verify_checks_every_partition_of_a_group_store_and_goes_on_to_the_others(cli, grouped):
    result = cli("verify", "--repo", grouped.url, "--json", env=grouped.env)
    assert result.returncode == 0, result.stderr
    rows = result.json()
    group_rows = [r for r in rows if r["store"] == str(GROUP)]
    assert sorted(r["partition"] for r in group_rows) == list(range(N)), rows
    assert all(r["ok"] and r["files"] > 0 for r in group_rows)
    assert [r for r in rows if r["store"] == "default/0/counts"][0]["ok"]
    text = cli("verify", "--repo", grouped.url, "--store", GROUP.store, "--job", GROUP.job, "--task", GROUP.task,
               env=grouped.env)
    assert text.returncode == 0 and text.stdout.count("partition") == N, text.stdout
    every = cli("verify", "--repo", grouped.url, "--all", "--json", env=grouped.env)
    assert every.returncode == 0 and len([r for r in every.json() if r["store"] == str(GROUP)]) == 4
    repo = Repository.open(grouped.url, storage_options=grouped.options)
    lost = next(cp for cp in repo.log.history(GROUP) if cp.batch_id == 2).entry(3).blob_id  # batch 2's delta
    repo.store.delete(lost)
    repo.close()
    damaged = cli("verify", "--repo", grouped.url, "--json", env=grouped.env)
    assert damaged.returncode == 3, damaged.stderr
    rows = {(r["store"], r.get("partition")): r for r in damaged.json()}
    assert not rows[(str(GROUP), 3)]["ok"] and lost in json.dumps(rows[(str(GROUP), 3)]["problems"])
    assert all(rows[(str(GROUP), p)]["ok"] for p in range(3)) and rows[("default/0/counts", None)]["ok"]


def test_ls_diff_list_and_stats_of_a_group_store(cli, grouped):
    args = grouped.args(GROUP)
    refused = cli("ls", *args, env=grouped.env)
    assert refused.returncode == 5 and "--partition (0..3)" in refused.stderr, refused.stderr  # as restore says
    listing = cli("ls", *args, "--partition", "1", "--json", env=grouped.env)
    assert listing.returncode == 0, listing.stderr
    doc = listing.json()
    assert doc["partition"] == 1 and doc["batchId"] == 2 and "CURRENT" in {f["path"] for f in doc["files"]}
    older = cli("ls", *args, "--partition", "3", "--json", env=grouped.env).json()
    assert older["batchId"] == 0 and older["deltasAfter"] == 2
    changed = cli("diff", "1", "latest", *args, "--partition", "0", "--json", env=grouped.env)
    assert changed.returncode == 0, changed.stderr
    d = changed.json()
    assert d["unchanged"] > 0 and d["added"] == d["removed"] == d["changed"] == [] and d["blobsNew"] == 0
    assert cli("diff", "1", *args, env=grouped.env).returncode == 5

    rows = cli("list", *args, "--json", env=grouped.env).json()
    assert [r["partitionsCommitted"] for r in rows] == [4, 4, 4, 2] and {r["partitions"] for r in rows} == {4}
    assert rows[0]["filesTotal"] > 0 and rows[0]["bytesTotal"] > 0 and rows[1]["filesTotal"] is None
    text = cli("list", *args, env=grouped.env).stdout
    assert "?" not in text and "4/4" in text and "2/4" in text, text

    (stats,) = cli("stats", *args, "--json", env=grouped.env).json()
    assert stats["partitions"] == N
    latest = stats["latest"]
    assert latest["filesTotal"] == sum(len(cli("ls", *args, "--partition", str(p), "--json", env=grouped.env)
                                           .json()["files"]) for p in range(N))
    assert stats["dedupRatio"] > 1.0, stats  # batch 2's snapshots reuse every file of batch 0's
    assert stats["changelogBytes"] > 0
    shown = cli("stats", *args, env=grouped.env).stdout
    assert "?" not in shown and "4 partitions" in shown, shown


def test_the_restore_line_names_the_batch_reached_and_the_deltas_applied(cli, grouped, tmp_path):
    result = cli("restore", tmp_path / "p3", *grouped.args(GROUP), "--partition", "3", env=grouped.env)
    assert result.returncode == 0, result.stderr
    assert "batch 2" in result.stderr and "2 deltas applied" in result.stderr and "partition 3" in result.stderr, \
        result.stderr


# -- 27.5: a restore never deletes the repository, the log or the work directory -------------------------------------

@pytest.mark.parametrize("inside", ["repository", "log", "work directory"])
def test_a_forced_restore_into_a_directory_holding_the_repository_log_or_work_dir_is_refused(cli, tmp_path,
                                                                                               inside):
    home = tmp_path / "home"
    store = tmp_path / "counts"
    write(store, {"a.txt": b"a" * 100})
    repo = home / "repo" if inside == "repository" else tmp_path / "repo"
    log = ["--log", f"sqlite:///{home / 'log.db'}"] if inside == "log" else []
    work = home / "work" if inside == "work directory" else tmp_path / "work"
    home.mkdir()
    assert cli("backup", store, "--repo", repo, *log, "-q", work=work).returncode == 0
    before = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert before
    own = list(home.glob("work/*/default/0/counts")) if inside == "work directory" else []
    assert len(own) == (inside == "work directory")  # the store's own work directory
    deeper = {"repository": [home / "repo" / "default"], "work directory": [*own, *(d / "x" for d in own)],
              "log": []}[inside]
    for dest in (home, *deeper):
        for extra in (["--force"], ["--dry-run"], []):
            result = cli("restore", dest, "--repo", repo, *log, "--store", "counts", *extra, work=work)
            assert result.returncode == 2, (dest, extra, result.stderr)
            assert "UnsafeDestination" in result.stderr and inside in result.stderr, result.stderr
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == before
    assert cli("restore", tmp_path / "fine", "--repo", repo, *log, "--store", "counts", work=work).returncode == 0
    if inside == "work directory":  # beside the stores' own work directories, under the base: nothing is touched
        beside = cli("restore", home / "work" / "mystore", "--repo", repo, "--store", "counts", work=work)
        assert beside.returncode == 0, beside.stderr


def test_restore_json_still_carries_the_chain(cli, grouped, tmp_path):
    doc = json.loads(cli("restore", tmp_path / "p0", *grouped.args(GROUP), "--partition", "2", "--json",
                         env=grouped.env).stdout)
    assert doc["deltasApplied"] == 2 and doc["lastBatchId"] == 2 and doc["partition"] == 2
