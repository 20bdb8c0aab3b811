"""Retention policies end to end (file://, the API and the CLI): restic's rules applied by backup after its
commit, recorded in the snapshot for the next backup, gc and restore; records inside the log forgotten with the
blobs only they referenced; ``gc --dry-run`` naming the rule that keeps each checkpoint."""

from __future__ import annotations

import json
import os
import time

import pytest
from fixtures_core import repo_files, tree_digest

from blobstate import api
from blobstate.model.layout import SystemClock, use_clock
from blobstate.repository.repo import Repository

DAY_S = 86_400.0


class Shifted(SystemClock):
    """The wall clock moved by ``offset_s`` seconds (a backup made on another day)."""

    def __init__(self, offset_s: float) -> None:
        self.offset_s = offset_s

    def time(self) -> float:
        return time.time() + self.offset_s


def _backups(tmp_path, url, stamps, **kw):
    """One backup of a dir store per (days ago, hour) stamp, each with its own content; returns
    ``{checkpoint id: tree digest}``."""
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    states = {}
    base = time.time() // DAY_S * DAY_S - 12 * 3600 - time.time()  # noon yesterday (UTC): never in the future
    for i, (days_ago, hour) in enumerate(stamps):
        (src / "shared.bin").write_bytes(b"s" * 5000)
        (src / f"own-{i}.bin").write_bytes(bytes([i]) * (3000 + i))
        if i:
            (src / f"own-{i - 1}.bin").unlink()
        with use_clock(Shifted(base - days_ago * DAY_S + (hour - 12) * 3600)):
            result = api.backup(str(src), repo=url, store="s", store_type="dir", **kw)
        states[result.checkpoint.checkpoint_id] = tree_digest(src)
    return states


def test_a_daily_policy_keeps_the_last_of_each_day_forgets_the_rest_and_sticks(tmp_path, work_base, cli):
    url = f"file://{tmp_path}/repo"
    stamps = [(3, 9), (3, 15), (2, 9), (2, 15), (1, 9), (1, 15)]
    states = _backups(tmp_path, url, stamps, retention="daily=2")
    ids = list(states)
    with Repository.open(url, create=False) as repo:
        kept = repo.log.history(repo.log.keys()[0])
    # the newest of each of the last two days; day 3 and both 9:00 backups are gone, the 2 at 9:00 from inside the log
    assert [cp.checkpoint_id for cp in kept] == [ids[3], ids[5]]
    assert [cp.generation for cp in kept] == [4, 6]
    for cid in (ids[3], ids[5]):
        dest = tmp_path / f"restore-{cid}"
        api.restore(str(dest), repo=url, store="s", checkpoint=cid, store_type="dir", cleanup=False)
        assert tree_digest(dest) == states[cid]
    # blobs only the dropped checkpoints referenced are gone: shared.bin once, own-3, own-5, two indexes
    assert len(repo_files(tmp_path / "repo", "blobs")) == 3
    assert len(repo_files(tmp_path / "repo", "indexes")) == 2

    # a later backup without options applies the recorded policy (its writer's), and so does gc
    states.update(_backups(tmp_path, url, [(0, 9)]))
    with Repository.open(url, create=False) as repo:
        assert len(repo.log.history(repo.log.keys()[0])) == 2
    result = cli("gc", "--repo", url, "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)[0]
    assert report["retention"] == "keep 2 daily"
    assert [k["reasons"] for k in report["checkpointsKept"]] == [["daily"], ["daily"]]
    text = cli("gc", "--repo", url, "--dry-run", "--keep-last", "1", "--keep-within", "2d")
    assert text.returncode == 0, text.stderr
    assert "retention: keep the last 1, within 2d of the newest" in text.stdout
    assert "prune 0 checkpoint(s)" in text.stdout and ": within 2d, last" in text.stdout, text.stdout


def test_gc_with_a_policy_prunes_inside_the_log_and_says_why(tmp_path, work_base, cli):
    url = f"file://{tmp_path}/repo"
    states = _backups(tmp_path, url, [(9, 12), (8, 12), (7, 12), (1, 12), (0, 12)], retain=10)
    ids = list(states)
    dry = cli("gc", "--repo", url, "--dry-run", "--json", "--keep-last", "1", "--keep-weekly", "2")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)[0]
    reasons = {k["checkpointId"]: k["reasons"] for k in report["checkpointsKept"]}
    assert reasons[ids[-1]] == ["last", "weekly"] and len(reasons) == 2, reasons
    assert sorted(report["checkpointsPruned"]) == sorted(set(ids) - set(reasons))
    with Repository.open(url, create=False) as repo:
        assert len(repo.log.history(repo.log.keys()[0])) == 5  # a dry run prunes nothing
    run = cli("gc", "--repo", url, "--json", "--keep-last", "1", "--keep-weekly", "2")
    assert run.returncode == 0, run.stderr
    with Repository.open(url, create=False) as repo:
        assert [cp.checkpoint_id for cp in repo.log.history(repo.log.keys()[0])] == sorted(reasons)
    for cid in reasons:
        dest = tmp_path / f"restore-{cid}"
        api.restore(str(dest), repo=url, store="s", checkpoint=cid, store_type="dir", cleanup=False)
        assert tree_digest(dest) == states[cid]


@pytest.mark.parametrize("log", ["file", "sqlite"])
def test_an_encrypted_repository_forgets_records_inside_its_log(tmp_path, work_base, monkeypatch, log):
    """A sealed log (``blobstate.codec.log.SealedCheckpointLog``) forgets interior records as the log inside it
    does: the file and SQL logs both drop them, and only the kept ones restore."""
    key = tmp_path / "state.key"
    key.write_bytes(os.urandom(32))
    monkeypatch.setenv("BLOBSTATE_KEY_FILE", str(key))  # the first backup creates the repository encrypted
    url = f"file://{tmp_path}/repo"
    log_url = f"sqlite:///{tmp_path / 'log.db'}" if log == "sqlite" else None
    states = _backups(tmp_path, url, [(3, 9), (3, 15), (2, 9), (2, 15), (1, 9), (1, 15)], retention="daily=2",
                      log=log_url)
    ids = list(states)
    with Repository.open(url, log=log_url, create=False) as repo:
        kept = repo.log.history(repo.log.keys()[0])
        assert [(cp.checkpoint_id, cp.generation) for cp in kept] == [(ids[3], 4), (ids[5], 6)]  # ids[2] forgotten
        assert repo.cipher is not None and repo.log.can_forget
    dest = tmp_path / "restored"
    api.restore(str(dest), repo=url, log=log_url, store="s", checkpoint=ids[3], store_type="dir", cleanup=False)
    assert tree_digest(dest) == states[ids[3]]
