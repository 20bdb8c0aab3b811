"""``blobstate.maintenance.queries``, the read-only verbs, on a real ``file://`` repository: what they list,
describe, diff and count, the store they refuse when it has no checkpoint, this host's journal read without the
lock, and that none of them writes anything to the repository or a work directory."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.config.settings import Settings
from blobstate.errors import NothingToRestore, RepositoryNotFound
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.local import workdir
from blobstate.maintenance import queries
from blobstate.model.records import StoreKey
from blobstate.repository import host
from blobstate.repository.repo import Repository

A, B = StoreKey("etl", "0", "a"), StoreKey("etl", "1", "b")


def _files(root) -> dict[str, float]:  # noqa: ANN001
    return {os.path.join(d, n): os.stat(os.path.join(d, n)).st_mtime for d, _, ns in os.walk(root) for n in ns}


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    """A: two snapshots (``one.txt`` changed, ``two.txt`` added, ``gone.txt`` removed); B: one."""
    tmp = tmp_path_factory.mktemp("queries")
    url = f"file://{tmp}/repo"
    data = tmp / "data"
    data.mkdir()
    (data / "one.txt").write_text("first")
    (data / "gone.txt").write_text("removed by the second")
    with Repository.open(url, create=True) as repo:
        for key in (A, B):
            with StoreCommitter(key, repo, store_type="dir", work_dir=str(tmp / f"w{key.task}")) as committer:
                committer.backup(str(data))
        (data / "one.txt").write_text("second, longer")
        (data / "two.txt").write_text("added")
        (data / "gone.txt").unlink()
        with StoreCommitter(A, repo, store_type="dir", work_dir=str(tmp / "w0")) as committer:
            committer.backup(str(data))
    return url


def test_the_stores_and_their_checkpoints(url):
    before = _files(url.removeprefix("file://"))
    assert queries.list_stores(repo=url) == [A, B]
    assert [cp.generation for cp in queries.list_checkpoints(repo=url, key=A)] == [1, 2]
    summaries = queries.describe_checkpoints(repo=url, job="etl")
    assert [(s.checkpoint.store_key, s.files_total, s.error) for s in summaries] == [(A, 2, None), (A, 2, None),
                                                                                      (B, 2, None)]
    assert [s.checkpoint.store_key for s in queries.describe_checkpoints(repo=url, job="etl", task="1")] == [B]
    assert _files(url.removeprefix("file://")) == before  # read only


def test_ls_diff_and_stats(url):
    listing = queries.ls(repo=url, job="etl", task="0", store="a")
    assert [path for path, _ in listing.files] == ["one.txt", "two.txt"]
    assert [path for path, _ in queries.ls(repo=url, job="etl", task="0", store="a", checkpoint=1).files] == [
        "gone.txt", "one.txt"]
    changes = queries.diff(repo=url, base=1, job="etl", task="0", store="a")
    assert [p for p, _ in changes.added] == ["two.txt"] and [p for p, _ in changes.removed] == ["gone.txt"]
    assert [c[0] for c in changes.changed] == ["one.txt"] and changes.unchanged == 0
    by_store = {s.key: s for s in queries.stats(repo=url)}
    assert by_store[A].checkpoints == 2 and by_store[B].checkpoints == 1
    assert by_store[B].logical_bytes == len("first") + len("removed by the second")


def test_a_store_without_a_checkpoint_and_a_location_without_a_repository_are_refused(url, tmp_path):
    with pytest.raises(NothingToRestore, match="etl/0/a, etl/1/b"):
        queries.require_store(repo=url, key=StoreKey("etl", "9", "z"))
    assert queries.require_store(repo=url, key=B).generation == 1
    with pytest.raises(RepositoryNotFound):
        queries.list_stores(repo=f"file://{tmp_path}/nothing-here")
    assert not (tmp_path / "nothing-here").exists()


def test_this_hosts_open_commits_are_read_without_changing_the_journal(url, tmp_path):
    base = str(tmp_path / "base")
    with Repository.open(url, create=False) as repo:
        work = host.work_dir(repo, A, base)
    os.makedirs(work)
    journal = Journal(os.path.join(work, workdir.JOURNAL))
    journal.open()
    journal.append(ev.CommitStarted("done", 1, str(A), 0))
    journal.append(ev.CommitCompleted("done", 2))
    journal.append(ev.CommitStarted("interrupted", 3, str(A), 2))
    journal.close()
    before = _files(work)
    open_commits = queries.unfinished_commits(repo=url, key=A, settings=Settings(work_dir=base))
    assert [s.commit_id for s in open_commits] == ["interrupted"]
    events = queries.journal_events(work_dir=work).events
    assert [e.commit_id for e in events] == ["done", "done", "interrupted"]
    assert _files(work) == before and not os.path.exists(os.path.join(work, workdir.LOCK))
    with pytest.raises(ValueError, match="give work_dir"):
        queries.journal_events(repo=url)
