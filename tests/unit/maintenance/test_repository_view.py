"""``blobstate.maintenance.repository_view`` on a real ``file://`` repository: the view a repository-wide verb reads
once (records of every store, every store's objects from one listing, the blobs with a TTL and the expired ones),
``--job``/``--task`` filtering, per-store work in the order of the keys, and the calls summary."""

from __future__ import annotations

import logging
import time

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.maintenance.repository_view import RepositoryView, calls_summary, for_each_store, matching
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.repository.repo import Repository

A, B, STRAY = StoreKey("job", "0", "a"), StoreKey("job", "1", "b"), StoreKey("other", "0", "c")


def _backup(repo: Repository, key: StoreKey, tmp_path) -> None:  # noqa: ANN001
    data = tmp_path / f"data-{key.task}-{key.store}"
    data.mkdir(exist_ok=True)
    (data / "f.txt").write_text(f"state of {key}")
    with StoreCommitter(key, repo, store_type="dir", work_dir=str(tmp_path / f"work-{key.task}-{key.store}")) as c:
        c.backup(str(data))


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """Read only by the tests: store A with two records, B with one, and a stray blob with a TTL of 1 ms."""
    tmp_path = tmp_path_factory.mktemp("view")
    repository = Repository.open(f"file://{tmp_path}/repo", create=True)
    _backup(repository, A, tmp_path)
    _backup(repository, A, tmp_path)
    _backup(repository, B, tmp_path)
    repository.store.put(PutRequest(layout.new_blob_id(STRAY), b"left by a crash", ttl_ms=1))
    yield repository
    repository.close()


def test_the_records_alone_name_the_stores_with_a_record(repo):
    view = RepositoryView.take(repo)
    assert view.keys == [A, B] and view.objects is None and view.ttl is None
    assert [cp.generation for cp in view.history(A)] == [1, 2] and view.latest(B).generation == 1
    assert view.history(STRAY) == [] and view.latest(STRAY) is None
    with pytest.raises(AssertionError):
        view.listing(A)


def test_with_objects_a_store_holding_only_a_blob_is_a_store_too(repo):
    view = RepositoryView.take(repo, objects=True, ttl=True, now_ms=layout.FAR_FUTURE_MS - 1)
    assert view.keys == sorted([A, B, STRAY])
    listing = view.listing(A)
    assert [i.blob_id for i in listing] == sorted(i.blob_id for i in listing)
    assert any(layout.is_index_of(A, i.blob_id) for i in listing)
    [stray] = view.listing(STRAY)
    assert view.with_ttl(STRAY) == {stray.blob_id} and view.expired(STRAY) == {stray.blob_id}
    assert view.with_ttl(A) == set()  # a committed store's blobs are permanent


def test_a_blob_whose_ttl_has_not_expired_yet_is_not_expired(repo):
    view = RepositoryView.take(repo, objects=True, ttl=True, now_ms=layout.now_ms() - 60_000)
    [stray] = view.listing(STRAY)
    assert view.with_ttl(STRAY) == {stray.blob_id} and view.expired(STRAY) == set()


def test_job_and_task_filter_the_stores(repo):
    assert matching(None, None) is None
    assert RepositoryView.take(repo, match=matching("job", None)).keys == [A, B]
    assert RepositoryView.take(repo, match=matching("job", "1")).keys == [B]
    assert RepositoryView.take(repo, objects=True, match=matching("other", None)).keys == [STRAY]
    assert RepositoryView.take(repo, keys=[B]).keys == [B]


def test_each_stores_work_comes_back_in_the_order_of_the_keys(repo):
    assert for_each_store(repo, lambda k: k.store, [B, STRAY, A]) == ["b", "c", "a"]


def test_the_calls_summary_logs_what_was_asked_of_a_counted_store(tmp_path, caplog):
    Repository.open(f"file://{tmp_path}/counted", create=True).close()
    counted = Repository.open(f"file://{tmp_path}/counted", create=False, count_calls=True)
    try:
        started = time.perf_counter()
        RepositoryView.take(counted, objects=True)
        with caplog.at_level(logging.INFO, logger="blobstate.api"):
            calls_summary("list", counted, 0, started)
        [line] = [r.getMessage() for r in caplog.records]
        assert line.startswith("list: ") and "store calls" in line and "for 0 store(s)" in line
    finally:
        counted.close()
    uncounted = Repository.open(f"file://{tmp_path}/counted", create=False)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="blobstate.api"):
        calls_summary("list", uncounted, 0, time.perf_counter())
    uncounted.close()
    assert caplog.records == []
