"""Issue 27: one commit engine for snapshot, delta and group records; the commit-path cases, each with real
processes (``tests/support/pause_plugin.py`` SIGSTOPs a writer at a journal event and moves its clock on resume,
``tests/support/kill_plugin.py`` SIGKILLs it; ``tests/support/commit_child.py`` is a delta writer or a group owner).

- case 1: a snapshot writer paused right after its commit point, while another writer appends deltas, never prunes
  that writer's records when it resumes (retention acts on the log re-read after the append, by generation);
- case 2: a group commit that lands late (its owner paused after its TTL check, gc deleted the expired parts) is
  healed at once, like a snapshot or a delta;
- case 11: recovery of a group whose append never landed, after an outage longer than its TTL (gc deleted the
  parts), aborts it instead of re-appending a record whose parts are gone;
- a writer's view is pinned when it opens: a committer is fenced at its first append when another writer appended
  after it opened.
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from fault_harness import Target, pause_env, resume, wait_stopped
from fixtures_core import SUPPORT_DIR, cli_env, write_keys

from blobstate.commit.backup import StoreCommitter
from blobstate.commit.delta import DeltaCommitter
from blobstate.errors import FencedError
from blobstate.journal.file import Journal
from blobstate.model import changelog
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository

KEY = StoreKey("j", "0", "s")
GROUP_KEY = StoreKey("flights", "group", "routes")
HOUR_MS = 3600 * 1000
DAY_MS = 24 * HOUR_MS
CHILD = os.path.join(SUPPORT_DIR, "commit_child.py")


@pytest.fixture
def file_target(tmp_path):
    return Target(f"file://{tmp_path}/repo")


def _child_args(target: Target, key: StoreKey, work_dir, *, mode: str, batches: list[int], ttl_ms: int = DAY_MS,
                partitions: int = 4, retain: int = 2) -> list[str]:
    config = {"mode": mode, "url": target.url, "options": target.options, "job": key.job, "task": key.task,
              "store": key.store, "work_dir": str(work_dir), "ttl_ms": ttl_ms, "retain": retain, "batches": batches,
              "partitions": partitions}
    return [sys.executable, CHILD, json.dumps(config)]


def _run_child(args: list[str], work_base, **env: str) -> list[dict]:
    done = subprocess.run(args, env=cli_env(work_base, **env), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _history(target: Target, key: StoreKey):
    repo = Repository.open(target.url, storage_options=target.options)
    try:
        return repo.log.history(key)
    finally:
        repo.close()


# -- case 1 ---------------------------------------------------------------------------------------------------------
def test_a_snapshot_writer_paused_after_its_commit_point_never_prunes_another_writers_deltas(file_target, cli,
                                                                                           tmp_path, work_base):
    """Writer A (``blobstate backup --retain 2``) is paused right after its commit point; meanwhile writer B on
    another host, keeping 5, appends deltas of batches 5-7, a snapshot of batch 7 and deltas of batches 8-10.
    Resumed, A's retention must not count from its cached generation (which pruned all but the newest record, a
    delta: nothing restored): every record of B stays, and the latest state restores."""
    target = file_target
    store = tmp_path / "s"
    write_keys(store, n=500, value_size=100, seed=1)
    base = target.args(KEY)

    def snapshot(batch: int, retain: int = 2, host: str | None = None) -> None:
        done = cli("backup", store, *base, "--batch-id", str(batch), "--retain", str(retain), "-q", env=target.env,
                   work=tmp_path / host if host else None)
        assert done.returncode == 0, done.stderr

    def deltas(batches: list[int]) -> list[dict]:
        return _run_child(_child_args(target, KEY, tmp_path / "b", mode="deltas", batches=batches, retain=5),
                          work_base)

    snapshot(0)                                                                                 # generation 1
    deltas([1, 2])                                                                              # 2, 3
    snapshot(2)                                                                                 # 4
    deltas([3, 4])                                                                              # 5, 6
    clock = tmp_path / "clock"
    writer = subprocess.Popen([sys.executable, "-m", "blobstate.cli", "backup", str(store), *base, "--batch-id", "4",
                               "--retain", "2", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**cli_env(work_base), **target.env, **pause_env("CheckpointWritten", clock)})
    wait_stopped(writer)                                                                        # A landed at 7
    assert [cp.generation for cp in _history(target, KEY)] == list(range(1, 8))
    later = deltas([5, 6, 7])                                                                   # 8-10
    snapshot(7, retain=5, host="host-b")                                                        # 11
    later += deltas([8, 9, 10])                                                                 # 12-14
    assert [row["generation"] for row in later] == [8, 9, 10, 12, 13, 14]
    done = resume(writer, clock_file=clock, advance_ms=0)
    assert done.returncode == 0, done.stderr

    history = _history(target, KEY)
    kept = {cp.checkpoint_id for cp in history}
    assert {row["checkpointId"] for row in later} <= kept, "the paused writer pruned another writer's deltas"
    snapshots = [cp.batch_id for cp in history if cp.kind == "snapshot"]
    assert snapshots[-3:] == [2, 4, 7], [(cp.generation, cp.kind) for cp in history]
    out = tmp_path / "restored" / "s"
    restored = cli("restore", out, *base, "-q", env=target.env, work=tmp_path / "restore-host")
    assert restored.returncode == 0, restored.stderr
    verified = cli("verify", *base, "--all", env=target.env)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_writer_paused_after_its_append_longer_than_its_view_lasts_prunes_nothing(file_target, cli, tmp_path,
                                                                                     work_base):
    """Rule 15 with the listing the append took after its create: writer A (``--retain 1``) is paused right after
    its commit point; writer B on another host appends a snapshot and prunes nothing (append-only). A is resumed
    once its pause has
    outlasted ``APPEND_VIEW_MAX_AGE_S``: it must not act on its append's listing (which shows no record after its
    own) but read the log again, see B's record after its own and prune nothing. Without the age bound A prunes
    the two snapshots before its own."""
    from blobstate.commit.cleanup import APPEND_VIEW_MAX_AGE_S

    target = file_target
    store = tmp_path / "s"
    write_keys(store, n=300, value_size=100, seed=1)
    base = target.args(KEY)
    for batch in (0, 1):                                                                        # generations 1, 2
        done = cli("backup", store, *base, "--batch-id", str(batch), "--retain", "10", "-q", env=target.env)
        assert done.returncode == 0, done.stderr
    clock = tmp_path / "clock"
    writer = subprocess.Popen([sys.executable, "-m", "blobstate.cli", "backup", str(store), *base, "--batch-id", "2",
                               "--retain", "1", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**cli_env(work_base), **target.env, **pause_env("CheckpointWritten", clock)})
    wait_stopped(writer)                                                                        # A landed at 3
    stopped = time.monotonic()
    other = cli("backup", store, *base, "--batch-id", "3", "--append-only", "-q", env=target.env,
                work=tmp_path / "host-b")  # B at 4, pruning nothing (its take-over would apply A's retention of 1)
    assert other.returncode == 0, other.stderr
    while time.monotonic() - stopped <= APPEND_VIEW_MAX_AGE_S:  # the pause must outlast the view, as a real one
        time.sleep(0.05)
    done = resume(writer, clock_file=clock, advance_ms=0)
    assert done.returncode == 0, done.stderr
    assert [cp.generation for cp in _history(target, KEY)] == [1, 2, 3, 4], "the paused writer pruned B's snapshots"


# -- case 2 ---------------------------------------------------------------------------------------------------------
def test_a_group_commit_that_lands_after_gc_deleted_its_parts_is_healed_at_once(file_target, cli, tmp_path,
                                                                               work_base):
    """The group owner is paused after its TTL check, right before its append (``CheckpointAppending``); a gc on
    another host, a day later, deletes the expired staged parts; the owner resumes and appends. It must put the
    parts back at once (it holds their bytes), so ``verify --all`` and a partition restore succeed."""
    target = file_target
    _run_child(_child_args(target, GROUP_KEY, tmp_path / "owner", mode="group", batches=[0]), work_base)
    clock = tmp_path / "clock"
    owner = subprocess.Popen(_child_args(target, GROUP_KEY, tmp_path / "owner", mode="group", batches=[1]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=cli_env(work_base, **pause_env("CheckpointAppending", clock)))
    wait_stopped(owner)
    later = int(time.time() * 1000) + 25 * HOUR_MS
    gc = cli("gc", "--repo", target.url, "--now", str(later), "--json", env=target.env, work=tmp_path / "gc-host")
    assert gc.returncode == 0, gc.stderr
    assert len(gc.json()[0]["expiredDeleted"]) == 4, gc.stdout  # the four staged parts of batch 1
    done = resume(owner, clock_file=clock, advance_ms=25 * HOUR_MS)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["generation"] == 2
    assert "lost" in done.stderr, done.stderr  # it noticed, and put them back
    base = target.args(GROUP_KEY)
    verified = cli("verify", *base, "--all", env=target.env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    for partition in range(4):
        out = tmp_path / f"p{partition}" / "routes"
        restored = cli("restore", out, *base, "--partition", str(partition), "-q", env=target.env,
                       work=tmp_path / f"restore-{partition}")
        assert restored.returncode == 0, restored.stderr


# -- case 11 --------------------------------------------------------------------------------------------------------
def test_recovery_after_an_outage_longer_than_the_ttl_aborts_a_group_whose_parts_gc_deleted(file_target, cli,
                                                                                           tmp_path, work_base):
    """The group owner is killed right after journaling ``CheckpointAppending`` (the append never sent). Its
    parts' TTL (10 s here) passes and gc deletes them. Recovery must not re-append the record blindly: it is past
    its TTL budget and its parts are gone, so it aborts, and the store stays whole (the next group commits)."""
    target = file_target
    ttl = 10_000
    owner_dir = tmp_path / "owner"
    _run_child(_child_args(target, GROUP_KEY, owner_dir, mode="group", batches=[0], ttl_ms=ttl), work_base)
    killed = subprocess.run(_child_args(target, GROUP_KEY, owner_dir, mode="group", batches=[1], ttl_ms=ttl),
                            env=cli_env(work_base, BLOBSTATE_PLUGINS="kill_plugin",
                                        BLOBSTATE_TEST_KILL_AT="CheckpointAppending"),
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr[-2000:]
    deleted: list[str] = []
    deadline = time.monotonic() + 120
    while len(deleted) < 4 and time.monotonic() < deadline:  # until the parts' TTL passed and gc took them
        gc = cli("gc", "--repo", target.url, "--json", env=target.env, work=tmp_path / "gc-host")
        assert gc.returncode == 0, gc.stderr
        deleted += gc.json()[0]["expiredDeleted"]
    assert len(deleted) == 4, deleted
    recovered = subprocess.run([sys.executable, "-c", _RECOVER, json.dumps(
        {"url": target.url, "work_dir": str(owner_dir), "job": GROUP_KEY.job, "task": GROUP_KEY.task,
         "store": GROUP_KEY.store})], env=cli_env(work_base), capture_output=True, text=True, timeout=300)
    assert recovered.returncode == 0, recovered.stderr
    (outcome,) = json.loads(recovered.stdout)
    assert outcome.startswith("aborted"), outcome
    assert [cp.generation for cp in _history(target, GROUP_KEY)] == [1]
    base = target.args(GROUP_KEY)
    verified = cli("verify", *base, "--all", env=target.env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    rows = _run_child(_child_args(target, GROUP_KEY, owner_dir, mode="group", batches=[1]), work_base)
    assert rows[0]["generation"] == 2
    assert cli("verify", *base, "--all", env=target.env).returncode == 0


#: Recovery of the owner's work directory (what the owner's next start, or `blobstate recover`, runs).
_RECOVER = """
import json, sys
from blobstate.commit.recover import recover
from blobstate.commit.session import StoreSession
from blobstate.model.records import StoreKey
from blobstate.repository.repo import Repository
c = json.loads(sys.argv[1])
repo = Repository.open(c["url"])
with StoreSession(StoreKey(c["job"], c["task"], c["store"]), c["work_dir"]) as session:
    print(json.dumps([outcome for _, outcome in recover(session, repo)]))
"""


# -- a writer's view is pinned when it opens -----------------------------------------------------------------------
def test_a_committer_is_fenced_at_its_first_append_when_another_writer_appended_after_it_opened(file_target,
                                                                                               tmp_path,
                                                                                               work_base):
    """A committer opens on generation 1; another writer (a real process) appends generation 2; the committer's
    first delta must be fenced, not land on top of the other writer's record."""
    target = file_target
    _run_child(_child_args(target, KEY, tmp_path / "other", mode="deltas", batches=[0]), work_base)
    with StoreCommitter(KEY, target.url, work_dir=str(tmp_path / "mine")) as committer:
        _run_child(_child_args(target, KEY, tmp_path / "other", mode="deltas", batches=[1]), work_base)
        with pytest.raises(FencedError):
            DeltaCommitter(committer).commit_changelog(changelog.encode([(changelog.PUT, "k", "v")]), batch_id=2)
    assert [cp.batch_id for cp in _history(target, KEY)] == [0, 1]


# -- case 6 ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def target(repo_target):
    return repo_target  # file:// and moto S3 (cloud_servers.repo_target)


def test_a_second_interrupt_during_an_abort_leaves_nothing_unsaid(target, cli, tmp_path, work_base):
    """A backup with uploads in flight (paused by SIGSTOP right after its first chunk landed) gets SIGINT, and a
    second SIGINT as soon as it runs again, during its abort. In-flight uploads must be waited for before the abort
    deletes: either nothing is left and the message says so, or the message names the open commit and exactly
    the blobs it left, and ``blobstate recover`` removes them. (The window the second interrupt hits is tested
    deterministically by ``tests/fault/test_abort_interrupts.py``; here the whole path, with a real process.)"""
    from fault_harness import send_cont, store_objects

    store = tmp_path / "s"
    write_keys(store, n=6_000, value_size=10_000, seed=3)  # ~60 MB of incompressible values
    base = target.args(KEY)
    clock = tmp_path / "clock"
    writer = subprocess.Popen([sys.executable, "-m", "blobstate.cli", "backup", str(store), *base, "--chunk-size",
                               "4MiB", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**cli_env(work_base), **target.env, **pause_env("BlobUploaded", clock)})
    wait_stopped(writer)
    (journal,) = glob.glob(os.path.join(glob.escape(str(work_base)), "**", "journal.log"), recursive=True)
    assert _uploads(journal) >= 1
    os.kill(writer.pid, signal.SIGINT)  # pending while stopped
    send_cont(writer, clock_file=clock, advance_ms=0)
    deadline = time.monotonic() + 60
    while _sigint_pending(writer.pid) and writer.poll() is None and time.monotonic() < deadline:
        time.sleep(0.001)  # until the first SIGINT was delivered (two pending ones would merge into one)
    os.kill(writer.pid, signal.SIGINT)  # the second one, during the abort
    _, err = writer.communicate(timeout=300)
    assert writer.returncode == 130, err
    left = store_objects(target, KEY)
    if "no commit of j/0/s is left open" in err:
        assert left == set(), "blobs left behind that nothing names"
        return
    said = re.search(r"is left open at \w+ with (\d+) blob\(s\) in the repository(?:: ([^;]+))?;", err)
    assert said and "blobstate recover" in err, err
    assert int(said.group(1)) == len(left), err
    if len(left) <= 10:
        assert set(filter(None, (said.group(2) or "").split(", "))) == left, err
    recovered = cli("recover", *base, "--json", env=target.env)
    assert recovered.returncode == 0, recovered.stderr
    assert store_objects(target, KEY) == set(), "blobs left behind that recover did not remove"


def _uploads(journal: str) -> int:
    """How many ``BlobUploaded`` events the journal holds (read without a lock, as a tail)."""
    return sum(1 for e in Journal(journal).read(strict=False).events if e.type_name == "BlobUploaded")


def _sigint_pending(pid: int) -> bool:
    """True while a SIGINT is pending for process ``pid`` (its ``/proc`` status, shared or per thread)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        return False
    return any(int(fields.get(name, "0").strip() or "0", 16) & (1 << (signal.SIGINT - 1))
               for name in ("SigPnd", "ShdPnd"))


# -- rule 7 for partition snapshots ----------------------------------------------------------------------------------
def test_a_partition_snapshot_uploads_again_a_reused_blob_the_store_lost(file_target, cli, tmp_path):
    """A partition's second snapshot reuses the blobs of its first; one of them was lost (deleted by hand, lost by
    the store). Staging the snapshot walks the store's ``blobs/`` and uploads it again under the same id, as every
    snapshot commit does (rule 7), so both snapshots verify."""
    from rocksdict import Rdict

    from blobstate.commit.group import GroupCommitter
    from blobstate.model.chain import partition_history
    from blobstate.repository.backends import open_local_store
    from blobstate.worker import stage_snapshot

    db = Rdict(str(tmp_path / "db"))
    for i in range(200):
        db[f"route/{i}"] = "x" * 200
    db.flush(True)
    open_local_store("rocksdb").create_checkpoint(db, str(tmp_path / "ck"))
    db.close()
    repo = Repository.open(file_target.url, create=True)
    with StoreCommitter(GROUP_KEY, repo, work_dir=str(tmp_path / "owner")) as committer:
        groups = GroupCommitter(committer, num_partitions=1)
        previous = None
        for batch in (0, 1):
            staged = stage_snapshot(repo, GROUP_KEY, partition=0, batch_id=batch, checkpoint_dir=str(tmp_path / "ck"),
                                    previous=previous, ttl_ms=DAY_MS)
            groups.commit([staged.entry], batch_id=batch, new_blob_ids=staged.new_blob_ids)
            previous = partition_history(repo.log.history(GROUP_KEY), 0)[-1]
            if batch == 0:
                lost = sorted(repo.read_index(previous).referenced_blob_ids())[0]
                repo.store.delete(lost)
    repo.close()
    verified = cli("verify", *file_target.args(GROUP_KEY), "--all")
    assert verified.returncode == 0, verified.stdout + verified.stderr
