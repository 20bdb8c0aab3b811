"""``blobstate.spark.executor.leftovers`` (its sweep and held directories: ``blobstate.local.held``) with real
``flock`` locks under ``tmp_path`` (a lock another descriptor holds is a live task's, as a lock another process
holds): a held directory is removed with its lock file when the block ends; a sweep removes only what no one holds,
only what the pattern names, at most ``limit`` at a time, and the lock files left without their directory once they
are old; a scratch directory sweeps its siblings of every kind first."""

from __future__ import annotations

import logging
import os

import pytest

from blobstate.local.files import try_lock
from blobstate.spark.executor import leftovers as lo
from blobstate.spark.executor.leftovers import HELD, held_dir, scratch_dir, sweep, sweep_scratch


def leftover(parent, name: str) -> str:
    """A directory a killed task left: the directory and its (free) lock file."""
    path = parent / name
    path.mkdir(parents=True)
    (path / "000012.sst").write_bytes(b"x")
    (parent / (name + HELD)).write_bytes(b"")
    return str(path)


def test_a_held_directory_is_removed_with_its_lock_file_at_the_end_of_the_block(tmp_path):
    path = str(tmp_path / "snapshot-1")
    with held_dir(path) as held:
        assert held == path and os.path.exists(path + HELD)
        os.mkdir(path)  # the RocksDB checkpoint creates it
        assert try_lock(path + HELD) is None  # held meanwhile
    assert not os.path.exists(path) and not os.path.exists(path + HELD)


def test_a_held_directory_is_removed_when_the_block_fails_too(tmp_path):
    path = str(tmp_path / "snapshot-2")
    with pytest.raises(ValueError):
        with held_dir(path):
            os.mkdir(path)
            raise ValueError("the upload failed")
    assert sorted(os.listdir(tmp_path)) == []


def test_a_directory_someone_holds_cannot_be_held_again(tmp_path):
    path = str(tmp_path / "snapshot-3")
    fd = try_lock(path + HELD)
    try:
        with pytest.raises(BlockingIOError, match="is held by another process"):
            with held_dir(path):
                pass
    finally:
        os.close(fd)


def test_a_sweep_removes_what_no_one_holds_and_leaves_the_rest(tmp_path, caplog):
    dead = leftover(tmp_path, "snapshot-dead")
    live = leftover(tmp_path, "snapshot-live")
    other = leftover(tmp_path, "blobstate-read-x")
    (tmp_path / "snapshot-a-file").write_text("not a directory")
    fd = try_lock(live + HELD)
    try:
        with caplog.at_level(logging.INFO, logger="blobstate.local.held"):
            assert sweep(str(tmp_path), "snapshot-*") == [dead]
    finally:
        os.close(fd)
    assert not os.path.exists(dead) and not os.path.exists(dead + HELD)
    assert os.path.isdir(live) and os.path.isdir(other) and (tmp_path / "snapshot-a-file").exists()
    assert f"removed {dead}: a local leftover of a task that died" in caplog.text


def test_a_sweep_is_bounded_and_says_more_wait(tmp_path, caplog):
    made = [leftover(tmp_path, f"blobstate-write-{i:02}") for i in range(5)]
    with caplog.at_level(logging.INFO, logger="blobstate.local.held"):
        assert sweep(str(tmp_path), ("blobstate-write-*",), limit=3) == made[:3]
    assert "swept 3 leftovers" in caplog.text and "more wait for the next sweep" in caplog.text
    assert sweep(str(tmp_path), ("blobstate-write-*",), limit=3) == made[3:]


def test_a_lock_file_without_its_directory_is_removed_once_old_and_free(tmp_path):
    young, old, held = (str(tmp_path / f"blobstate-read-{n}{HELD}") for n in ("young", "old", "held"))
    for path in (young, old, held):
        open(path, "w").close()
    an_hour_ago = os.stat(old).st_mtime - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    os.utime(held, (an_hour_ago, an_hour_ago))
    fd = try_lock(held)
    try:
        assert sweep(str(tmp_path), "blobstate-read-*") == []  # lock files are not reported as directories
    finally:
        os.close(fd)
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in (young, held))


def test_a_sweep_of_a_folder_that_is_not_there_is_nothing(tmp_path):
    assert sweep(str(tmp_path / "missing"), "*") == []


def test_a_scratch_directory_sweeps_every_kind_of_its_siblings_first(tmp_path):
    dead = [leftover(tmp_path, f"{kind}old") for kind in lo.SCRATCH_KINDS]
    unrelated = leftover(tmp_path, "snapshot-7")
    with scratch_dir(str(tmp_path), "blobstate-read-") as path:
        assert os.path.basename(path).startswith("blobstate-read-") and os.path.isdir(path)
        assert os.path.exists(path + HELD) and try_lock(path + HELD) is None
        assert not any(os.path.exists(d) for d in dead)
        assert sweep_scratch(str(tmp_path)) == str(tmp_path) and os.path.isdir(path)  # a live one is kept
    assert not os.path.exists(path) and not os.path.exists(path + HELD)
    assert os.path.isdir(unrelated)


def test_scratch_in_a_folder_that_is_not_there_yet_creates_it(tmp_path):
    parent = tmp_path / "local" / "scratch"
    with scratch_dir(str(parent), "blobstate-rescale-write-") as path:
        assert os.path.dirname(path) == str(parent)
    assert os.listdir(parent) == []
