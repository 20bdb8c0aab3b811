"""``blobstate.plugins.rocksdb_store`` on real RocksDB stores (rocksdict under ``tmp_path``): a checkpoint through the
live handle or from the path holds every acknowledged write (the WAL copied along); path options never travel with
a checkpoint and a snapshot that still names one fails ``validate``; a store open in this process is refused as a
restore destination; SSTs and blob files are the immutable ones."""

from __future__ import annotations

import os

import pytest
from rocksdict import AccessType, Options, Rdict

from blobstate.errors import IntegrityError, LocalStoreError
from blobstate.plugins import rocksdb_store as rs
from blobstate.plugins.rocksdb_store import RocksDBStore, looks_like_rocksdb


def read(path: str) -> dict:
    db = Rdict(path, access_type=AccessType.read_only())
    try:
        return dict(db.items())
    finally:
        db.close()


def options_with_paths(tmp_path) -> Options:
    opts = Options()
    opts.create_if_missing(True)
    opts.set_wal_dir(str(tmp_path / "wal"))
    opts.set_db_log_dir(str(tmp_path / "logs"))
    return opts


def test_a_checkpoint_through_the_live_handle_holds_every_write(tmp_path):
    db = Rdict(str(tmp_path / "db"))
    try:
        for i in range(100):
            db[f"k{i}"] = i  # in the memtable only: not flushed
        RocksDBStore().create_checkpoint(db, str(tmp_path / "cp"))
        db["after"] = "not in the checkpoint"
    finally:
        db.close()
    assert read(str(tmp_path / "cp")) == {f"k{i}": i for i in range(100)}


def test_a_checkpoint_from_the_path_of_a_store_another_handle_holds_open_carries_its_wal(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path)
    try:
        db["flushed"] = 1
        db.flush()
        db["in the wal only"] = 2  # acknowledged to the WAL, never flushed
        RocksDBStore().create_checkpoint(path, str(tmp_path / "cp"))
    finally:
        db.close()
    assert any(n.endswith(".log") for n in os.listdir(tmp_path / "cp"))
    assert read(str(tmp_path / "cp")) == {"flushed": 1, "in the wal only": 2}


def test_a_checkpoint_from_the_path_of_a_closed_store(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path)
    db["k"] = "v"
    db.close()
    RocksDBStore().create_checkpoint(path, str(tmp_path / "cp"))
    assert read(str(tmp_path / "cp")) == {"k": "v"}


def test_a_directory_that_is_no_store_is_refused(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(FileNotFoundError, match="not a RocksDB store"):
        RocksDBStore().create_checkpoint(str(tmp_path / "plain"), str(tmp_path / "cp"))
    assert not looks_like_rocksdb(str(tmp_path / "plain"))


def test_path_options_never_travel_with_a_checkpoint_and_the_live_store_keeps_them(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path, options=options_with_paths(tmp_path))
    try:
        db["k"] = "v"  # its WAL lives in wal/, outside the store
        RocksDBStore().create_checkpoint(db, str(tmp_path / "cp"))
    finally:
        db.close()
    live = rs.path_options(path)
    assert sorted(line.split(": ", 1)[1].split("=")[0] for line in live) == ["db_log_dir", "wal_dir"]
    assert rs.path_options(str(tmp_path / "cp")) == []
    RocksDBStore().validate(str(tmp_path / "cp"))
    assert read(str(tmp_path / "cp")) == {"k": "v"}


def test_a_checkpoint_from_the_path_reads_the_wal_where_the_options_put_it(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path, options=options_with_paths(tmp_path))
    try:
        db["only in the wal"] = 1
        RocksDBStore().create_checkpoint(path, str(tmp_path / "cp"))
    finally:
        db.close()
    assert read(str(tmp_path / "cp")) == {"only in the wal": 1} and rs.path_options(str(tmp_path / "cp")) == []


def test_stripping_writes_a_new_file_and_never_through_a_hard_link(tmp_path):
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    copy.mkdir()
    text = "[DBOptions]\n  wal_dir=/elsewhere/wal\n  create_if_missing=true\n  db_paths = /x\n"
    (live / "OPTIONS-000012").write_text(text)
    os.link(live / "OPTIONS-000012", copy / "OPTIONS-000012")
    (copy / "OPTIONS-000007").write_text("[DBOptions]\n  max_open_files=-1\n")
    before = os.stat(copy / "OPTIONS-000007").st_ino
    rs.strip_path_options(str(copy))
    assert (live / "OPTIONS-000012").read_text() == text
    assert (copy / "OPTIONS-000012").read_text() == "[DBOptions]\n  create_if_missing=true\n"
    assert os.stat(copy / "OPTIONS-000007").st_ino == before  # nothing to strip: left as it is


def test_path_options_are_listed_newest_file_last_and_cut_short(tmp_path):
    (tmp_path / "OPTIONS-000100").write_text(f"  cf_paths={'p' * 300}\n")
    (tmp_path / "OPTIONS-000009").write_text("  wal_dir=/w\n  wal_dir_size=3\n")
    (tmp_path / "OPTIONS-old").write_text("  wal_dir=/ignored\n")
    found = rs.path_options(str(tmp_path))
    assert found == ["OPTIONS-000009: wal_dir=/w", f"OPTIONS-000100: cf_paths={'p' * 200}"]


def test_a_snapshot_that_names_a_path_outside_fails_validation_before_anything_opens(tmp_path):
    path = str(tmp_path / "db")
    db = Rdict(path, options=options_with_paths(tmp_path))
    db["k"] = "v"
    db.close()
    with pytest.raises(IntegrityError, match=r"options name paths outside its directory \(OPTIONS-\d+: wal_dir=.*"
                                             r"refused") as info:
        RocksDBStore().validate(path)
    assert info.value.exit_code == 3


def test_a_damaged_store_fails_validation(tmp_path):
    path = tmp_path / "db"
    db = Rdict(str(path))
    db["k"] = "v"
    db.close()
    (path / "CURRENT").write_text("MANIFEST-999999\n")
    with pytest.raises(IntegrityError, match=f"restored RocksDB at {path} does not open"):
        RocksDBStore().validate(str(path))


def test_a_store_open_in_this_process_is_refused_as_a_destination(tmp_path):
    path = str(tmp_path / "db")
    store = RocksDBStore()
    store.check_destination(str(tmp_path / "nothing-here"))
    db = Rdict(path)
    try:
        assert rs.lock_holder(path) == os.getpid()
        with pytest.raises(LocalStoreError, match=f"the RocksDB at {path} is open in this process"):
            store.check_destination(path)
    finally:
        db.close()
    assert rs.lock_holder(path) is None
    store.check_destination(path)


def test_sst_and_blob_files_are_immutable_everything_else_mutable():
    store = RocksDBStore()
    assert not store.is_mutable("000012.sst") and not store.is_mutable("sub/000013.blob")
    for name in ("MANIFEST-000005", "CURRENT", "OPTIONS-000007", "000008.log", "rocksdict-config.json", "x.sst.tmp"):
        assert store.is_mutable(name), name
