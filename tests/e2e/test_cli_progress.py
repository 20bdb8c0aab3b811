"""Progress counts files as files: a file cut into several blobs is one file, both in what the backup reports to the
progress protocol and on the rich bar a terminal shows."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from fixtures_core import cli_env

import blobstate


class Recorder:
    def __init__(self) -> None:
        self.starts: list[tuple[int, int]] = []
        self.labels: list[str] = []
        self.files = 0
        self.bytes = 0

    def start(self, label: str, total_bytes: int, total_files: int) -> None:
        self.starts.append((total_bytes, total_files))
        self.labels.append(label)

    def advance(self, nbytes: int, nfiles: int = 0) -> None:
        self.bytes += nbytes
        self.files += nfiles

    def finish(self) -> None:
        pass


def make_store(path) -> None:
    path.mkdir()
    (path / "big.bin").write_bytes(os.urandom(300 * 1024))  # three blobs of 100 KiB
    (path / "a.txt").write_bytes(b"a" * 10)
    (path / "b.txt").write_bytes(b"b" * 20)


def test_the_backup_reports_files_not_chunks(tmp_path, work_base):
    store = tmp_path / "s"
    make_store(store)
    progress = Recorder()
    blobstate.backup(str(store), repo=str(tmp_path / "repo"), chunk_size="100KiB", progress=progress)
    assert progress.starts == [(300 * 1024 + 30, 3)]
    assert (progress.files, progress.bytes) == (3, 300 * 1024 + 30)


def test_the_progress_of_a_backup_and_a_restore_names_the_store(tmp_path, work_base):
    """Issue 43 item 8: the restore bar said only "download"."""
    store = tmp_path / "s"
    make_store(store)
    up, down = Recorder(), Recorder()
    blobstate.backup(str(store), repo=str(tmp_path / "repo"), job="j", task="t", progress=up)
    blobstate.restore(str(tmp_path / "out"), repo=str(tmp_path / "repo"), job="j", task="t", store="s",
                      progress=down)
    assert up.labels == ["upload j/t/s"]
    assert down.labels == ["restore j/t/s"]


def test_the_terminal_bar_counts_files(tmp_path, work_base):
    store = tmp_path / "s"
    make_store(store)
    main, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "blobstate.cli", "backup", str(store), "--repo",
                             str(tmp_path / "repo"), "--chunk-size", "100KiB", "--max-concurrency", "1"],
                            stdout=subprocess.PIPE, stderr=child, env=cli_env(work_base, COLUMNS="200", TERM="xterm"))
    os.close(child)
    screen = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        screen += chunk
    os.close(main)
    assert proc.wait(timeout=120) == 0
    text = screen.decode(errors="replace")
    counts = re.findall(r"(\d+)/(\d+) files", text)
    assert counts, text
    assert {total for _, total in counts} == {"3"}, counts  # never 5 (the number of blobs)
    assert "3 of 3 files" in text
