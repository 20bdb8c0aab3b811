"""Issue 31: how a restore into a directory holding the previous version trusts the files it keeps
(``--verify-kept``), and where each mode's guarantee ends.

- ``cache`` (the default) reads a kept SST unless this host's checksum cache, keyed with ctime, vouches for it: a
  byte changed with the mtime put back moves ctime, the file is read and replaced (also
  ``test_a_damaged_destination_sst_with_its_mtime_put_back_is_downloaded_again``);
- ``identity`` keeps an SST whose size and nanosecond mtime are the index's without reading it; an SST of another
  lineage (same name and size, another mtime) is read and replaced; a kept SST whose footer is damaged makes the new
  tree fail to open, and the restore plans again reading every kept file. Its boundary, why it is not the default:
  bytes of a data block changed with the mtime put back are kept, and a reader can see a wrong state (rocksdict's
  iteration stops at the block it cannot verify, without an error);
- ``full`` reads every kept file even when this host's checksum cache vouches for it (damage below the file
  system, which moves no ctime)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fixtures_core import read_all, write_keys

import blobstate
from blobstate.local import checksum
from blobstate.local.checksum import stat_key
from blobstate.restoring import plan as plan_module


def _restored(tmp_path, repo, cli, n=30_000):
    store = tmp_path / "s"
    data = write_keys(store, n=n)
    assert cli("backup", store, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    return data, dest, max(dest.glob("*.sst"), key=lambda p: p.stat().st_size)


def _damage(sst: Path, offset: int, *, keep_mtime: bool = True) -> None:
    st = sst.stat()
    raw = bytearray(sst.read_bytes())
    raw[offset] ^= 0x40
    sst.write_bytes(bytes(raw))
    if keep_mtime:
        os.utime(sst, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert sst.stat().st_mtime_ns == st.st_mtime_ns
    assert sst.stat().st_size == st.st_size


def _restore(cli, dest, repo, tmp_path, *mode):
    r = cli("restore", dest, "--repo", repo, "--json", *mode, work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    return r.json()


def test_a_data_block_changed_with_its_mtime_put_back_is_replaced_by_default_and_kept_by_identity(tmp_path, repo,
                                                                                                   cli):
    data, dest, sst = _restored(tmp_path, repo, cli)
    _damage(sst, sst.stat().st_size // 3)
    assert _restore(cli, dest, repo, tmp_path, "--verify-kept", "identity")["filesDownloaded"] == 0  # kept unread
    assert read_all(dest) != data  # identity's boundary: what a reader sees is not the snapshot, and nothing says so
    assert _restore(cli, dest, repo, tmp_path)["filesDownloaded"] == 1  # the default: its ctime moved, read
    assert read_all(dest) == data


def test_an_sst_of_another_lineage_with_the_same_name_and_size_is_read_and_replaced(tmp_path, repo, cli):
    data, dest, sst = _restored(tmp_path, repo, cli)
    _damage(sst, sst.stat().st_size // 3, keep_mtime=False)  # same name and size, written at another time
    assert _restore(cli, dest, repo, tmp_path, "--verify-kept", "identity")["filesDownloaded"] == 1
    assert read_all(dest) == data


def test_a_kept_sst_whose_footer_is_damaged_makes_identity_read_every_kept_file(tmp_path, repo, cli):
    data, dest, sst = _restored(tmp_path, repo, cli)
    _damage(sst, sst.stat().st_size - 3)  # the table's magic number: the new tree does not open
    r = cli("restore", dest, "--repo", repo, "--json", "--verify-kept", "identity", work=tmp_path / "h")
    assert r.returncode == 0, r.stderr
    assert "planning again, every kept file read" in r.stderr
    assert r.json()["filesDownloaded"] == 1
    assert read_all(dest) == data


def test_full_reads_a_kept_file_the_checksum_cache_vouches_for(tmp_path, repo, cli):
    data, dest, sst = _restored(tmp_path, repo, cli)
    cache_file = next((tmp_path / "h").rglob("crc-cache.json"))
    good = json.loads(cache_file.read_text())[stat_key(sst.stat())]
    _damage(sst, sst.stat().st_size // 3)
    # damage below the file system moves no ctime: the cache entry still matches the file's stat key
    cache = json.loads(cache_file.read_text())
    cache[stat_key(sst.stat())] = good
    cache_file.write_text(json.dumps(cache))
    assert _restore(cli, dest, repo, tmp_path)["filesDownloaded"] == 0  # the default trusts the cache
    assert _restore(cli, dest, repo, tmp_path, "--verify-kept", "full")["filesDownloaded"] == 1
    assert read_all(dest) == data


def test_identity_reads_no_kept_sst_and_the_default_reads_them_when_this_host_never_hashed_them(
        tmp_path, repo, work_base, monkeypatch):
    from blobstate.cli import main_restore

    assert main_restore.VERIFY_KEPT == plan_module.VERIFY_KEPT  # the CLI's choices are the planner's
    store = tmp_path / "s"
    data = write_keys(store, n=30_000)
    blobstate.backup(str(store), repo=str(repo))
    previous = tmp_path / "previous" / "s"
    blobstate.restore(str(previous), repo=str(repo), work_base=str(tmp_path / "other-host"))
    write_keys(store, n=3_000, start=40_000, seed=1)  # a new SST; the others stay
    blobstate.backup(str(store), repo=str(repo))
    reads: list[str] = []
    real = checksum.crc32c_file
    monkeypatch.setattr(checksum, "crc32c_file", lambda path, *a, **k: reads.append(path) or real(path, *a, **k))
    monkeypatch.setattr(plan_module, "crc32c_file", checksum.crc32c_file)
    for mode, expect_reads in (("identity", False), ("cache", True)):
        dest = tmp_path / mode / "s"
        shutil.copytree(previous, dest)  # a copy of the previous version (mtimes kept): this host never hashed it
        reads.clear()
        result = blobstate.restore(str(dest), repo=str(repo), force=True, verify_kept=mode,
                                   work_base=str(tmp_path / f"host-{mode}"))
        kept_ssts = [r for r in os.listdir(dest) if r.endswith(".sst") and (previous / r).exists()]
        assert kept_ssts and result.files_kept >= len(kept_ssts), (mode, result)
        assert bool([p for p in reads if p.endswith(".sst")]) is expect_reads, (mode, reads)
        assert read_all(dest) == read_all(store)
    assert data.items() <= read_all(dest).items()
    with pytest.raises(blobstate.ConfigurationError):
        blobstate.restore(str(tmp_path / "x" / "s"), repo=str(repo), verify_kept="size")
