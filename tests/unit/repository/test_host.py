"""``blobstate.repository.host``: a store's work directory is named by its repository's id; one from before (named
by the URL's hash) is moved to its new place only when nothing in it says it belongs to another repository, and
its journal's local checkpoint paths follow it; ``located_work_dir`` finds it from the marker alone."""

from __future__ import annotations

import logging
import os

import pytest

from blobstate.config.settings import Settings
from blobstate.journal import events as ev
from blobstate.journal.file import Journal
from blobstate.local import workdir
from blobstate.model.records import StoreKey
from blobstate.repository import host
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")


@pytest.fixture
def repo(tmp_path):
    repository = Repository.open(f"file://{tmp_path}/repo", create=True, settings=Settings())
    yield repository
    repository.close()


def test_a_repository_is_keyed_by_its_marker_id(repo, tmp_path):
    rid = host.repository_id(repo)
    assert len(rid) == 32 and host.host_key(repo) == rid
    path = host.work_dir(repo, KEY, str(tmp_path / "base"))
    assert path == str(tmp_path / "base" / rid / "job" / "0" / "counts")
    assert not os.path.exists(path)  # named, not made
    assert host.work_dirs(repo, KEY, str(tmp_path / "base")) == []


def test_a_work_directory_from_before_with_nothing_foreign_is_moved(repo, tmp_path):
    base = str(tmp_path / "base")
    legacy = workdir.url_keyed_work_dir(repo.url, KEY, base)
    os.makedirs(legacy)
    with open(os.path.join(legacy, workdir.CRC_CACHE), "w") as fh:
        fh.write("{}")
    assert host.work_dirs(repo, KEY, base) == [legacy]
    path = host.work_dir(repo, KEY, base)
    assert not os.path.exists(legacy) and os.path.isfile(os.path.join(path, workdir.CRC_CACHE))
    assert host.work_dirs(repo, KEY, base) == [path]


def test_a_work_directory_from_before_marked_by_another_log_is_left_with_a_warning(repo, tmp_path, caplog):
    base = str(tmp_path / "base")
    legacy = workdir.url_keyed_work_dir(repo.url, KEY, base)
    os.makedirs(legacy)
    with open(os.path.join(legacy, workdir.LAST_COMPLETED), "w") as fh:
        fh.write('{"checkpointId": "not-in-this-log"}')
    assert "not in this repository's log" in host.foreign(repo, KEY, legacy)
    with caplog.at_level(logging.WARNING, logger="blobstate.repository.host"):
        path = host.work_dir(repo, KEY, base)
    assert os.path.isdir(legacy) and not os.path.exists(path)
    assert any(legacy in r.getMessage() for r in caplog.records)
    assert sorted(host.work_dirs(repo, KEY, base)) == [legacy]


def test_an_open_commit_of_another_repository_is_foreign(repo, tmp_path):
    legacy = str(tmp_path / "legacy")
    journal = Journal(os.path.join(legacy, workdir.JOURNAL))
    os.makedirs(legacy)
    journal.open()
    journal.append(ev.CommitStarted(commit_id="c1", time_ms=1, store_key=str(KEY), expected_generation=0,
                                    repository_id="f" * 32), sync=True)
    journal.close()
    assert "belongs to repository " + "f" * 32 in host.foreign(repo, KEY, legacy)


def test_rerooting_a_journal_moves_the_local_checkpoint_paths_under_the_old_directory_only(tmp_path):
    old, new = str(tmp_path / "old"), str(tmp_path / "new")
    os.makedirs(old)
    journal = Journal(os.path.join(old, workdir.JOURNAL))
    journal.open()
    inside, outside = os.path.join(old, "checkpoints", "a"), str(tmp_path / "oldish" / "b")
    journal.append(ev.LocalCheckpointCreated(commit_id="c1", time_ms=1, path=inside))
    journal.append(ev.LocalCheckpointsPruned(commit_id="c1", time_ms=2, paths=(inside, outside)))
    journal.close()
    host.reroot_journal(old, old, new)
    created, pruned = Journal(os.path.join(old, workdir.JOURNAL)).read().events
    assert created.path == os.path.join(new, "checkpoints", "a")
    assert pruned.paths == (os.path.join(new, "checkpoints", "a"), outside)
    host.reroot_journal(str(tmp_path / "none"), old, new)  # no journal: nothing to do


def test_located_work_dir_reads_the_marker_and_falls_back_to_one_from_before(repo, tmp_path):
    base = str(tmp_path / "base")
    expected = workdir.store_work_dir(host.host_key(repo), KEY, base)
    assert host.located_work_dir(repo.url, KEY, Settings(), base) == expected
    legacy = workdir.url_keyed_work_dir(repo.url, KEY, base)
    os.makedirs(legacy)
    assert host.located_work_dir(repo.url, KEY, Settings(), base) == legacy
    os.makedirs(expected)
    assert host.located_work_dir(repo.url, KEY, Settings(), base) == expected
