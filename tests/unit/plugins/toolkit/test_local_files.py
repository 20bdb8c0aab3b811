"""``blobstate.plugins.toolkit.local_files``: a ``file://`` repository on the local disk never follows a symlink
below its root (read, write, list, delete raise ``UnsafePathError``) nor reaches outside it, while its root may sit
under a symlink; ``replace_if`` is a compare-and-swap; ranges are copied exactly and a short source is a
``StorageError``."""

from __future__ import annotations

import hashlib
import os

import pytest

from blobstate.errors import ObjectChangedError, StorageError, UnsafePathError
from blobstate.plugins.toolkit.local_files import REWRITE_TMP, LocalRepository


def _version(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def root(tmp_path):
    (tmp_path / "repo").mkdir()
    return tmp_path / "repo"


def test_writes_create_the_directories_and_read_back(root):
    repo = LocalRepository(str(root))
    path = str(root / "job" / "0" / "s" / "blobs" / "a")
    repo.write_bytes(path, b"hello")
    assert repo.read_bytes(path) == b"hello" and repo.exists(path)
    assert [(os.path.relpath(p, root), st.st_size) for p, st in repo.walk(str(root))] == [("job/0/s/blobs/a", 5)]


def test_a_symlink_below_the_root_is_never_followed(root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_bytes(b"not the repository's")
    os.symlink(outside, root / "job")
    repo = LocalRepository(str(root))
    target = str(root / "job" / "victim")
    for call in (lambda: repo.read_bytes(target), lambda: repo.write_bytes(target, b"x"), lambda: repo.remove(target),
                 lambda: list(repo.walk(str(root))), lambda: repo.exists(target)):
        with pytest.raises(UnsafePathError, match="symlink inside the repository"):
            call()
    assert (outside / "victim").read_bytes() == b"not the repository's"


def test_a_symlinked_file_is_not_opened(root, tmp_path):
    (tmp_path / "secret").write_bytes(b"outside")
    os.symlink(tmp_path / "secret", root / "marker")
    repo = LocalRepository(str(root))
    with pytest.raises(UnsafePathError):
        repo.read_bytes(str(root / "marker"))
    with pytest.raises(UnsafePathError):
        repo.write_bytes(str(root / "marker"), b"x")
    assert (tmp_path / "secret").read_bytes() == b"outside"


def test_a_path_outside_the_root_is_refused(root, tmp_path):
    repo = LocalRepository(str(root))
    with pytest.raises(UnsafePathError, match="outside the repository"):
        repo.write_bytes(str(tmp_path / "elsewhere"), b"x")
    with pytest.raises(UnsafePathError, match="outside the repository"):
        repo.remove_empty_dirs(str(tmp_path / "elsewhere"))
    assert not (tmp_path / "elsewhere").exists()


def test_the_root_itself_may_be_reached_through_a_symlink(root, tmp_path):
    os.symlink(root, tmp_path / "link")
    repo = LocalRepository(str(tmp_path / "link"))
    repo.write_bytes(str(tmp_path / "link" / "a" / "b"), b"ok")
    assert (root / "a" / "b").read_bytes() == b"ok"


def test_a_missing_file_reads_as_not_found_and_removes_quietly(root):
    repo = LocalRepository(str(root))
    with pytest.raises(FileNotFoundError):
        repo.read_bytes(str(root / "none"))
    with pytest.raises(FileNotFoundError):
        repo.read_bytes(str(root / "none" / "deeper"))
    repo.remove(str(root / "none"))
    assert not repo.exists(str(root / "none"))


def test_empty_directories_go_up_to_the_first_that_holds_something(root):
    repo = LocalRepository(str(root))
    repo.write_bytes(str(root / "a" / "keep"), b"x")
    os.makedirs(root / "a" / "b" / "c")
    repo.remove_empty_dirs(str(root / "a" / "b" / "c"))
    assert sorted(os.listdir(root / "a")) == ["keep"] and root.is_dir()


def test_a_range_is_copied_exactly_and_a_short_source_is_a_storage_error(root, tmp_path):
    source = tmp_path / "source"
    source.write_bytes(bytes(range(256)) * 10)
    repo = LocalRepository(str(root), fsync=False)
    repo.write_range(str(root / "r"), str(source), 100, 1000)
    assert (root / "r").read_bytes() == (bytes(range(256)) * 10)[100:1100]
    with pytest.raises(StorageError):
        repo.write_range(str(root / "short"), str(source), 2000, 1000)


def test_link_into_place_refuses_an_existing_name_and_drops_the_temp_file(root):
    repo = LocalRepository(str(root))
    repo.write_bytes(str(root / "tmp1"), b"first")
    repo.link_into_place(str(root / "tmp1"), str(root / "record"))
    repo.write_bytes(str(root / "tmp2"), b"second")
    with pytest.raises(FileExistsError):
        repo.link_into_place(str(root / "tmp2"), str(root / "record"))
    assert (root / "record").read_bytes() == b"first" and sorted(os.listdir(root)) == ["record"]


def test_replace_if_swaps_only_from_the_version_read(root):
    repo = LocalRepository(str(root))
    path = str(root / "marker")
    repo.write_bytes(path, b"v1")
    (root / f"marker{REWRITE_TMP}killed").write_bytes(b"left by a killed rewrite")
    repo.replace_if(path, b"v2", _version(b"v1"), _version)
    assert repo.read_bytes(path) == b"v2" and sorted(os.listdir(root)) == ["marker"]
    with pytest.raises(ObjectChangedError, match="changed since it was read"):
        repo.replace_if(path, b"v3", _version(b"v1"), _version)  # a second rewrite from the same version
    assert repo.read_bytes(path) == b"v2"
    with pytest.raises(ObjectChangedError, match="vanished"):
        repo.replace_if(str(root / "gone"), b"x", _version(b""), _version)
    assert not (root / "gone").exists()
