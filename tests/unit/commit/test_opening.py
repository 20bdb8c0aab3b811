"""The Open door (``blobstate.commit.opening``), on a file:// repository: a writer's plan sees exactly the view its
generation was pinned from, a writer overtaken after its view is fenced (at its append, and by ``check_current``),
and a plan that refuses leaves no lock behind."""

from __future__ import annotations

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.opening import check_current, open_store, pin_view
from blobstate.errors import ConfigurationError, FencedError
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("one")
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    with StoreCommitter(KEY, repository, store_type="dir", work_dir=str(tmp_path / "w0")) as first:
        first.backup(str(tmp_path / "data"))
    yield repository
    repository.close()


def _committer(repo, tmp_path, name):  # noqa: ANN001, ANN202
    return lambda: StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / name))


def test_the_plan_sees_the_pinned_view_and_a_writer_overtaken_after_it_is_fenced(repo, tmp_path):
    seen = []

    def plan(history):  # noqa: ANN001, ANN202 - another writer commits while this one plans
        seen.append([cp.generation for cp in history])
        with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "other")) as other:
            other.backup(str(tmp_path / "data"))
        return len(history)

    opened = open_store(KEY, repo, plan, committer=_committer(repo, tmp_path, "w1"))
    try:
        assert seen == [[1]] and opened.plan == 1 and opened.view.generation == 1
        assert opened.committer.commit_point.generation() == 1  # pinned from the read the plan saw
        with pytest.raises(FencedError):
            check_current(opened.committer, repo.log.latest(KEY))
        with pytest.raises(FencedError):
            opened.committer.backup(str(tmp_path / "data"))
        assert [cp.generation for cp in repo.log.history(KEY)] == [1, 2]  # nothing stacked on generation 2
    finally:
        opened.committer.close()


def test_pin_view_reuses_the_read_the_committer_opened_with_and_reads_once_otherwise(repo, tmp_path):
    with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w2")) as committer:
        assert committer.commit_point.pinned is not None
        assert [cp.generation for cp in pin_view(committer).history] == [1]
        committer.commit_point.invalidate()
        view = pin_view(committer)
        assert view.generation == 1 and committer.commit_point.generation() == 1
        check_current(committer, repo.log.latest(KEY))


def test_a_plan_that_refuses_releases_the_committer(repo, tmp_path):
    def refuse(history):  # noqa: ANN001, ANN202
        raise ConfigurationError("refused")

    with pytest.raises(ConfigurationError, match="refused"):
        open_store(KEY, repo, refuse, committer=_committer(repo, tmp_path, "w3"))
    opened = open_store(KEY, repo, len, committer=_committer(repo, tmp_path, "w3"))  # the lock was released
    opened.committer.close()
    assert opened.plan == 1
