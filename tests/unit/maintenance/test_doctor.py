"""``blobstate.maintenance.doctor`` on a real ``file://`` repository: a healthy repository passes every check and
is left as it was (the scratch prefix removed); a location without a repository, a wrong key, a skewed clock and a
stale store each show as the documented line and exit code; ``run`` never raises for what it checks."""

from __future__ import annotations

import os

import pytest

from blobstate.commit.backup import StoreCommitter
from blobstate.config.settings import Settings
from blobstate.errors import EXIT_ERROR, EXIT_INTEGRITY, EXIT_OK
from blobstate.maintenance.doctor import FAIL, OK, SCRATCH_PREFIX, WARN, DoctorReport, run
from blobstate.model.layout import now_ms
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("job", "0", "counts")
HOUR = 3600 * 1000


def _tree(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, n), root) for d, ds, ns in os.walk(root) for n in ns + ds}


@pytest.fixture
def url(tmp_path):
    url = f"file://{tmp_path}/repo"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_text("x")
    with Repository.open(url, create=True) as repo, \
            StoreCommitter(KEY, repo, store_type="dir", work_dir=str(tmp_path / "w")) as committer:
        committer.backup(str(tmp_path / "data"))
    return url


def _statuses(report: DoctorReport) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def test_a_healthy_repository_passes_and_is_left_as_it_was(url, tmp_path):
    before = _tree(str(tmp_path / "repo"))
    report = run(repo=url, settings=Settings(work_dir=str(tmp_path / "base")))
    statuses = _statuses(report)
    assert FAIL not in statuses.values(), report.to_json()
    assert statuses["repository"] == OK and statuses["checkpoint log"] == OK and "store semantics" in statuses
    assert report.exit_code == EXIT_OK and report.to_json()["ok"] is True
    assert _tree(str(tmp_path / "repo")) == before and not (tmp_path / "repo" / SCRATCH_PREFIX).exists()


def test_a_location_without_a_repository_fails_and_stops(tmp_path):
    (tmp_path / "empty").mkdir()
    report = run(repo=str(tmp_path / "empty"), settings=Settings(work_dir=str(tmp_path / "base")))
    assert _statuses(report)["repository"] == FAIL and "checkpoint log" not in _statuses(report)
    assert report.exit_code == EXIT_ERROR and os.listdir(tmp_path / "empty") == []


def test_a_wrong_key_fails_the_key_check_with_exit_3_before_anything_else(tmp_path):
    right, wrong = tmp_path / "right.key", tmp_path / "wrong.key"
    for path, material in ((right, b"r" * 32), (wrong, b"w" * 32)):
        path.write_bytes(material)
        path.chmod(0o600)
    url = f"file://{tmp_path}/enc"
    Repository.open(url, create=True, settings=Settings(key_file=str(right))).close()
    report = run(repo=url, settings=Settings(key_file=str(wrong), work_dir=str(tmp_path / "base")))
    assert _statuses(report)["key"] == FAIL and report.checks[-1].name == "key"
    assert report.exit_code == EXIT_INTEGRITY
    assert _statuses(run(repo=url, settings=Settings(key_file=str(right), work_dir=str(tmp_path / "b"))))["key"] == OK


def test_a_skewed_clock_and_a_stale_store_are_reported(url, tmp_path):
    skewed = run(repo=url, clock=lambda: now_ms() + 2 * HOUR, ttl_ms=4 * HOUR,
                 settings=Settings(work_dir=str(tmp_path / "base")))
    assert _statuses(skewed)["clock skew"] == FAIL  # beyond a quarter of the TTL
    stale = run(repo=url, clock=lambda: now_ms() + 10 * 24 * HOUR, ttl_ms=100 * 24 * HOUR,
                stale_after_ms=HOUR, settings=Settings(work_dir=str(tmp_path / "base")))
    assert _statuses(stale)["checkpoints"] == WARN
