"""Issue 13 (restore is all or nothing) and issue 14 item 8: name clashes at any depth, a failure in the middle of
the swap (a real EBUSY from a mount point, and an injected one), a SIGKILL in the middle of the swap finished by the
next restore, RocksDB validation before the destination changes, restore into a mount point."""

from __future__ import annotations

import os
import shutil

import pytest
from fixtures_core import read_all, write_keys
from restore_helpers import tmpfs, tree_state


def _backup_dir(cli, src, repo, *extra):
    r = cli("backup", src, "--repo", repo, "--store-type", "dir", *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _no_staging(dest):
    return not [n for n in os.listdir(dest) if n.startswith(".blobstate-restore-")]


def _snapshot_tree(tmp_path):
    src = tmp_path / "src" / "s"
    (src / "p" / "m").mkdir(parents=True)
    (src / "p" / "m" / "1").write_text("deep file under p")
    (src / "q").write_text("q is a file in the snapshot")
    (src / "deep" / "a" / "b").mkdir(parents=True)
    (src / "deep" / "a" / "b" / "c").write_text("c")
    (src / "z.txt").write_text("last")
    return src


def test_a_file_where_the_snapshot_has_a_directory_and_back_at_any_depth(tmp_path, repo, cli):
    src = _snapshot_tree(tmp_path)
    _backup_dir(cli, src, repo)
    dest = tmp_path / "dest" / "s"
    (dest / "q" / "x" / "y").mkdir(parents=True)
    (dest / "q" / "x" / "y" / "f").write_text("a directory where the snapshot has the file q")
    (dest / "p").write_text("a file where the snapshot has p/m/1")
    (dest / "deep").mkdir()
    (dest / "deep" / "a").write_text("a file where the snapshot has deep/a/b/c")
    r = cli("restore", dest, "--repo", repo, "--force", "--json", work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert tree_state(dest) == tree_state(src)
    assert r.json()["filesRemoved"] == 3
    assert _no_staging(dest)


def _dest_with_content(tmp_path, names):
    dest = tmp_path / "dest" / "s"
    dest.mkdir(parents=True)
    for name in names:
        (dest / name).write_text(f"old {name}")
    return dest


def test_a_real_failure_in_the_middle_of_the_swap_leaves_the_destination_as_it_was(tmp_path, repo, cli):
    src = _snapshot_tree(tmp_path)
    _backup_dir(cli, src, repo)
    dest = _dest_with_content(tmp_path, ["a-first", "deep", "q", "z.txt"])
    with tmpfs(dest / "n-mounted", size="1m") as mounted:  # moving a mount point fails with EBUSY
        (mounted / "data").write_text("on another file system")
        before = tree_state(dest, mtimes=True)
        r = cli("restore", dest, "--repo", repo, "--force", work=tmp_path / "h")
        assert r.returncode == 1, r.stderr
        assert "LocalStoreError" in r.stderr and "the destination is as it was" in r.stderr
        assert tree_state(dest, mtimes=True) == before
        assert _no_staging(dest)


def test_an_error_in_the_middle_of_the_swap_is_undone(tmp_path, repo, work_base, monkeypatch):
    import blobstate
    from blobstate.errors import LocalStoreError
    from blobstate.restoring import swap

    src = _snapshot_tree(tmp_path)
    blobstate.backup(str(src), repo=str(repo), store_type="dir")
    dest = _dest_with_content(tmp_path, ["a-first", "deep", "p", "q", "z.txt"])
    (dest / "link").symlink_to("/etc")
    before = tree_state(dest, mtimes=True)
    real_rename, real_swap, calls = os.rename, swap.Staging.swap, {"n": 0, "swapping": False}

    def failing_rename(a, b):
        if calls["swapping"]:  # the swap's renames only (files fetched ahead are renamed into staging before it)
            calls["n"] += 1
            if calls["n"] == 4:
                raise OSError(5, "Input/output error (injected)")
        return real_rename(a, b)

    def swapping(self, steps):
        calls["swapping"] = True
        try:
            return real_swap(self, steps)
        finally:
            calls["swapping"] = False

    monkeypatch.setattr(swap.os, "rename", failing_rename)
    monkeypatch.setattr(swap.Staging, "swap", swapping)
    with pytest.raises(LocalStoreError, match="injected"):
        blobstate.restore(str(dest), repo=str(repo), force=True, work_dir=str(tmp_path / "h"))
    monkeypatch.undo()
    assert calls["n"] > 4, "the rollback renamed nothing back"
    assert tree_state(dest, mtimes=True) == before
    assert _no_staging(dest)


def test_a_crash_in_the_middle_of_the_swap_is_undone_by_the_next_restore(tmp_path, repo, cli):
    src = _snapshot_tree(tmp_path)
    _backup_dir(cli, src, repo)
    dest = _dest_with_content(tmp_path, ["a-first", "deep", "p", "q", "z.txt"])
    old = tree_state(dest)
    killer = {"BLOBSTATE_PLUGINS": "swap_killer", "BLOBSTATE_TEST_KILL_AT_RENAME": "5"}
    r = cli("restore", dest, "--repo", repo, "--force", env=killer, work=tmp_path / "h")
    assert r.returncode == -9, r.stderr
    visible = {k: v for k, v in tree_state(dest).items() if not k.startswith(".blobstate-restore-")}
    assert visible != old and visible != tree_state(src), "the kill did not land in the middle of the swap"
    assert not _no_staging(dest)

    refused = cli("restore", dest, "--repo", repo, work=tmp_path / "h")  # not ours: refused, after the undo
    assert refused.returncode == 2, refused.stderr
    assert tree_state(dest) == old
    again = cli("restore", dest, "--repo", repo, "--force", work=tmp_path / "h")
    assert again.returncode == 0, again.stderr
    assert tree_state(dest) == tree_state(src)


def test_a_crash_while_restoring_into_a_new_directory_is_cleaned_up_by_the_next_restore(tmp_path, repo, cli):
    src = _snapshot_tree(tmp_path)
    _backup_dir(cli, src, repo)
    dest = tmp_path / "new" / "s"
    killer = {"BLOBSTATE_PLUGINS": "swap_killer", "BLOBSTATE_TEST_KILL_AT_RENAME": "2"}
    assert cli("restore", dest, "--repo", repo, env=killer, work=tmp_path / "h").returncode == -9
    again = cli("restore", dest, "--repo", repo, "--json", work=tmp_path / "h")
    assert again.returncode == 0, again.stderr
    assert again.json()["recovered"], "the interrupted restore was not reported"
    assert tree_state(dest) == tree_state(src)


def test_a_rocksdb_snapshot_that_does_not_open_leaves_the_destination_as_it_was(tmp_path, repo, cli):
    db = tmp_path / "db" / "s"
    data = write_keys(db, n=3_000)
    assert cli("backup", db, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    bogus = tmp_path / "bogus" / "s"
    bogus.mkdir(parents=True)
    (bogus / "CURRENT").write_text("MANIFEST-000099\n")  # names a MANIFEST that is not there
    (bogus / "000001.sst").write_bytes(os.urandom(2000))
    _backup_dir(cli, bogus, repo)
    before = tree_state(dest, mtimes=True)
    r = cli("restore", dest, "--repo", repo, "--store-type", "rocksdb", work=tmp_path / "h")
    assert r.returncode == 3, r.stderr
    assert "does not open" in r.stderr
    assert tree_state(dest, mtimes=True) == before
    assert read_all(dest) == data
    assert _no_staging(dest)


def test_restore_into_a_mount_point(tmp_path, repo, cli):
    store = tmp_path / "s"
    data = write_keys(store, n=5_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    write_keys(store, n=500, start=100_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    with tmpfs(tmp_path / "volume" / "s") as volume:
        first = cli("restore", volume, "--repo", repo, "--json", work=tmp_path / "h")
        assert first.returncode == 0, first.stderr
        assert len(read_all(volume)) == len(data) + 500
        older = cli("list", "--repo", repo, "--store", "s", "--json").json()[0]["checkpointId"]
        again = cli("restore", volume, "--repo", repo, "--checkpoint", older, "--json", work=tmp_path / "h")
        assert again.returncode == 0, again.stderr
        assert read_all(volume) == data
        assert _no_staging(volume)
        assert os.path.ismount(volume)


def test_restore_through_a_symlink_in_the_destination_never_writes_outside(tmp_path, repo, cli):
    src = _snapshot_tree(tmp_path)
    _backup_dir(cli, src, repo)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "m").mkdir()
    (outside / "keep").write_text("not restore's to touch")
    dest = tmp_path / "dest" / "s"
    dest.mkdir(parents=True)
    (dest / "p").symlink_to(outside)  # the snapshot has p/m/1: must replace the link, not write through it
    (dest / "q").symlink_to(outside / "keep")
    before_outside = tree_state(outside, mtimes=True)
    r = cli("restore", dest, "--repo", repo, "--force", work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert tree_state(outside, mtimes=True) == before_outside
    assert tree_state(dest) == tree_state(src)
    shutil.rmtree(dest)
