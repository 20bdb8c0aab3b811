"""``blobstate.plugins.dir_store`` on real directories (``tests/contract``'s local-store kit checks the contract; this
checks what is the dir store's own): the copy keeps bytes, permission bits, mtimes, empty directories and links as
links; a FIFO is refused and leaves no checkpoint behind; a file that never holds still (its bytes never match its
stat) fails the checkpoint naming it after ``COPY_ATTEMPTS``."""

from __future__ import annotations

import os
import stat

import pytest

from blobstate.errors import LocalStoreError, UnsafePathError
from blobstate.plugins.dir_store import COPY_ATTEMPTS, DirStore, copy_stable_file, looks_like_dir

MTIME = 1_600_000_000_123_456_789


def entries(root) -> dict[str, tuple]:
    """``{rel: (kind, content or target, mode, mtime_ns)}`` of every entry under ``root``, links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path), None, st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", None, stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                out[rel] = ("file", open(path, "rb").read(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return out


@pytest.fixture
def source(tmp_path):
    root = tmp_path / "store"
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "a.txt").write_bytes(b"alpha")
    (root / "sub" / "b.bin").write_bytes(os.urandom(3 << 20))  # larger than the read fallback's 1 MiB buffer
    (root / "sub" / "deep" / "c").write_bytes(b"")
    os.symlink("a.txt", root / "link")
    os.symlink("/nowhere/at/all", root / "sub" / "dangling")
    os.chmod(root / "a.txt", 0o640)
    os.chmod(root / "sub" / "deep", 0o750)
    for path in (root / "a.txt", root / "sub" / "b.bin", root / "sub" / "deep" / "c"):
        os.utime(path, ns=(MTIME, MTIME))
    os.utime(root / "link", ns=(MTIME, MTIME), follow_symlinks=False)
    for d in (root / "sub" / "deep", root / "sub", root / "empty"):
        os.utime(d, ns=(MTIME, MTIME))
    return root


def test_a_checkpoint_is_the_tree_with_its_bytes_modes_mtimes_and_links(source, tmp_path):
    DirStore().create_checkpoint(str(source), str(tmp_path / "cp"))
    assert entries(tmp_path / "cp") == entries(source)
    assert os.readlink(tmp_path / "cp" / "sub" / "dangling") == "/nowhere/at/all"
    root, copy = os.stat(source), os.stat(tmp_path / "cp")
    assert (copy.st_mode, copy.st_mtime_ns) == (root.st_mode, root.st_mtime_ns)


def test_the_checkpoint_is_a_copy_not_a_link(source, tmp_path):
    DirStore().create_checkpoint(source, str(tmp_path / "cp"))  # a path-like source too
    (source / "a.txt").write_bytes(b"changed later")
    assert (tmp_path / "cp" / "a.txt").read_bytes() == b"alpha"
    assert os.stat(tmp_path / "cp" / "a.txt").st_ino != os.stat(source / "a.txt").st_ino


def test_the_target_must_be_new_and_the_source_a_directory(source, tmp_path):
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "mine").write_text("kept")
    with pytest.raises(FileExistsError):
        DirStore().create_checkpoint(str(source), str(tmp_path / "cp"))
    assert os.listdir(tmp_path / "cp") == ["mine"]
    with pytest.raises(FileNotFoundError, match="not a directory"):
        DirStore().create_checkpoint(str(source / "a.txt"), str(tmp_path / "cp2"))
    assert not (tmp_path / "cp2").exists()


def test_a_fifo_is_refused_naming_it_and_no_checkpoint_is_left(source, tmp_path):
    os.mkfifo(source / "sub" / "pipe")
    with pytest.raises(UnsafePathError, match=r"'sub/pipe' is not a regular file, directory or symbolic link") as info:
        DirStore().create_checkpoint(str(source), str(tmp_path / "cp"))
    assert info.value.exit_code == 3
    assert not (tmp_path / "cp").exists()


def test_a_file_whose_bytes_never_match_its_stat_fails_after_the_attempts(tmp_path):
    # /proc files say size 0 and hold bytes: a copy never agrees with the file's stat, as with a file being written
    with pytest.raises(LocalStoreError, match=rf"file 'stat' changed as we read it \({COPY_ATTEMPTS} attempts\)"):
        copy_stable_file("/proc/self/stat", str(tmp_path / "copy"), name="stat")


def test_a_stable_file_is_copied_with_its_mode_and_mtime(tmp_path):
    src = tmp_path / "src"
    src.write_bytes(b"data" * 1000)
    os.chmod(src, 0o604)
    os.utime(src, ns=(MTIME, MTIME))
    copy_stable_file(str(src), str(tmp_path / "dst"), name="src")
    st = os.stat(tmp_path / "dst")
    assert (tmp_path / "dst").read_bytes() == b"data" * 1000
    assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (0o604, MTIME)


def test_a_link_is_never_followed_when_copied_as_a_file(tmp_path):
    (tmp_path / "secret").write_text("outside the store")
    os.symlink(tmp_path / "secret", tmp_path / "link")
    with pytest.raises(OSError):
        copy_stable_file(str(tmp_path / "link"), str(tmp_path / "copy"), name="link")


def test_every_file_is_mutable_and_any_directory_looks_like_a_dir_store(tmp_path):
    store = DirStore()
    assert store.is_mutable("x.sst") and store.is_mutable("MANIFEST") and store.store_type == "dir"
    assert looks_like_dir(str(tmp_path)) and not looks_like_dir(str(tmp_path / "missing"))
