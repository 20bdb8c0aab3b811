"""``blobstate.repository.view``: a store's records read once, oldest generation first, on a real ``file://``
repository; the generation a writer opened on the view expects (0 for an empty store) and its latest record."""

from __future__ import annotations

from blobstate.commit.backup import StoreCommitter
from blobstate.model.records import StoreKey
from blobstate.repository.view import StoreView, read_view

KEY = StoreKey("job", "0", "counts")


def test_an_empty_store_is_at_generation_zero_with_no_latest(repository):
    view = read_view(repository, KEY)
    assert view == StoreView(KEY, ())
    assert (view.generation, view.latest) == (0, None)


def test_a_view_holds_every_record_oldest_first_and_ends_at_the_latest(repository, tmp_path):
    (tmp_path / "data").mkdir()
    for n in range(3):
        (tmp_path / "data" / "a.txt").write_text(f"version {n}")
        with StoreCommitter(KEY, repository, store_type="dir", work_dir=str(tmp_path / "work")) as committer:
            committer.backup(str(tmp_path / "data"))
    view = read_view(repository, KEY)
    assert [cp.generation for cp in view.history] == [1, 2, 3]
    assert view.generation == 3 and view.latest == repository.log.latest(KEY)
    assert read_view(repository, StoreKey("job", "0", "other")).generation == 0


def test_a_view_is_a_snapshot_of_one_read(repository, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("one")
    with StoreCommitter(KEY, repository, store_type="dir", work_dir=str(tmp_path / "work")) as committer:
        committer.backup(str(tmp_path / "data"))
        view = read_view(repository, KEY)
        committer.backup(str(tmp_path / "data"))
    assert view.generation == 1 and len(view.history) == 1  # a later append does not reach it
    assert read_view(repository, KEY).generation == 2
