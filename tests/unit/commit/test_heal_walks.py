"""``blobstate.commit.healing.HealWalks``: when a snapshot commit may skip rule 7's walk of ``blobs/``, on a real
``file://`` repository under ``tmp_path``. An open committer skips it only after a snapshot it saw through (landed
and cleaned up within half its TTL); a blob lost after a commit whose cleanup ran late is put back by the next
snapshot, and one lost outside the protocol by the periodic walk."""

from __future__ import annotations

import os

import pytest

from blobstate.commit import healing
from blobstate.commit.backup import StoreCommitter
from blobstate.commit.cleanup import CleanupExecutor
from blobstate.model import layout
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "walks")
TTL_MS = 60_000


class Clock(layout.SystemClock):
    """The system clock, moved forward by ``skew_ms`` (a pause the process slept through)."""

    skew_ms = 0

    def time(self) -> float:
        return super().time() + self.skew_ms / 1000


@pytest.fixture
def clock():
    with layout.use_clock(Clock()) as c:
        yield c


def _store(tmp_path) -> str:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"f{i}").write_bytes(os.urandom(500))
    return str(src)


def _walked(committer: StoreCommitter, monkeypatch) -> list[int]:
    """Counts the walks of ``blobs/`` the committer makes."""
    walks: list[int] = []
    real = healing.present_blobs

    def counting(repo, key):  # noqa: ANN001, ANN202
        walks.append(1)
        return real(repo, key)

    monkeypatch.setattr(healing, "present_blobs", counting)
    return walks


def _lose_one(repo: Repository, committer: StoreCommitter) -> str:
    """Delete one blob the latest snapshot reuses (by hand: what a gc that decided while the cleanup was paused
    would do)."""
    latest = committer.commit_point.latest()
    lost = sorted(repo.read_index(latest).referenced_blob_ids())[0]
    repo.store.delete(lost)
    return lost


def test_an_open_committer_walks_only_until_a_snapshot_it_saw_through(tmp_path, monkeypatch):
    src = _store(tmp_path)
    with Repository.open(f"file://{tmp_path}/repo") as repo:
        with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS) as c:
            walks = _walked(c, monkeypatch)
            c.backup(src)
            assert walks == []  # nothing reused: nothing to walk for
        with StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS) as c:
            (tmp_path / "src" / "f0").write_bytes(os.urandom(500))
            c.backup(src)
            assert walks == [1]  # a fresh committer (a new process) walks before it reuses
            (tmp_path / "src" / "f1").write_bytes(os.urandom(500))
            c.backup(src)
            assert walks == [1]  # reusing from the snapshot it saw through: no walk


def test_a_snapshot_after_a_cleanup_that_ran_past_half_the_ttl_walks_and_puts_a_lost_blob_back(
        tmp_path, monkeypatch, clock):
    """The cleanup of the previous snapshot was paused past TTL/2 (its uploads could have looked expired to a gc
    before their TTLs went): the next snapshot walks and uploads the lost blob again, under its id."""
    src = _store(tmp_path)
    with Repository.open(f"file://{tmp_path}/repo") as repo, \
            StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS) as c:
        c.backup(src)
        (tmp_path / "src" / "f0").write_bytes(os.urandom(500))
        c.backup(src)  # walked, saw it through
        real_finish = CleanupExecutor.finish

        def paused(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            out = real_finish(self, *args, **kwargs)
            clock.skew_ms += TTL_MS  # the process slept inside its cleanup
            return out

        monkeypatch.setattr(CleanupExecutor, "finish", paused)
        (tmp_path / "src" / "f1").write_bytes(os.urandom(500))
        c.backup(src)
        monkeypatch.setattr(CleanupExecutor, "finish", real_finish)
        lost = _lose_one(repo, c)
        again = c.backup(src)  # nothing changed locally
        assert lost in {i.blob_id for i in repo.store.list(layout.blobs_prefix(KEY))}
        assert again.files_uploaded >= 1


def test_a_blob_lost_outside_the_protocol_is_put_back_by_the_periodic_walk(tmp_path):
    src = _store(tmp_path)
    with Repository.open(f"file://{tmp_path}/repo") as repo, \
            StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "wd"), ttl_ms=TTL_MS) as c:
        c.walks.every = 2  # skipped at most once in a row
        c.backup(src)
        (tmp_path / "src" / "f0").write_bytes(os.urandom(500))
        c.backup(src)  # walked
        lost = _lose_one(repo, c)
        c.backup(src)  # skipped: nothing the protocol does could have lost it (verify names it meanwhile)
        present = {i.blob_id for i in repo.store.list(layout.blobs_prefix(KEY))}
        assert lost not in present
        c.backup(src)  # the periodic walk
        assert lost in {i.blob_id for i in repo.store.list(layout.blobs_prefix(KEY))}


def test_the_walk_bookkeeping():
    walks = healing.HealWalks(None, KEY, every=3)  # type: ignore[arg-type]
    assert walks.needed(None) and walks.needed("a")
    walks.done("a", walked=True, whole=True)
    assert not walks.needed("a") and walks.needed("b")
    walks.done("b", walked=False, whole=True)
    assert not walks.needed("b")
    walks.done("c", walked=False, whole=True)
    assert walks.needed("c")  # skipped every - 1 times in a row
    walks.done("d", walked=True, whole=False)
    assert walks.needed("d")  # not seen through: walk
    walks.done("e", walked=True, whole=True)
    walks.forget()
    assert walks.needed("e")
