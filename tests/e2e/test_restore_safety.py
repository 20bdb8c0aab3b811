"""Issue 13: restore refuses what it did not make unless forced, dry runs change nothing, a stale checksum cache
is never trusted, the dir store gives a directory back as it was, a content change that keeps size and CRC32C is
uploaded, a file changing under the copy never lands torn in a snapshot, NothingToRestore names the stores."""

from __future__ import annotations

import os
import random
import stat
import subprocess
import sys
import textwrap

import google_crc32c
from fixtures_core import read_all, repo_files, write_keys
from restore_helpers import tree_state


def _files_under(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# -- refusing what restore did not make ------------------------------------------------------------------------
def test_restore_refuses_a_non_empty_directory_it_did_not_make_unless_forced(tmp_path, repo, cli):
    store = tmp_path / "s"
    data = write_keys(store, n=1_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    sandbox = tmp_path / "sandbox"
    (sandbox / "project-a").mkdir(parents=True)
    (sandbox / "project-a" / "main.py").write_text("print('unrelated work')")
    (sandbox / "notes.txt").write_text("keep me")
    before = tree_state(sandbox, mtimes=True)
    r = cli("restore", sandbox, "--repo", repo, "--store", "s", work=tmp_path / "h")
    assert r.returncode == 2, r.stderr
    assert "--force" in r.stderr and "not empty" in r.stderr
    assert tree_state(sandbox, mtimes=True) == before
    forced = cli("restore", sandbox, "--repo", repo, "--store", "s", "--force", work=tmp_path / "h")
    assert forced.returncode == 0, forced.stderr
    assert read_all(sandbox) == data
    assert not (sandbox / "notes.txt").exists() and not (sandbox / "project-a").exists()


def test_a_destination_restore_made_is_restored_again_without_force_and_holds_only_the_snapshot(tmp_path, repo,
                                                                                                 cli):
    src = tmp_path / "src" / "s"
    src.mkdir(parents=True)
    (src / "a").write_text("one")
    assert cli("backup", src, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    assert _files_under(dest) == ["a"], "restore left a marker of its own in the destination"
    (dest / "written-by-the-job").write_text("x")
    (src / "a").write_text("two")
    assert cli("backup", src, "--repo", repo).returncode == 0
    again = cli("restore", dest, "--repo", repo, work=tmp_path / "h")
    assert again.returncode == 0, again.stderr
    assert _files_under(dest) == ["a"] and (dest / "a").read_text() == "two"
    other_host = cli("restore", dest, "--repo", repo, work=tmp_path / "other-host")  # does not know it
    assert other_host.returncode == 2


def test_restore_refuses_a_destination_that_is_a_file(tmp_path, repo, cli):
    src = tmp_path / "s"
    src.mkdir()
    (src / "a").write_text("a")
    assert cli("backup", src, "--repo", repo).returncode == 0
    (tmp_path / "f").write_text("a file")
    r = cli("restore", tmp_path / "f", "--repo", repo, "--store", "s", "--force", work=tmp_path / "h")
    assert r.returncode == 2 and (tmp_path / "f").read_text() == "a file"


# -- dry runs ----------------------------------------------------------------------------------------------------
def test_restore_dry_run_prints_the_changes_and_changes_nothing(tmp_path, repo, cli, work_base):
    src = tmp_path / "src" / "s"
    (src / "sub").mkdir(parents=True)
    (src / "keep.txt").write_text("same")
    (src / "sub" / "new.bin").write_bytes(os.urandom(100))
    assert cli("backup", src, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    dest.mkdir(parents=True)
    (dest / "keep.txt").write_text("same")
    (dest / "extra.txt").write_text("the snapshot lacks this")
    before = tree_state(dest, mtimes=True)
    work_before = _files_under(work_base)
    unforced = cli("restore", dest, "--repo", repo, "--dry-run")  # a preview, and the word that a restore needs
    assert unforced.returncode == 0 and "--force" in unforced.stderr, unforced.stderr  # --force (issue 29.6)
    assert unforced.stdout.splitlines() == ["remove extra.txt", "mkdir sub", "reuse sub/new.bin"]
    r = cli("restore", dest, "--repo", repo, "--dry-run", "--force")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["remove extra.txt", "mkdir sub", "reuse sub/new.bin"]  # this host's checkpoint
    elsewhere = cli("restore", dest, "--repo", repo, "--dry-run", "--force", work=tmp_path / "other-host")
    assert elsewhere.stdout.splitlines() == ["remove extra.txt", "mkdir sub", "download sub/new.bin"]
    assert tree_state(dest, mtimes=True) == before
    assert _files_under(work_base) == work_before and not (tmp_path / "other-host").exists()
    as_json = cli("restore", dest, "--repo", repo, "--dry-run", "--force", "--json").json()
    assert as_json["dryRun"] is True and as_json["filesReused"] == 1 and as_json["filesKept"] == 1
    assert as_json["needsForce"] is False and cli("restore", dest, "--repo", repo, "--dry-run", "--json").json()[
        "needsForce"] is True
    assert cli("restore", dest, "--repo", repo).returncode == 2  # the restore itself is refused without --force


def test_backup_dry_run_prints_what_would_be_uploaded_and_writes_nothing(tmp_path, repo, cli, work_base):
    src = tmp_path / "s"
    src.mkdir()
    (src / "a.txt").write_text("a")
    (src / "b.txt").write_text("b")
    assert cli("backup", src, "--repo", repo).returncode == 0
    (src / "a.txt").write_text("A changed")
    (src / "b.txt").unlink()
    (src / "c.txt").write_text("new")
    repo_before, work_before = _files_under(repo), _files_under(work_base)
    r = cli("backup", src, "--repo", repo, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["upload a.txt", "upload c.txt", "remove b.txt"]
    assert _files_under(repo) == repo_before and _files_under(work_base) == work_before
    doc = cli("backup", src, "--repo", repo, "--dry-run", "--json").json()
    assert doc["filesToUpload"] == ["a.txt", "c.txt"] and doc["bytesToUpload"] == len("A changed") + 3


# -- the checksum cache ------------------------------------------------------------------------------------------
def test_a_damaged_destination_sst_with_its_mtime_put_back_is_downloaded_again(tmp_path, repo, cli):
    store = tmp_path / "s"
    data = write_keys(store, n=30_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    sst = max(dest.glob("*.sst"), key=lambda p: p.stat().st_size)
    st = sst.stat()
    raw = bytearray(sst.read_bytes())
    raw[len(raw) // 3] ^= 0x40
    sst.write_bytes(bytes(raw))
    os.utime(sst, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert sst.stat().st_mtime_ns == st.st_mtime_ns and sst.stat().st_size == st.st_size
    r = cli("restore", dest, "--repo", repo, "--json", work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert r.json()["filesDownloaded"] == 1
    assert read_all(dest) == data


# -- the dir store round trip ------------------------------------------------------------------------------------
def _odd_tree(root):
    (root / "empty" / "nested-empty").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin" / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "bin" / "tool.sh", 0o755)
    (root / "secret.key").write_text("private")
    os.chmod(root / "secret.key", 0o600)
    (root / "k:v.txt").write_text("colon")
    (root / "a\\b.txt").write_text("backslash")
    (root / " lead and trail ").write_text("spaces")
    (root / ".blobstate-checkpoint").write_text("a user file with blobstate's old marker name")
    (root / "new\nline").write_text("a newline in the name")
    with open(os.path.join(os.fsencode(root), b"latin1-\xe9.txt"), "w") as fh:
        fh.write("not UTF-8")
    (root / "link-rel").symlink_to("bin/tool.sh")
    (root / "link-abs").symlink_to("/etc/hostname")
    (root / "dangling").symlink_to("does/not/exist")
    (root / "dirlink").symlink_to("empty")
    os.chmod(root / "empty", 0o750)
    os.utime(root / "secret.key", ns=(1_000_000_000, 1_234_567_891_011_121_314))


def test_the_dir_store_gives_a_directory_back_as_it_was(tmp_path, repo, cli):
    src = tmp_path / "src" / "s"
    src.mkdir(parents=True)
    _odd_tree(src)
    r = cli("backup", src, "--repo", repo)
    assert r.returncode == 0, r.stderr
    assert cli("verify", "--repo", repo, "--store", "s").returncode == 0
    dest = tmp_path / "dest" / "s"
    r = cli("restore", dest, "--repo", repo, work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert tree_state(dest, mtimes=True) == tree_state(src, mtimes=True)
    assert os.path.islink(dest / "link-abs") and os.readlink(dest / "link-abs") == "/etc/hostname"
    assert stat.S_IMODE((dest / "secret.key").stat().st_mode) == 0o600
    again = cli("restore", dest, "--repo", repo, "--json", work=tmp_path / "h")  # all kept
    assert again.json()["filesDownloaded"] == 0 and tree_state(dest, mtimes=True) == tree_state(src, mtimes=True)


def test_a_fifo_is_refused_at_backup_and_nothing_is_committed(tmp_path, repo, cli):
    src = tmp_path / "s"
    src.mkdir()
    (src / "a").write_text("a")
    os.mkfifo(src / "pipe")
    r = cli("backup", src, "--repo", repo)
    assert r.returncode == 3, r.stderr
    assert "pipe" in r.stderr and "FIFO" in r.stderr
    assert not repo_files(repo, "indexes")


def test_a_tree_deeper_than_a_restore_accepts_is_refused_at_backup(tmp_path, repo, cli):
    from blobstate.model.names import MAX_DEPTH

    src = tmp_path / "s"
    deep = src.joinpath(*["d"] * (MAX_DEPTH + 1))
    deep.mkdir(parents=True)
    (deep / "f").write_text("too deep")
    r = cli("backup", src, "--repo", repo)
    assert r.returncode == 3, r.stderr
    assert "deeper" in r.stderr


# -- content changes that keep size and CRC32C --------------------------------------------------------------------
def _crc32c_collision(length: int = 16) -> tuple[bytes, bytes]:
    """Two different byte strings of ``length`` with the same CRC32C (a birthday search: ~2^16 tries)."""
    rnd = random.Random(13)
    seen: dict[int, bytes] = {}
    for _ in range(2_000_000):
        data = rnd.randbytes(length)
        crc = google_crc32c.value(data)
        if crc in seen and seen[crc] != data:
            return seen[crc], data
        seen[crc] = data
    raise AssertionError("no collision found")


def test_a_change_that_keeps_size_and_crc32c_is_uploaded_and_restored(tmp_path, repo, cli):
    one, two = _crc32c_collision()
    assert one != two and len(one) == len(two) and google_crc32c.value(one) == google_crc32c.value(two)
    src = tmp_path / "s"
    src.mkdir()
    (src / "state.bin").write_bytes(one)
    assert cli("backup", src, "--repo", repo).returncode == 0
    (src / "state.bin").write_bytes(two)
    r = cli("backup", src, "--repo", repo, "--json")
    assert r.returncode == 0, r.stderr
    assert r.json()["filesUploaded"] == 1
    dest = tmp_path / "out" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    assert (dest / "state.bin").read_bytes() == two
    (dest / "state.bin").write_bytes(one)  # a kept file with the right size and CRC32C but other content
    again = cli("restore", dest, "--repo", repo, "--json", work=tmp_path / "h")
    assert again.json()["filesDownloaded"] == 1 and (dest / "state.bin").read_bytes() == two


# -- a file written during the copy -------------------------------------------------------------------------------
WRITER = textwrap.dedent("""
    import os, struct, sys
    path, size = sys.argv[1], int(sys.argv[2])
    fd = os.open(path, os.O_WRONLY)
    print("ready", flush=True)
    counter = 0
    while True:  # each step writes the counter into the first block, then into the last one
        counter += 1
        block = struct.pack("<Q", counter) * 512
        os.pwrite(fd, block, 0)
        os.pwrite(fd, block, size - 4096)
""")


def test_a_file_written_during_the_copy_is_never_committed_torn(tmp_path, repo, cli):
    """At every instant the file's first block holds the counter of its last block or one more; a copy taken
    while the writer runs (first block read long before the last) holds a last block far ahead: torn."""
    import struct

    src = tmp_path / "s"
    src.mkdir()
    size = 8 << 20
    (src / "busy.bin").write_bytes(bytes(size))
    (src / "quiet.txt").write_text("quiet")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(src / "busy.bin"), str(size)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "ready"
        outcomes = [cli("backup", src, "--repo", repo) for _ in range(3)]
    finally:
        writer.kill()
        writer.wait()
    for r in outcomes:
        assert r.returncode in (0, 1), r.stderr
        if r.returncode == 1:
            assert "busy.bin" in r.stderr and "changed as we read it" in r.stderr
            continue
        cp = r.stdout.strip()
        dest = tmp_path / "out" / cp / "s"
        restored = cli("restore", dest, "--repo", repo, "--checkpoint", cp, work=tmp_path / "h" / cp)
        assert restored.returncode == 0, restored.stderr
        data = (dest / "busy.bin").read_bytes()
        first, last = struct.unpack_from("<Q", data, 0)[0], struct.unpack_from("<Q", data, size - 4096)[0]
        assert first in (last, last + 1), f"torn copy: first block {first}, last block {last}"


# -- nothing to restore --------------------------------------------------------------------------------------------
def test_nothing_to_restore_names_the_stores_that_exist(tmp_path, repo, cli):
    for name in ("counts", "sessions"):
        store = tmp_path / name
        store.mkdir()
        (store / "x").write_text(name)
        assert cli("backup", store, "--repo", repo, "--job", "clicks").returncode == 0
    r = cli("restore", tmp_path / "restored-state", "--repo", repo)
    assert r.returncode == 5
    assert "clicks/0/counts" in r.stderr and "clicks/0/sessions" in r.stderr and "--store" in r.stderr
