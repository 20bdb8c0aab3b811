"""The repository marker: a mistyped --repo is "no blobstate repository" (exit 6) for every command but backup and
init, never an empty repository; the first backup into an empty location creates the marker; nothing is ever
created over foreign data; repositories from before the marker keep working."""

from __future__ import annotations

import json

import pytest

from blobstate.errors import EXIT_NO_REPOSITORY
from blobstate.repository.marker import MARKER_ID

READERS = [
    ("list",),
    ("verify",),
    ("gc",),
    ("gc", "--dry-run"),
    ("stats",),
    ("ls", "--store", "counts"),
    ("diff", "1", "--store", "counts"),
    ("verify", "--store", "counts"),
    ("recover", "--store", "counts"),
]


@pytest.fixture
def store_dir(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    (path / "a.txt").write_bytes(b"alpha" * 100)
    return path


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a))
def test_a_mistyped_repository_is_reported_and_left_alone(cli, tmp_path, store_dir, args):
    real = tmp_path / "repo"
    assert cli("backup", store_dir, "--repo", real, "-q").returncode == 0
    typo = tmp_path / "rpeo"
    result = cli(*args, "--repo", typo)
    assert result.returncode == EXIT_NO_REPOSITORY, (result.stdout, result.stderr)
    assert f"no blobstate repository at file://{typo}" in result.stderr
    assert not typo.exists()  # nothing was created at the mistyped location


def test_restore_from_a_mistyped_repository_is_reported(cli, tmp_path, store_dir):
    result = cli("restore", tmp_path / "out", "--repo", tmp_path / "nothing-here", "--store", "counts")
    assert result.returncode == EXIT_NO_REPOSITORY, result.stderr
    assert "no blobstate repository" in result.stderr


def test_the_first_backup_creates_the_marker_and_init_is_idempotent(cli, tmp_path, store_dir):
    repo = tmp_path / "repo"
    assert cli("list", "--repo", repo).returncode == EXIT_NO_REPOSITORY
    assert cli("backup", store_dir, "--repo", repo, "-q").returncode == 0
    marker = json.loads((repo / MARKER_ID).read_text())
    assert marker["format"] == "blobstate-repository" and len(marker["repositoryId"]) == 32
    init = cli("init", "--repo", repo, "--json")
    assert init.returncode == 0, init.stderr
    assert init.json()["repositoryId"] == marker["repositoryId"]  # the same repository, not a new one
    assert cli("list", "--repo", repo).returncode == 0


def test_init_makes_an_empty_repository_that_readers_accept(cli, tmp_path):
    repo = tmp_path / "fresh"
    result = cli("init", "--repo", repo)
    assert result.returncode == 0, result.stderr
    assert "blobstate repository" in result.stdout and (repo / MARKER_ID).is_file()
    listed = cli("list", "--repo", repo)
    assert listed.returncode == 0 and "no checkpoints" in listed.stderr
    verify = cli("verify", "--repo", repo)
    assert verify.returncode == 5, verify.stderr  # a repository with nothing to verify, not a missing one


@pytest.mark.parametrize("command", ["backup", "init"])
def test_no_repository_is_created_over_foreign_data(cli, tmp_path, store_dir, command):
    foreign = tmp_path / "photos"
    foreign.mkdir()
    (foreign / "holiday.jpg").write_bytes(b"jpeg")
    args = ("backup", store_dir) if command == "backup" else ("init",)
    result = cli(*args, "--repo", foreign)
    assert result.returncode == EXIT_NO_REPOSITORY, result.stderr
    assert "not empty" in result.stderr
    assert sorted(p.name for p in foreign.iterdir()) == ["holiday.jpg"]


def test_a_repository_from_before_the_marker_keeps_working(cli, tmp_path, store_dir):
    repo = tmp_path / "repo"
    first = cli("backup", store_dir, "--repo", repo, "-q")
    (repo / MARKER_ID).unlink()
    listed = cli("list", "--repo", repo, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["checkpointId"] for r in listed.json()] == [first.stdout.strip()]
    assert not (repo / MARKER_ID).exists()  # readers never write
    assert cli("backup", store_dir, "--repo", repo, "-q").returncode == 0
    assert (repo / MARKER_ID).is_file()  # the next backup marks it


def test_a_damaged_marker_is_an_integrity_error(cli, tmp_path, store_dir):
    repo = tmp_path / "repo"
    assert cli("backup", store_dir, "--repo", repo, "-q").returncode == 0
    (repo / MARKER_ID).write_text("{not json")
    result = cli("list", "--repo", repo)
    assert result.returncode == 3 and "marker" in result.stderr


def test_a_mistyped_s3_prefix_is_reported(cli, tmp_path, store_dir, s3_target):
    assert cli("backup", store_dir, "--repo", s3_target.url, "-q", env=s3_target.env).returncode == 0
    typo = s3_target.url + "-typo"
    for args in (("list",), ("verify",), ("gc", "--dry-run")):
        result = cli(*args, "--repo", typo, env=s3_target.env)
        assert result.returncode == EXIT_NO_REPOSITORY, (args, result.stderr)
        assert f"no blobstate repository at {typo}" in result.stderr
    assert cli("list", "--repo", s3_target.url, env=s3_target.env).returncode == 0


def test_two_first_backups_agree_on_one_repository(tmp_path):
    """The interleaving the racing-writers test hit: writer B finds no marker, writer A creates the repository
    (its marker, nothing else yet), then B looks at the location. B must join A's repository, not call the marker
    foreign data."""
    from blobstate.plugins.fsspec_store import FsspecBlobStore
    from blobstate.repository.marker import ensure_repository, read_marker

    url = f"file://{tmp_path / 'repo'}"
    writer_a = FsspecBlobStore(url)

    class Interleaved(FsspecBlobStore):
        def list(self, prefix):  # B's first look at the location happens after A's first backup started
            if not (tmp_path / "repo" / MARKER_ID).exists():
                self.created_by_a = ensure_repository(writer_a, url, create=True)
            return super().list(prefix)

    writer_b = Interleaved(url)
    joined = ensure_repository(writer_b, url, create=True)
    assert joined == writer_b.created_by_a == read_marker(writer_a)
