"""Regression tests for crash-safety and data-loss bugs found in review: each scenario once lost data, left garbage
or wedged a committer."""

from __future__ import annotations

import os
import time

import pytest
from fixtures_core import read_all, repo_files, write_keys

import blobstate
from blobstate.commit.backup import StoreCommitter
from blobstate.errors import AppendOutcomeUnknown, CorruptJournalError, FencedError
from blobstate.journal.file import Journal
from blobstate.journal.projection import project
from blobstate.model.records import StoreKey


def _dir_store(tmp_path, name="counts"):
    src = tmp_path / name
    src.mkdir()
    (src / "big").write_bytes(os.urandom(5000))
    return src


def test_restore_through_a_symlinked_destination_keeps_every_file(tmp_path, repo, work_base):
    src = _dir_store(tmp_path)
    (src / "sub").mkdir()
    (src / "sub" / "x").write_text("x")
    blobstate.backup(str(src), repo=str(repo))
    real = tmp_path / "real-data"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    result = blobstate.restore(str(tmp_path / "link" / "counts"), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert result.files_removed == 0
    assert (real / "counts" / "big").read_bytes() == (src / "big").read_bytes()
    assert (real / "counts" / "sub" / "x").read_text() == "x"


def test_a_fresh_unreadable_lease_is_not_swept_but_an_old_one_is(tmp_path, repo, cli):
    src = _dir_store(tmp_path)
    assert cli("backup", src, "--repo", repo).returncode == 0
    prefix = repo / "default" / "0" / "counts"
    inflight = "f" * 32  # shaped like the blob ids blobstate writes
    (prefix / "blobs" / inflight).write_bytes(b"being written by another host")
    (prefix / "ttl" / inflight).write_bytes(b"")  # a lease caught mid-write
    now = cli("gc", "--repo", repo, "--json").json()[0]
    assert now["expiredDeleted"] == [] and (prefix / "blobs" / inflight).exists()
    later = int(time.time() * 1000) + 2 * 24 * 3600 * 1000
    old = cli("gc", "--repo", repo, "--now", str(later), "--json").json()[0]
    assert f"default/0/counts/blobs/{inflight}" in old["expiredDeleted"]
    assert not (prefix / "blobs" / inflight).exists()


def test_a_failed_ttl_removal_is_finished_before_the_next_commit(tmp_path, repo, work_base):
    src = _dir_store(tmp_path)
    with StoreCommitter(StoreKey("j", "0", "counts"), str(repo), store_type="dir") as committer:
        real = committer.repo.store.remove_ttl_many
        calls = {"n": 0}

        def flaky(ids):
            calls["n"] += 1
            if calls["n"] == 1:
                raise ConnectionError("503 Service Unavailable")
            return real(ids)

        committer.repo.store.remove_ttl_many = flaky
        committer.backup(str(src))  # committed; its cleanup failed
        (src / "small").write_text("s")
        committer.backup(str(src))
        open_commits = [s for s in project(committer.journal.read().events).values() if s.is_open]
    assert open_commits == []
    assert not repo_files(repo, "ttl"), "a blob of a committed snapshot kept its TTL"


def test_an_ambiguous_append_is_recovered_and_the_committer_is_not_falsely_fenced(tmp_path, repo, work_base):
    src = _dir_store(tmp_path)
    with StoreCommitter(StoreKey("j", "0", "counts"), str(repo), store_type="dir",
                        append_resolve_s=0.5) as committer:
        committer.backup(str(src))
        log = committer.repo.log
        real_append, real_history = log.append, log.history
        outage = {"on": False}

        def append(cp, expected):
            real_append(cp, expected)
            outage["on"] = True
            raise ConnectionError("connection reset after the write")

        def history(key):
            if outage["on"]:
                raise ConnectionError("still down")
            return real_history(key)

        log.append, log.history = append, history
        (src / "b").write_text("b")
        with pytest.raises(AppendOutcomeUnknown):  # re-appending never got a certain answer: left open
            committer.backup(str(src))
        log.append, log.history = real_append, real_history
        outage["on"] = False
        (src / "c").write_text("c")
        third = committer.backup(str(src))  # recovers the ambiguous commit, then commits
    assert third.checkpoint.generation == 3
    assert not repo_files(repo, "ttl")
    restored = blobstate.restore(str(tmp_path / "out" / "counts"), repo=str(repo), job="j",
                                 work_dir=str(tmp_path / "h"))
    assert restored.checkpoint.generation == 3 and (tmp_path / "out" / "counts" / "c").read_text() == "c"


def test_restore_on_a_new_host_keeps_the_writers_retention(tmp_path, repo, cli):
    store = tmp_path / "s"
    for i in range(6):
        write_keys(store, n=200, start=i * 1_000, seed=i)
        assert cli("backup", store, "--repo", repo, "--retain", "6").returncode == 0
    assert cli("restore", tmp_path / "out" / "s", "--repo", repo, work=tmp_path / "new-host").returncode == 0
    assert len(cli("list", "--repo", repo, "--store", "s", "--json").json()) == 6
    gc = cli("gc", "--repo", repo, "--json").json()[0]
    assert gc["checkpointsPruned"] == []
    assert len(cli("list", "--repo", repo, "--store", "s", "--json").json()) == 6


def test_gc_with_the_wrong_checkpoint_log_deletes_nothing(tmp_path, repo, cli):
    store = tmp_path / "s"
    data = write_keys(store, n=500)
    sql = f"sqlite:///{tmp_path / 'log.db'}"
    assert cli("backup", store, "--repo", repo, "--log", sql).returncode == 0
    blobs = repo_files(repo, "blobs")
    later = int(time.time() * 1000) + 10 * 24 * 3600 * 1000
    r = cli("gc", "--repo", repo, "--now", str(later), "--json")  # forgot --log
    # The repository records its log (issue 27, case 3): gc through another one is refused before it reads a log.
    assert r.returncode == 2 and "LogMismatchError" in r.stderr, r.stderr
    assert repo_files(repo, "blobs") == blobs
    assert cli("restore", tmp_path / "o" / "s", "--repo", repo, "--log", sql, work=tmp_path / "h").returncode == 0
    assert read_all(tmp_path / "o" / "s") == data


def test_a_failed_recovery_releases_the_lock(tmp_path, repo, work_base, monkeypatch):
    src = _dir_store(tmp_path)
    key = StoreKey("j", "0", "counts")
    with StoreCommitter(key, str(repo), store_type="dir") as committer:
        local = committer.checkpoint(str(src))  # an open commit is left in the journal
    repo.rename(tmp_path / "aside")
    repo.write_text("a file, not a directory: the repository and its log are unreachable")
    with pytest.raises(blobstate.StorageError):
        StoreCommitter(key, str(repo), store_type="dir", work_dir=os.path.dirname(os.path.dirname(local.path)))
    repo.unlink()
    (tmp_path / "aside").rename(repo)
    with StoreCommitter(key, str(repo), store_type="dir") as committer:  # not "another process is committing"
        assert committer.recovered and committer.recovered[0][0].name == "abort"


def test_a_zombie_that_fills_a_pruned_gap_leaves_no_record(tmp_path, repo, work_base):
    from blobstate.plugins.file_log import open_file_log
    from blobstate.testing.checkpoint_logs import make_checkpoint

    key = StoreKey("j", "0", "s")
    log = open_file_log(f"file://{repo}")
    for generation in range(4):
        log.append(make_checkpoint(key), generation)
    log.prune(key, 1)  # only generation 4 is left
    zombie = make_checkpoint(key, batch_id=7)
    with pytest.raises(FencedError):
        log.append(zombie, 1)  # creates generation 2 in the gap, then loses
    assert [cp.generation for cp in log.history(key)] == [4]
    assert all(cp.checkpoint_id != zombie.checkpoint_id for cp in log.history(key))


def test_a_damaged_record_in_the_middle_of_the_journal_is_an_error_not_a_tail(tmp_path, repo, cli, work_base):
    src = _dir_store(tmp_path)
    killer = {"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "IndexUploaded"}
    assert cli("backup", src, "--repo", repo, env=killer).returncode == -9
    path = next(work_base.rglob("journal.log"))
    data = bytearray(path.read_bytes())
    data[8 + 12] ^= 0x04  # inside the first record's body
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptJournalError):
        Journal(str(path)).read()
    shown = cli("journal", "show", "--repo", repo, "--store", "counts")
    assert shown.returncode == 3 and "valid records follow" in shown.stderr
    again = cli("backup", src, "--repo", repo)
    assert again.returncode == 3
    assert path.read_bytes() == bytes(data), "the journal was truncated"


def test_the_work_directory_is_the_repositorys_whatever_url_reaches_it(tmp_path, repo):
    """Named by the repository's id (issue 39 case 8), so neither a URL's query (a rotating token) nor the URL
    itself (a path, or a file:// URL, of the same repository) moves it; a repository from before the marker keeps
    the hash of its URL, without its query."""
    from blobstate.local.workdir import host_key, store_work_dir
    from blobstate.repository import host
    from blobstate.repository.repo import Repository

    key = StoreKey("j", "0", "s")
    with Repository.open(f"file://{repo}") as one, Repository.open(str(repo)) as two:
        assert host.work_dir(one, key, str(tmp_path)) == host.work_dir(two, key, str(tmp_path)) == \
            store_work_dir(one.info.repository_id, key, str(tmp_path))
    assert host_key("", "s3://b/r?token=one") == host_key("", "s3://b/r?token=two") != host_key("", "s3://b/q")


def test_credentials_never_reach_the_journal_the_index_or_the_output(tmp_path, repo, cli, work_base):
    src = _dir_store(tmp_path)
    secret = "hunter2-very-secret-value"
    r = cli("-vv", "backup", src, "--repo", f"file://{repo}", "--storage-option", f"api_token={secret}")
    assert r.returncode == 0, r.stderr
    assert secret not in r.stdout + r.stderr
    for path in list(work_base.rglob("*")) + list(repo.rglob("*")):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
