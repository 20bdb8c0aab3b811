"""``blobstate.local.files``: a file replaced all or nothing, a lock file taken without waiting, a directory
fsynced best effort or strictly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from blobstate.local.files import fsync_dir, replace_file, try_lock


def test_fsync_dir_of_a_missing_directory_is_a_no_op_unless_strict(tmp_path):
    fsync_dir(str(tmp_path))
    fsync_dir(str(tmp_path / "missing"))
    fsync_dir(str(tmp_path), strict=True)
    with pytest.raises(FileNotFoundError):
        fsync_dir(str(tmp_path / "missing"), strict=True)


@pytest.mark.parametrize("fsync", [False, True])
def test_replace_file_writes_bytes_or_text_and_leaves_no_temporary(tmp_path, fsync):
    target = tmp_path / "doc.json"
    target.write_text("old")
    replace_file(str(target), "new \udc80", fsync=fsync)  # a surrogate-escaped name survives as its byte
    assert target.read_bytes() == b"new \x80"
    replace_file(str(target), b"\x00\x01", fsync=fsync)
    assert target.read_bytes() == b"\x00\x01"
    assert os.listdir(tmp_path) == ["doc.json"]


def test_a_failed_replace_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "dir-in-the-way"
    target.mkdir()  # os.replace of a file over a directory fails
    (target / "x").write_text("kept")
    with pytest.raises(OSError):
        replace_file(str(target), b"new")
    assert (target / "x").read_text() == "kept"
    assert sorted(os.listdir(tmp_path)) == ["dir-in-the-way"]


def test_a_lock_is_held_against_another_process_and_released_with_its_descriptor(tmp_path):
    path = str(tmp_path / "LOCK")
    probe = [sys.executable, "-c",
             "import sys; from blobstate.local.files import try_lock; sys.exit(0 if try_lock(sys.argv[1]) else 3)",
             path]
    fd = try_lock(path)
    assert fd is not None
    assert try_lock(path) is None  # another descriptor, even of this process
    assert subprocess.run(probe).returncode == 3
    os.close(fd)
    assert subprocess.run(probe).returncode == 0
