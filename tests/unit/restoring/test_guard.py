"""``blobstate.restoring.guard``: a restore never writes into, or deletes, the repository, its checkpoint log or the
work directory. Real directories under ``tmp_path``; the paths are compared resolved, so a symbolic link or a
``..`` reaches the same answer, and a sibling whose name merely starts the same is not inside."""

from __future__ import annotations

import os

import pytest

from blobstate.errors import UnsafeDestination
from blobstate.restoring.guard import check_destination, check_restore_destination, local_path


@pytest.mark.parametrize("url, path", [
    ("file:///backups/repo", "/backups/repo"), ("/backups/repo", "/backups/repo"), ("rel/repo", "rel/repo"),
    ("sqlite:////var/lib/log.db", "/var/lib/log.db"), ("sqlite:///log.db", "log.db"),
    ("sqlite+pysqlite:////var/lib/log.db?table=t", "/var/lib/log.db"), ("SQLITE:////x.db", "/x.db"),
    ("sqlite:///:memory:", None), ("sqlite://", None), ("s3://bucket/repo", None), ("gs://b/r", None),
    ("postgresql://u:p@host/db", None), ("kafka://h:9092/t", None), (None, None), ("", None),
])
def test_the_local_path_a_url_names(url, path):
    assert local_path(url) == path


@pytest.fixture
def tree(tmp_path):
    for d in ("backups/repo", "work/job/0/store", "data", "backups2"):
        (tmp_path / d).mkdir(parents=True)
    return tmp_path


def protected(tree):
    return [("repository", str(tree / "backups/repo"), True), ("work directory", str(tree / "work/job/0/store"), True),
            ("work directory", str(tree / "work"), False), ("checkpoint log", None, True)]


@pytest.mark.parametrize("dest, words", [
    ("backups/repo", "it is the repository"),
    ("backups", "it contains the repository"),
    ("", "it contains the repository"),
    ("backups/repo/job/0/store", "it lies inside the repository"),
    ("backups/repo/../repo/x", "it lies inside the repository"),
    ("work", "it contains the work directory"),  # the store's own, inside it, is found first
    ("work/job", "it contains the work directory"),
    ("work/job/0/store/checkpoints", "it lies inside the work directory"),
])
def test_a_destination_that_is_contains_or_lies_inside_a_protected_path_is_refused(tree, dest, words):
    with pytest.raises(UnsafeDestination, match=f"refusing to restore into .*: {words}") as info:
        check_destination(str(tree / dest) if dest else str(tree), protected(tree))
    assert info.value.exit_code == 2


@pytest.mark.parametrize("dest", ["data", "data/new", "backups2", "backups/repo2", "work/mystore", "work/job/0/store2"])
def test_a_destination_beside_them_is_allowed(tree, dest):
    check_destination(str(tree / dest), protected(tree))


def test_a_symbolic_link_to_the_repository_is_the_repository(tree):
    os.symlink(tree / "backups/repo", tree / "link")
    with pytest.raises(UnsafeDestination, match=f"it is the repository \\({tree}/backups/repo\\)"):
        check_destination(str(tree / "link"), protected(tree))
    os.symlink(tree / "backups", tree / "up")
    with pytest.raises(UnsafeDestination, match="lies inside the repository"):
        check_destination(str(tree / "up/repo/x"), protected(tree))


def test_a_protected_path_through_a_link_or_home_is_resolved(tree, monkeypatch):
    monkeypatch.setenv("HOME", str(tree))
    with pytest.raises(UnsafeDestination, match="lies inside the repository"):
        check_destination(str(tree / "backups/repo/x"), [("repository", "~/backups/repo", True)])


def test_a_relative_destination_is_taken_from_the_working_directory(tree, monkeypatch):
    monkeypatch.chdir(tree / "backups")
    with pytest.raises(UnsafeDestination, match="it is the repository"):
        check_destination("repo", protected(tree))


def test_every_restore_protects_the_repository_its_log_and_the_work_directories(tree):
    log = tree / "logs/log.db"
    log.parent.mkdir()
    common = dict(repo_url=f"file://{tree}/backups/repo", log_url=f"sqlite:///{log}",
                  work_dir=str(tree / "work/job/0/store"), work_base=str(tree / "work"))
    check_restore_destination(str(tree / "data"), **common)
    check_restore_destination(str(tree / "work/other-store"), **common)
    for dest, what in [("backups/repo/x", "the repository"), ("logs", "contains the checkpoint log"),
                       ("logs/log.db/x", "inside the checkpoint log"), ("work/job/0/store/x", "the work directory"),
                       ("work", "contains the work directory")]:
        with pytest.raises(UnsafeDestination, match=what):
            check_restore_destination(str(tree / dest), **common)


def test_a_remote_repository_protects_nothing_local(tree):
    check_restore_destination(str(tree / "backups/repo"), repo_url="s3://bucket/repo", log_url=None,
                              work_dir=str(tree / "work/job/0/store"), work_base=str(tree / "work"))
