"""Issue 13 (a live RocksDB: backup holds every acknowledged write, restore refuses a store a live process holds)
and issue 14 item 5 (a restored store's OPTIONS never make it write or delete outside its directory).

A second process holds the store open and writes, exactly as a running job does; it flushes on command, so a
flush lands between the checkpoint and the copy of the WAL at a chosen moment."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fixtures_core import read_all, write_keys
from restore_helpers import tree_state

HOLDER = textwrap.dedent("""
    import sys
    from rocksdict import Options, Rdict
    path, flushed, unflushed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    options = Options()
    options.create_if_missing(True)
    if len(sys.argv) > 4:
        options.set_wal_dir(sys.argv[4])
        options.set_db_log_dir(sys.argv[5])
    db = Rdict(path, options)
    for i in range(flushed):
        db[b"flushed%08d" % i] = b"f" * 40
    db.flush(True)
    for i in range(unflushed):
        db[b"unflushed%08d" % i] = b"u" * 40
    print("ready", flush=True)
    round_no = 0
    for line in sys.stdin:
        if line.strip() == "flush":  # more writes, a flush (a new SST and MANIFEST version), more writes
            round_no += 1
            for i in range(500):
                db[b"round%03d-%05d" % (round_no, i)] = b"r"
            db.flush(True)
            for i in range(500):
                db[b"after%03d-%05d" % (round_no, i)] = b"a"
            print("ok", flush=True)
        elif line.strip() == "quit":
            break
    db.close()
""")


class Holder:
    """A process holding a RocksDB open (read-write) and writing to it."""

    def __init__(self, path: Path, flushed: int = 1000, unflushed: int = 0, *extra: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(flushed), str(unflushed), *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"
        self.rounds = 0
        self.expected = {b"flushed%08d" % i: b"f" * 40 for i in range(flushed)}
        self.expected.update({b"unflushed%08d" % i: b"u" * 40 for i in range(unflushed)})

    def flush_round(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("flush\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"
        self.rounds += 1
        self.expected.update({b"round%03d-%05d" % (self.rounds, i): b"r" for i in range(500)})
        self.expected.update({b"after%03d-%05d" % (self.rounds, i): b"a" for i in range(500)})

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=30)


@pytest.fixture
def holder_factory():
    holders: list[Holder] = []

    def make(*args):
        holder = Holder(*args)
        holders.append(holder)
        return holder

    yield make
    for holder in holders:
        holder.close()


def test_backup_from_the_path_while_another_process_writes_keeps_its_unflushed_writes(tmp_path, repo, cli,
                                                                                      holder_factory):
    store = tmp_path / "s"
    holder = holder_factory(store, 1000, 50_000)  # 50,000 keys acknowledged, only in the WAL and memtable
    r = cli("backup", store, "--repo", repo)
    assert r.returncode == 0, r.stderr
    dest = tmp_path / "restored" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "new-host").returncode == 0
    assert read_all(dest) == holder.expected


def test_backup_through_the_live_handle_keeps_unflushed_writes(tmp_path, repo, work_base):
    from rocksdict import Rdict, WriteOptions

    import blobstate

    store = tmp_path / "s"
    db = Rdict(str(store))
    try:
        write = WriteOptions()
        for i in range(20_000):
            db.put(b"k%08d" % i, b"v" * 30, write)
        blobstate.backup(str(store), repo=str(repo), source=db)
    finally:
        db.close()
    dest = tmp_path / "restored" / "s"
    blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert len(read_all(dest)) == 20_000


def _flush_before_wal_copy(monkeypatch, holder, times):
    """Make the holder flush (a new version) right before the checkpoint copies the WAL, ``times`` times."""
    from blobstate.plugins import rocksdb_store

    real = rocksdb_store.shutil.copyfile
    state = {"left": times, "copies": 0}

    def copyfile(src, dst, *args, **kwargs):
        if str(src).endswith(".log"):
            state["copies"] += 1
            if state["left"]:
                state["left"] -= 1
                holder.flush_round()
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(rocksdb_store.shutil, "copyfile", copyfile)
    return state


def test_a_flush_between_the_checkpoint_and_the_wal_copy_is_caught_and_the_checkpoint_taken_again(
        tmp_path, repo, work_base, holder_factory, monkeypatch):
    import blobstate

    store = tmp_path / "s"
    holder = holder_factory(store, 2000, 3000)
    state = _flush_before_wal_copy(monkeypatch, holder, times=2)
    blobstate.backup(str(store), repo=str(repo))
    monkeypatch.undo()
    assert state["left"] == 0 and state["copies"] >= 3
    dest = tmp_path / "restored" / "s"
    blobstate.restore(str(dest), repo=str(repo), work_dir=str(tmp_path / "h"))
    assert read_all(dest) == holder.expected


def test_a_store_that_never_settles_is_refused_naming_the_live_handle_api(tmp_path, repo, work_base,
                                                                           holder_factory, monkeypatch):
    import blobstate
    from blobstate.errors import LocalStoreError
    from blobstate.plugins import rocksdb_store

    store = tmp_path / "s"
    holder = holder_factory(store, 100, 100)
    monkeypatch.setattr(rocksdb_store, "PATH_ATTEMPTS", 3)
    _flush_before_wal_copy(monkeypatch, holder, times=1_000)
    with pytest.raises(LocalStoreError, match=r"source=db"):
        blobstate.backup(str(store), repo=str(repo))
    assert not list((repo / "checkpoints").rglob("*.json")) if (repo / "checkpoints").exists() else True


def test_restore_into_a_store_another_process_has_open_is_refused(tmp_path, repo, cli, holder_factory):
    store = tmp_path / "s"
    data = write_keys(store, n=2_000)
    assert cli("backup", store, "--repo", repo).returncode == 0
    dest = tmp_path / "dest" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    holder = holder_factory(dest, 10, 0)  # the job opened the restored store

    def files():  # the job's own info LOG grows by itself
        return {k: v for k, v in tree_state(dest, mtimes=True).items() if not k.startswith("LOG")}

    before = files()
    for extra in ((), ("--force",)):
        r = cli("restore", dest, "--repo", repo, *extra, work=tmp_path / "h")
        assert r.returncode == 1, r.stderr
        assert f"process {holder.proc.pid}" in r.stderr and "LOCK" in r.stderr
        assert files() == before
    holder.flush_round()  # the job's store still works
    holder.close()
    assert read_all(dest) == {**data, **holder.expected}


def test_restore_into_a_store_this_process_has_open_is_refused_and_its_lock_kept(tmp_path, repo, work_base):
    from rocksdict import Rdict

    import blobstate
    from blobstate.errors import LocalStoreError

    store = tmp_path / "s"
    write_keys(store, n=500)
    blobstate.backup(str(store), repo=str(repo))
    db = Rdict(str(store))
    try:
        with pytest.raises(LocalStoreError, match="this process"):
            blobstate.restore(str(store), repo=str(repo), force=True)
        other = subprocess.run([sys.executable, "-c", f"from rocksdict import Rdict; Rdict({str(store)!r})"],
                               capture_output=True, text=True)
        assert other.returncode != 0 and "lock" in other.stderr.lower(), "the check dropped this process's lock"
    finally:
        db.close()


def _listing(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir()}


def test_path_options_of_the_live_store_never_reach_a_restored_store(tmp_path, repo, cli, holder_factory):
    outside = tmp_path / "outside"
    wal_dir, log_dir = outside / "wal", outside / "log"
    wal_dir.mkdir(parents=True)
    log_dir.mkdir()
    store = tmp_path / "s"
    holder = holder_factory(store, 1000, 2000, str(wal_dir), str(log_dir))
    r = cli("backup", store, "--repo", repo)
    assert r.returncode == 0, r.stderr
    holder.close()
    before = {"wal": _listing(wal_dir), "log": _listing(log_dir)}
    dest = tmp_path / "restored" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "new-host").returncode == 0
    opener = textwrap.dedent("""
        import sys
        from rocksdict import Rdict
        db = Rdict(sys.argv[1])   # default options: rocksdict loads the restored OPTIONS, as the Spark binding does
        for i in range(100):
            db[b"new%05d" % i] = b"n"
        db.flush(True)
        db.close()
    """)
    subprocess.run([sys.executable, "-c", opener, str(dest)], check=True)
    assert {"wal": _listing(wal_dir), "log": _listing(log_dir)} == before
    restored = read_all(dest)
    assert {k: v for k, v in restored.items() if not k.startswith(b"new")} == holder.expected
    assert len(restored) == len(holder.expected) + 100


def test_a_snapshot_whose_options_name_outside_paths_is_refused_before_the_destination_changes(tmp_path, repo,
                                                                                                 cli):
    from rocksdict import Checkpoint, Options, Rdict

    outside = tmp_path / "outside"
    (outside / "wal").mkdir(parents=True)
    (outside / "log").mkdir()
    options = Options()
    options.create_if_missing(True)
    options.set_wal_dir(str(outside / "wal"))
    options.set_db_log_dir(str(outside / "log"))
    db = Rdict(str(tmp_path / "live"), options)
    db[b"k"] = b"v"
    hostile = tmp_path / "hostile" / "s"
    hostile.parent.mkdir()
    Checkpoint(db).create_checkpoint(str(hostile))  # OPTIONS with wal_dir and db_log_dir, as written by hand
    db.close()
    r = cli("backup", hostile, "--repo", repo, "--store-type", "dir")
    assert r.returncode == 0, r.stderr
    dest = tmp_path / "dest" / "s"
    dest.mkdir(parents=True)
    before = {"outside": tree_state(outside, mtimes=True), "dest": tree_state(dest, mtimes=True)}
    r = cli("restore", dest, "--repo", repo, "--store-type", "rocksdb", work=tmp_path / "h")
    assert r.returncode == 3, r.stderr
    assert "wal_dir" in r.stderr and "outside its directory" in r.stderr
    assert {"outside": tree_state(outside, mtimes=True), "dest": tree_state(dest, mtimes=True)} == before
    assert os.listdir(dest) == []
