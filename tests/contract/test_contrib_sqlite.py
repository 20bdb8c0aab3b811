"""The third-party path end to end: pip-install contrib/blobstate-sqlite into this environment, then back up and
restore SQLite databases through it with the CLI, run the LocalStore conformance suite on it, and see it in
`blobstate plugins`."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from dists import install_editable

from blobstate.errors import ConfigurationError, IntegrityError, StorageError
from blobstate.testing.local_stores import LocalStoreContract

ROOT = Path(__file__).resolve().parents[2]
CONTRIB = ROOT / "contrib" / "blobstate-sqlite"


@pytest.fixture(scope="session")
def sqlite_dist() -> Path:
    """Install the contrib distribution (editable, like a plugin author's checkout) into this environment."""
    return install_editable(CONTRIB, "blobstate-sqlite", "blobstate_sqlite")


def _make_db(path: Path, rows: dict[str, str], *, wal: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    try:
        if wal:
            conn.execute("PRAGMA journal_mode=wal")
        conn.execute("CREATE TABLE IF NOT EXISTS kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
        conn.executemany("INSERT OR REPLACE INTO kv VALUES (?, ?)", rows.items())
        conn.commit()
    finally:
        conn.close()


def _rows(path: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        return dict(conn.execute("SELECT k, v FROM kv"))
    finally:
        conn.close()


# -- the conformance suite, run as a plugin author would ------------------------------------------------------
@pytest.mark.usefixtures("sqlite_dist")
class TestSqliteConformance(LocalStoreContract):
    def create_harness(self):
        from blobstate_sqlite.testing import SqliteHarness

        return SqliteHarness()


def test_contrib_own_test_suite_passes(sqlite_dist, tmp_path):
    """The distribution's own tests (what its author runs: `pytest tests`) pass against the installed plugin."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                           str(sqlite_dist), "--basetemp", str(tmp_path / "t"), str(sqlite_dist / "tests")],
                          capture_output=True, text=True, timeout=300, cwd=sqlite_dist)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


# -- the CLI -------------------------------------------------------------------------------------------------
def test_cli_backup_and_restore_sqlite(sqlite_dist, cli, tmp_path):
    store = tmp_path / "orders"
    _make_db(store / "orders.db", {f"o{i}": f"order {i}" for i in range(500)})
    _make_db(store / "customers.sqlite", {"c1": "ada", "c2": "grace"}, wal=False)
    (store / "notes.txt").write_text("not a database: left out of the snapshot")
    repo = str(tmp_path / "repo")

    first = cli("backup", str(store), "--repo", repo, "--job", "shop")  # store type detected: sqlite
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip()
    _make_db(store / "orders.db", {"o1": "changed", "o999": "new"})
    second = cli("backup", str(store), "--repo", repo, "--job", "shop")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() != first_id

    listed = cli("list", "--repo", repo, "--job", "shop", "--store", "orders", "--json")
    assert listed.returncode == 0, listed.stderr
    assert first_id in listed.stdout and second.stdout.strip() in listed.stdout

    dest = tmp_path / "restored"  # a new host: nothing local to reuse
    restored = cli("restore", str(dest), "--repo", repo, "--job", "shop", "--store", "orders",
                   "--store-type", "sqlite", work=tmp_path / "other-host")
    assert restored.returncode == 0, restored.stderr
    assert sorted(p.name for p in dest.iterdir() if not p.name.startswith(".")) == [
        "customers.sqlite", "orders.db"
    ]
    expected = {f"o{i}": f"order {i}" for i in range(500)} | {"o1": "changed", "o999": "new"}
    assert _rows(dest / "orders.db") == expected
    assert _rows(dest / "customers.sqlite") == {"c1": "ada", "c2": "grace"}

    older = tmp_path / "older"  # this host, an older checkpoint: files come from local checkpoints
    again = cli("restore", str(older), "--repo", repo, "--job", "shop", "--store", "orders",
                "--store-type", "sqlite", "--checkpoint", first_id)
    assert again.returncode == 0, again.stderr
    assert _rows(older / "orders.db") == {f"o{i}": f"order {i}" for i in range(500)}
    # A SQLite file changes in place: a restored one must never share its inode with a local checkpoint copy.
    assert os.stat(older / "orders.db").st_nlink == 1
    _make_db(older / "orders.db", {"o1": "written after restore"})  # and writing to it works

    verified = cli("verify", "--repo", repo, "--job", "shop", "--store", "orders")
    assert verified.returncode == 0, verified.stderr


def test_cli_restore_knows_the_store_type_from_the_snapshot(sqlite_dist, cli, tmp_path):
    store = tmp_path / "s"
    _make_db(store / "a.db", {"k": "v"})
    repo = str(tmp_path / "repo")
    assert cli("backup", str(store), "--repo", repo).returncode == 0
    dest = tmp_path / "dest"
    restored = cli("restore", str(dest), "--repo", repo, "--store", "s")
    assert restored.returncode == 0, restored.stderr
    assert os.stat(dest / "a.db").st_nlink == 1  # copied as a mutable file, not hard-linked as a "dir" file


def test_cli_restore_rejects_a_damaged_database(sqlite_dist, cli, tmp_path):
    """Restore validation runs the plugin's check: a snapshot of a corrupt database fails with exit code 3."""
    store = tmp_path / "s"
    store.mkdir()
    (store / "broken.db").write_bytes(b"SQLite format 3\x00" + b"\x00" * 84 + b"\xee" * 4000)
    repo = str(tmp_path / "repo")
    backup = cli("backup", str(store), "--repo", repo, "--store-type", "sqlite")
    # The online backup API refuses to read a corrupt database: the commit aborts, nothing is committed.
    assert backup.returncode == 1, backup.stdout + backup.stderr
    assert "SQLite backup of" in backup.stderr
    listed = cli("list", "--repo", repo, "--store", "s", "--json")  # a store without checkpoints: exit 5
    assert listed.returncode == 5 and "no checkpoint for default/0/s" in listed.stderr, listed.stderr


def test_cli_plugins_lists_the_contrib_dist(sqlite_dist, cli):
    text = cli("plugins")
    assert text.returncode == 0, text.stderr
    assert "blobstate_sqlite  [blobstate-sqlite 0.1.0]" in text.stdout
    assert "store type sqlite; priority 5; in use for sqlite" in text.stdout
    payload = cli("plugins", "--json")
    assert payload.returncode == 0, payload.stderr
    plugins = {p["name"]: p for p in payload.json()["plugins"]}
    ours = plugins["blobstate_sqlite"]
    assert (ours["distribution"], ours["version"], ours["builtin"], ours["status"]) == (
        "blobstate-sqlite", "0.1.0", False, "ok")
    assert ours["backends"] == [{
        "kind": "local store", "name": "sqlite", "storeType": "sqlite", "priority": 5, "selectedFor": ["sqlite"],
        "factory": "blobstate_sqlite.store:SqliteStore",
        "description": "SQLite databases (*.db, *.sqlite, *.sqlite3), copied with the online backup API",
        "installHint": "",
    }]
    assert plugins["rocksdb"]["builtin"] is True and plugins["rocksdb"]["distribution"] == "blobstate"


# -- the store itself ----------------------------------------------------------------------------------------
@pytest.fixture
def store(sqlite_dist):
    from blobstate_sqlite.store import SqliteStore

    return SqliteStore()


def test_registered_through_the_entry_point(sqlite_dist):
    from blobstate.plugin.manager import get_plugin_manager

    infos = {i.name: i for i in get_plugin_manager().plugin_infos()}
    info = infos["blobstate_sqlite"]
    assert (info.distribution, info.version, info.builtin, info.error) == ("blobstate-sqlite", "0.1.0", False, None)
    assert [s.store_type for s in info.specs] == ["sqlite"]


def test_detect(sqlite_dist, tmp_path):
    from blobstate.repository.backends import detect_store_type
    from blobstate_sqlite.store import looks_like_sqlite

    _make_db(tmp_path / "db" / "x.sqlite3", {"a": "b"})
    assert looks_like_sqlite(str(tmp_path / "db")) and detect_store_type(str(tmp_path / "db")) == "sqlite"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "new.db").write_bytes(b"")  # sqlite3.connect() before the first write
    assert looks_like_sqlite(str(tmp_path / "empty"))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "berkeley.db").write_bytes(b"\x00\x06\x15\x61" + b"\x00" * 100)
    assert not looks_like_sqlite(str(tmp_path / "other"))
    assert detect_store_type(str(tmp_path / "other")) == "dir"
    assert not looks_like_sqlite(str(tmp_path / "missing"))


def test_checkpoint_of_a_live_connection_includes_uncheckpointed_wal(store, tmp_path):
    conn = sqlite3.connect(tmp_path / "live.db")
    conn.execute("PRAGMA journal_mode=wal")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT NOT NULL)")
    conn.executemany("INSERT INTO kv VALUES (?, ?)", [(f"k{i}", "v" * 100) for i in range(300)])
    conn.commit()
    assert (tmp_path / "live.db-wal").stat().st_size > 30_000  # the rows live in the WAL, not the main file
    conn.execute("INSERT INTO kv VALUES ('uncommitted', 'x')")  # an open write transaction of the source
    store.create_checkpoint(conn, str(tmp_path / "cp"))
    conn.rollback()
    conn.close()
    assert os.listdir(tmp_path / "cp") == ["live.db"]  # one self-contained file, no -wal/-shm
    rows = _rows(tmp_path / "cp" / "live.db")
    assert len(rows) == 300 and "uncommitted" not in rows
    store.validate(str(tmp_path / "cp"))


def test_checkpoint_is_consistent_while_a_writer_runs(store, tmp_path):
    """Each checkpoint taken during concurrent transfers sees whole transactions only (the total is constant)."""
    path = tmp_path / "bank" / "accounts.db"
    path.parent.mkdir()
    setup = sqlite3.connect(path)
    setup.execute("PRAGMA journal_mode=wal")
    setup.execute("CREATE TABLE acct (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL)")
    setup.executemany("INSERT INTO acct VALUES (?, 100)", [(i,) for i in range(50)])
    setup.commit()
    setup.close()
    stop = threading.Event()
    transfers = [0]

    def writer() -> None:
        conn = sqlite3.connect(path, timeout=30)
        i = 0
        while not stop.is_set():
            a, b = i % 50, (i * 7 + 3) % 50
            with conn:  # one transaction: debit and credit together
                conn.execute("UPDATE acct SET balance = balance - 1 WHERE id = ?", (a,))
                conn.execute("UPDATE acct SET balance = balance + 1 WHERE id = ?", (b,))
            i += 1
            transfers[0] = i
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for n in range(15):
            target = tmp_path / f"cp{n}"
            store.create_checkpoint(str(path.parent), str(target))
            check = sqlite3.connect(f"{(target / 'accounts.db').as_uri()}?mode=ro", uri=True)
            total, count = check.execute("SELECT sum(balance), count(*) FROM acct").fetchone()
            check.close()
            assert (total, count) == (5000, 50), f"checkpoint {n} saw a half-done transfer"
    finally:
        stop.set()
        thread.join(timeout=60)
    assert transfers[0] > 0, "the writer never ran: the test proved nothing"


def test_target_must_not_exist_and_errors_are_typed(store, tmp_path):
    _make_db(tmp_path / "s" / "a.db", {"k": "v"})
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError):
        store.create_checkpoint(str(tmp_path / "s"), str(tmp_path / "taken"))
    (tmp_path / "nodb").mkdir()
    (tmp_path / "nodb" / "readme.txt").write_text("x")
    with pytest.raises(ConfigurationError, match="holds no SQLite database"):
        store.create_checkpoint(str(tmp_path / "nodb"), str(tmp_path / "cp1"))
    with pytest.raises(ConfigurationError, match="in-memory"):
        store.create_checkpoint(sqlite3.connect(":memory:"), str(tmp_path / "cp2"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "bad.db").write_bytes(b"this is not a database at all" * 200)
    with pytest.raises(StorageError, match="SQLite backup of"):
        store.create_checkpoint(str(tmp_path / "bad"), str(tmp_path / "cp3"))
    assert not any((tmp_path / n).exists() for n in ("cp1", "cp2", "cp3"))


def test_checkpoint_gives_up_on_a_held_lock(sqlite_dist, tmp_path):
    """A writer holding an exclusive lock (rollback journal) makes the checkpoint fail after its timeout, typed."""
    from blobstate_sqlite.store import SqliteStore

    _make_db(tmp_path / "s" / "locked.db", {"k": "v"}, wal=False)
    holder = sqlite3.connect(tmp_path / "s" / "locked.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StorageError, match="locked"):
            SqliteStore(busy_timeout_s=0.3).create_checkpoint(str(tmp_path / "s"), str(tmp_path / "cp"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert not (tmp_path / "cp").exists()


def test_single_file_source_and_mutability(store, tmp_path):
    _make_db(tmp_path / "one.db", {"k": "v"})
    store.create_checkpoint(str(tmp_path / "one.db"), str(tmp_path / "cp"))
    assert os.listdir(tmp_path / "cp") == ["one.db"]
    assert all(store.is_mutable(name) for name in ("one.db", "x.sqlite", ".blobstate-checkpoint"))


def test_validate(store, sqlite_dist, tmp_path):
    from blobstate_sqlite.store import SqliteStore

    (tmp_path / "empty").mkdir()
    with pytest.raises(IntegrityError, match="holds no database"):
        store.validate(str(tmp_path / "empty"))
    _make_db(tmp_path / "t" / "big.db", {f"k{i}": "v" * 200 for i in range(2000)}, wal=False)
    store.validate(str(tmp_path / "t"))
    assert not (tmp_path / "t" / "big.db-wal").exists()  # validation reads, never writes
    db = tmp_path / "t" / "big.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])  # a truncated download
    for check in ("quick", "full"):
        with pytest.raises(IntegrityError, match="big.db"):
            SqliteStore(check=check).validate(str(tmp_path / "t"))
    with pytest.raises(ConfigurationError):
        SqliteStore(check="thorough")
