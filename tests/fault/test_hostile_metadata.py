"""Issue 14: ids and paths read back from a repository, a checkpoint log or a journal are validated before anything
is deleted, read or written on their word. Each case: the victim store (or directory) is untouched, the command
refuses with exit code 3 (or the documented refusal), and the victim still restores. Cases 1-3 run on file:// and
moto S3 (``repo_target``), the hostile objects forged straight through fsspec (tests/support/hostile_forge.py). Plus
the parsers under Hypothesis: only typed errors, bounded time and memory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

import pytest
from fixtures_core import read_all, repo_files, write_keys
from hostile_forge import RawRepository, forge_journal, store_objects
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blobstate.errors import CorruptIndexError, CorruptJournalError
from blobstate.journal import events as ev
from blobstate.journal.file import MAGIC, Journal, decode, encode
from blobstate.model.records import Checkpoint, StoreKey

DAY_MS = 24 * 3600 * 1000


A, B = StoreKey("default", "0", "a"), StoreKey("default", "0", "b")
CRASHED = "1795000000000-0000beef"


@pytest.fixture
def target(repo_target):
    return repo_target  # file:// and moto S3 (cloud_servers.repo_target)


@pytest.fixture
def two_stores(tmp_path, target, cli):
    """Stores a and b in one repository (file:// or moto S3); returns b's data (the victim)."""
    data = {key: write_keys(tmp_path / key.store, n=500, seed=seed) for key, seed in ((A, 1), (B, 2))}
    for key in (B, A):
        backup = cli("backup", tmp_path / key.store, *target.args(key), "-q", env=target.env)
        assert backup.returncode == 0, backup.stderr
    return data[B]


def _b_restores(cli, target, tmp_path, data_b):
    out = tmp_path / "victim" / "b"
    restored = cli("restore", out, *target.args(B), "-q", env=target.env, work=tmp_path / "victim-host")
    assert restored.returncode == 0, restored.stderr
    assert read_all(out) == data_b


# -- 1: a lease naming another store's objects -------------------------------------------------------------------
def test_1_a_lease_of_store_a_naming_store_bs_objects_deletes_nothing_of_b(tmp_path, target, cli, two_stores):
    raw = RawRepository(target)
    victims = sorted(store_objects(raw, B))  # b's blobs, index and checkpoint record
    assert any("/blobs/" in v for v in victims) and any("/indexes/" in v for v in victims)
    assert any(v.startswith("checkpoints/") for v in victims)
    for i, victim in enumerate(victims):
        raw.write(f"{A.prefix}/ttl/{i:032x}", json.dumps({"blobId": victim, "expiresAtMs": 1}).encode())
    later = str(int(time.time() * 1000) + 3 * DAY_MS)
    gc = cli("gc", "--repo", target.url, "--now", later, "--json", env=target.env, work=tmp_path / "gc")
    assert gc.returncode == 0, gc.stderr
    assert store_objects(raw, B) == set(victims)
    report = next(r for r in gc.json() if r["store"] == str(A))
    assert not set(victims) & set(report["expiredDeleted"] + report["orphansDeleted"])
    _b_restores(cli, target, tmp_path, two_stores)


# -- 2: a checkpoint record of A pointing at B's index -------------------------------------------------------------
def test_2_a_record_of_a_pointing_at_bs_index_is_refused_and_deletes_nothing(tmp_path, target, cli, two_stores):
    raw = RawRepository(target)
    victims = store_objects(raw, B)
    b_index = next(p for p in victims if "/indexes/" in p)
    folder = f"checkpoints/{A.prefix}"
    record = json.loads(raw.read(f"{folder}/{1:020d}.json"))
    record.update(generation=2, checkpointId="1795000000000-deadbeef", indexBlobId=b_index)
    raw.write(f"{folder}/{2:020d}.json", json.dumps(record).encode())
    restore = cli("restore", tmp_path / "out" / "a", *target.args(A), env=target.env, work=tmp_path / "h")
    assert restore.returncode == 3 and "not an index of store default/0/a" in restore.stderr, restore.stderr
    backup = cli("backup", tmp_path / "a", *target.args(A), "--retain", "1", env=target.env)
    assert backup.returncode == 3, backup.stderr
    assert store_objects(raw, B) == victims
    _b_restores(cli, target, tmp_path, two_stores)


# -- 3: a journal naming another store's objects, or a path anywhere -----------------------------------------------
def test_3_a_journal_naming_another_stores_blobs_is_refused(tmp_path, target, cli, two_stores, work_base):
    raw = RawRepository(target)
    before = store_objects(raw, B)
    victims = sorted(p for p in before if "/blobs/" in p)
    forge_journal(work_base, target.url, A, [
        ev.CommitStarted(CRASHED, 1, str(A), 1, None, 3, target.url, target.url),
        ev.UploadsPlanned(CRASHED, 2, tuple(victims), victims[0], 10),
    ], target.options)
    recovered = cli("recover", *target.args(A), env=target.env)
    assert recovered.returncode == 3 and "ForeignObjectError" in recovered.stderr, recovered.stderr
    assert store_objects(raw, B) == before
    _b_restores(cli, target, tmp_path, two_stores)


# The local checkpoint's path names a directory of the work dir, never of the repository: which repository the
# journal belongs to changes nothing here, so file:// alone covers it.
def test_3_a_journal_pointing_a_local_checkpoint_anywhere_never_removes_it(tmp_path, repo, cli, work_base):
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "keep.txt").write_text("mine")
    url = f"file://{repo}"
    assert cli("init", "--repo", repo).returncode == 0
    forge_journal(work_base, url, A, [
        ev.CommitStarted(CRASHED, 1, str(A), 0, None, 3, url, url),
        ev.LocalCheckpointCreated(CRASHED, 2, str(victim)),
    ])
    recovered = cli("recover", "--repo", repo, "--store", "a")
    assert recovered.returncode == 3 and "ForeignObjectError" in recovered.stderr, recovered.stderr
    assert (victim / "keep.txt").read_text() == "mine"


# -- 4: the wrong or a forgotten --log, another repository -------------------------------------------------------
def test_4_recover_against_the_wrong_log_or_repository_is_refused(tmp_path, repo, cli, work_base):
    store = tmp_path / "s"
    write_keys(store, n=500)
    sql = f"sqlite:///{tmp_path}/log.db"
    crashed = cli("backup", store, "--repo", repo, "--log", sql, "-q",
                  env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"})
    assert crashed.returncode == -9
    before = repo_files(repo, "blobs") | repo_files(repo, "indexes")
    forgot = cli("recover", "--repo", repo, "--store", "s", "--log", f"file://{repo}")  # the commit is in SQL
    # refused by the repository's recorded log (issue 27, case 3) before the journal's own check ("is --log right?")
    assert forgot.returncode == 2 and "LogMismatchError" in forgot.stderr, forgot.stderr
    other = tmp_path / "other-repo"
    shutil.copytree(repo, other)
    journal = next(work_base.rglob("journal.log")).parent
    wrong = cli("recover", "--repo", other, "--store", "s", "--journal", journal, "--log", sql)
    assert wrong.returncode == 2 and "written against repository" in wrong.stderr, wrong.stderr
    assert repo_files(repo, "blobs") | repo_files(repo, "indexes") == before
    right = cli("recover", "--json")  # the journal knows its repository and log
    assert right.returncode == 0 and [r["action"] for r in right.json()] == ["finish"], right.stderr
    out = tmp_path / "out" / "s"
    assert cli("restore", out, "--repo", repo, "--log", sql, "-q", work=tmp_path / "h").returncode == 0
    assert read_all(out) == read_all(store)


# -- 7: bounded reads -----------------------------------------------------------------------------------------------
def test_7_an_index_larger_than_its_record_declares_is_never_read_whole(tmp_path, repo, cli):
    store = tmp_path / "s"
    store.mkdir()
    (store / "f").write_text("six b!")
    assert cli("backup", store, "--repo", repo, "-q").returncode == 0
    record = json.loads(next((repo / "checkpoints").rglob("*.json")).read_text())
    with open(repo / record["indexBlobId"], "r+b") as fh:
        fh.truncate(600 << 20)  # 600 MiB where the record declares a few hundred bytes (sparse: no disk used)
    out = tmp_path / "out" / "s"
    # The restore runs under a small parent that reports the peak RSS of its only child (KiB).
    measure = ("import resource, subprocess, sys; code = subprocess.call(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(code)")
    restore = cli_measured(measure, ["restore", out, "--repo", repo], work_base=tmp_path / "h")
    assert restore.returncode == 3 and "larger than" in restore.stderr, restore.stderr
    peak_kib = int(restore.stderr.strip().splitlines()[-1])
    assert peak_kib < 300 * 1024, peak_kib  # never the 600 MiB


def cli_measured(measure: str, args: list, *, work_base) -> subprocess.CompletedProcess:
    """``blobstate ARGS`` as the only child of a parent that prints the child's peak RSS on stderr."""
    from fixtures_core import cli_env

    return subprocess.run([sys.executable, "-c", measure, sys.executable, "-m", "blobstate.cli", *map(str, args)],
                          capture_output=True, text=True, env=cli_env(work_base), timeout=300)


def test_7_telling_a_torn_tail_from_damage_is_linear_in_the_journal_size(monkeypatch):
    import blobstate.journal.file as journal_file

    # A crafted journal: one good record, then 2 MiB of 64-byte units that each look like the start of a ~1 MiB
    # record ending in "}": a scan that checksummed every candidate would hash ~1 MiB per unit (quadratic).
    good = MAGIC + encode(ev.CommitCompleted("c", 1))
    unit_size, span = 64, 1 << 14
    unit = journal_file.HEADER.pack(unit_size * span - journal_file.HEADER.size, 0) + journal_file.BODY_START
    unit += b"x" * (unit_size - len(unit) - 1) + b"}"
    data = good + b"\xff" * 9 + unit * ((2 << 20) // unit_size)
    hashed = {"bytes": 0}
    real = journal_file.crc32c_bytes

    def counting(chunk: bytes) -> int:
        hashed["bytes"] += len(chunk)
        return real(chunk)

    monkeypatch.setattr(journal_file, "crc32c_bytes", counting)
    try:
        decode(data)
    except CorruptJournalError:
        pass
    assert hashed["bytes"] <= 5 * len(data), hashed


# -- fuzzing the record and journal parsers ---------------------------------------------------------------------
VALID_RECORD = Checkpoint(StoreKey("j", "t", "s"), "1795000000000-0000beef", 3, "j/t/s/indexes/" + "ab" * 16 + ".json",
                          99, 10, 1000, 4, "host:1:abc").to_bytes()


def _mutations():
    return st.one_of(
        st.binary(max_size=2048),
        st.builds(lambda cut, flip: bytes(b ^ (0x5A if i == flip else 0) for i, b in enumerate(VALID_RECORD[:cut])),
                  st.integers(0, len(VALID_RECORD)), st.integers(0, len(VALID_RECORD))),
        st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                     lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner,
                                                                                  max_size=8),
                     max_leaves=30).map(lambda doc: json.dumps(doc).encode()),
        st.dictionaries(st.sampled_from(list(json.loads(VALID_RECORD))),
                        st.none() | st.integers() | st.text(max_size=40) | st.floats(allow_nan=True),
                        max_size=12).map(lambda d: json.dumps({**json.loads(VALID_RECORD), **d}).encode()),
    )


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_fuzz_the_checkpoint_record_parser_raises_only_typed_errors(data):
    try:
        Checkpoint.from_bytes(data)
    except CorruptIndexError:
        pass


def _journal_docs():
    values = st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.lists(st.text(max_size=5),
                                                                                        max_size=3)
    names = st.sampled_from(sorted(ev.EVENT_TYPES))
    return st.builds(lambda name, fields: {"type": name, "v": 1, **fields}, names,
                     st.dictionaries(st.sampled_from(["commit_id", "time_ms", "store_key", "expected_generation",
                                                      "blob_ids", "path", "generation", "record", "size",
                                                      "index_blob_id", "reason"]), values, max_size=6))


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_journal_docs(), max_size=6), st.binary(max_size=64), st.integers(0, 400))
def test_fuzz_the_journal_parser_raises_only_typed_errors(docs, tail, cut):
    body = b"".join(journal_file_record(doc) for doc in docs)
    data = (MAGIC + body + tail)[: len(MAGIC) + cut] if cut < len(body) else MAGIC + body + tail
    try:
        read = decode(data)
        assert read.good_length <= len(data)
    except CorruptJournalError:
        pass


def journal_file_record(doc: dict) -> bytes:
    """A well-framed record holding any JSON document (what a hostile writer of the journal could produce)."""
    from blobstate.journal.file import HEADER
    from blobstate.local.checksum import crc32c_bytes

    payload = json.dumps(doc).encode()
    return HEADER.pack(len(payload), crc32c_bytes(payload)) + payload


def test_a_journal_event_with_wrong_json_types_is_a_corrupt_journal_error(tmp_path):
    path = tmp_path / "journal.log"
    path.write_bytes(MAGIC + journal_file_record({"type": "UploadsPlanned", "v": 1, "commit_id": "c", "time_ms": 1,
                                                  "blob_ids": "not-a-list", "index_blob_id": "x"}))
    with pytest.raises(CorruptJournalError):
        Journal(str(path)).read()
