"""A repository has exactly one checkpoint log (issue 27, case 3): the repository marker records the log's identity
(a relative SQLite URL made absolute), every command opened with another log is refused (``LogMismatchError``,
exit 2), ``blobstate init --log NEW --change-log`` moves it on purpose, and a marker without the identity gets it at
its first use."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from fixtures_core import cli_env

from blobstate.errors import EXIT_USAGE
from blobstate.repository.marker import MARKER_ID


def run(cwd, *args, work_base):
    proc = subprocess.run([sys.executable, "-m", "blobstate.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=cli_env(work_base), timeout=300)
    return proc


@pytest.fixture
def two_dirs(tmp_path):
    dirs = []
    for name in ("a", "b"):
        d = tmp_path / name
        (d / "counts").mkdir(parents=True)
        (d / "counts" / "v.txt").write_text(f"state of {name}\n")
        dirs.append(d)
    return dirs


def test_a_relative_sqlite_log_from_a_second_directory_is_refused_and_gc_keeps_the_state(tmp_path, two_dirs,
                                                                                          work_base):
    repo = tmp_path / "repo"
    a, b = two_dirs
    log = "sqlite:///log.db"  # relative to each process's working directory (SQLAlchemy's form)
    for _ in range(2):
        first = run(a, "backup", "counts", "--repo", repo, "--log", log, "--retain", "1", "-q", work_base=work_base)
        assert first.returncode == 0, first.stderr
    second = run(b, "backup", "counts", "--repo", repo, "--log", log, "--retain", "1", "-q",
                 work_base=tmp_path / "work-b")
    assert second.returncode == EXIT_USAGE, (second.returncode, second.stderr)
    assert "LogMismatchError" in second.stderr and str(a / "log.db") in second.stderr, second.stderr
    assert "--change-log" in second.stderr
    assert not (b / "log.db").exists() or run(b, "list", "--repo", repo, "--log", log,
                                              work_base=work_base).returncode == EXIT_USAGE
    # gc through the recorded log, then the latest state restores.
    assert run(a, "gc", "--repo", repo, "--log", log, work_base=work_base).returncode == 0
    out = run(a, "restore", tmp_path / "restored", "--repo", repo, "--log", log, "--store", "counts",
              work_base=work_base)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "restored" / "v.txt").read_text() == "state of a\n"
    marker = json.loads((repo / MARKER_ID).read_text())
    assert marker["checkpointLog"] == f"sqlite:///{a / 'log.db'}"


def test_every_command_with_another_log_is_refused_and_change_log_moves_it(tmp_path, two_dirs, work_base):
    repo = tmp_path / "repo"
    a, _ = two_dirs
    assert run(a, "backup", "counts", "--repo", repo, "-q", work_base=work_base).returncode == 0
    other = f"sqlite:///{tmp_path / 'other.db'}"
    for args in (("list",), ("verify",), ("gc", "--dry-run"), ("ls", "--store", "counts"),
                 ("backup", "counts", "-q")):
        out = run(a, *args, "--repo", repo, "--log", other, work_base=work_base)
        assert out.returncode == EXIT_USAGE, (args, out.returncode, out.stderr)
        assert "LogMismatchError" in out.stderr and "file log inside the repository" in out.stderr, out.stderr
    # Without --change-log, init does not move it either; with it, the new log is the repository's.
    assert run(a, "init", "--repo", repo, "--log", other, work_base=work_base).returncode == EXIT_USAGE
    moved = run(a, "init", "--repo", repo, "--log", other, "--change-log", work_base=work_base)
    assert moved.returncode == 0, moved.stderr
    assert run(a, "backup", "counts", "--repo", repo, "--log", other, "-q", work_base=work_base).returncode == 0
    assert run(a, "list", "--repo", repo, work_base=work_base).returncode == EXIT_USAGE
    assert json.loads((repo / MARKER_ID).read_text())["checkpointLog"] == other


def test_a_marker_without_the_identity_gets_it_from_the_first_writer_whose_log_holds_the_records(tmp_path, two_dirs,
                                                                                               work_base):
    """A marker from before ``checkpointLog``: a reader records no log (whatever it was opened with); a writer
    with a log that holds no record, while the repository holds indexes, is refused (exit 2, naming `init
    --change-log`) and changes nothing; the writer with the log that holds the records binds the repository to it;
    `init --change-log` binds another log on purpose (``blobstate.repository.marker:bind_log``)."""
    repo = tmp_path / "repo"
    a, _ = two_dirs
    assert run(a, "backup", "counts", "--repo", repo, "-q", work_base=work_base).returncode == 0
    doc = json.loads((repo / MARKER_ID).read_text())
    doc.pop("checkpointLog", None)  # a marker written before the identity was recorded
    (repo / MARKER_ID).write_text(json.dumps(doc))
    before = (repo / MARKER_ID).read_bytes()
    log = f"sqlite:///{tmp_path / 'log.db'}"
    assert run(a, "list", "--repo", repo, "--log", log, work_base=work_base).returncode == 0
    refused = run(a, "backup", "counts", "--repo", repo, "--log", log, "-q", work_base=work_base)
    assert refused.returncode == EXIT_USAGE and "--change-log" in refused.stderr, refused.stderr
    assert (repo / MARKER_ID).read_bytes() == before  # neither the reader nor the refused writer recorded a log
    assert run(a, "backup", "counts", "--repo", repo, "-q", work_base=work_base).returncode == 0
    assert "checkpointLog" in json.loads((repo / MARKER_ID).read_text())  # the file log, which holds the records
    assert run(a, "list", "--repo", repo, "--log", log, work_base=work_base).returncode == EXIT_USAGE
    assert run(a, "init", "--repo", repo, "--log", log, "--change-log", work_base=work_base).returncode == 0
    assert json.loads((repo / MARKER_ID).read_text())["checkpointLog"] == log


def test_a_writer_records_its_log_in_a_marker_without_one_when_the_repository_holds_no_index(tmp_path, work_base):
    repo = tmp_path / "repo"
    data = tmp_path / "counts"
    data.mkdir()
    (data / "v.txt").write_text("v1\n")
    assert run(tmp_path, "init", "--repo", repo, work_base=work_base).returncode == 0
    doc = json.loads((repo / MARKER_ID).read_text())
    doc.pop("checkpointLog", None)
    (repo / MARKER_ID).write_text(json.dumps(doc))
    log = f"sqlite:///{tmp_path / 'log.db'}"
    done = run(tmp_path, "backup", data, "--repo", repo, "--log", log, "-q", work_base=work_base)
    assert done.returncode == 0, done.stderr
    assert json.loads((repo / MARKER_ID).read_text())["checkpointLog"] == log
