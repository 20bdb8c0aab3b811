"""Issue 3's crash matrix: a real `blobstate backup` subprocess SIGKILLed right after each journal event type, for
the first and for a later commit; then `blobstate recover`, and the repository must hold exactly the last committed
snapshot, nothing more, and accept the next backup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fixtures_core import read_all, repo_files, write_keys
from restore_helpers import plain_index

from blobstate.journal.events import EVENT_TYPES
from blobstate.journal.file import MAGIC, decode, encode
from blobstate.model.index import SnapshotIndex

COMMITTED_FROM = ("CheckpointWritten", "TtlRemoved", "BlobsDeleted", "LocalCheckpointsPruned", "CommitCompleted")
# Killed once its append may have been sent: recovery never aborts on the log's silence, it re-appends the same
# record (resolve), which lands it.
RESOLVED_FROM = ("CheckpointAppending",)
KILL_POINTS = [name for name in EVENT_TYPES if name != "CommitAborted"]


def _records(repo: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((repo / "checkpoints").rglob("*.json"))]


def _assert_repository_holds_exactly(repo: Path, committed: list[dict]) -> None:
    referenced = set()
    for record in committed:
        index = SnapshotIndex.from_bytes(plain_index((repo / record["indexBlobId"]).read_bytes()))
        referenced |= {b.blob_id for f in index.files().values() for b in f.blobs}
    assert repo_files(repo, "blobs") == referenced, "garbage blobs left, or referenced blobs lost"
    assert repo_files(repo, "indexes") == {r["indexBlobId"] for r in committed}
    assert not repo_files(repo, "ttl"), "a committed blob still has a TTL lease, or an aborted one left a lease"


@pytest.mark.parametrize("later", [False, True], ids=["first-commit", "later-commit"])
@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_sigkill_after_each_event_is_recovered(tmp_path, repo, cli, kill_at, later):
    store = tmp_path / "s"
    state1 = write_keys(store, n=5_000, seed=1)
    if later:
        assert cli("backup", store, "--repo", repo, "--retain", "1").returncode == 0
    state2 = dict(state1)
    state2.update(write_keys(store, n=500, seed=2, start=100_000))
    killer = {"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": kill_at}
    crashed = cli("backup", store, "--repo", repo, "--retain", "1", env=killer)
    assert crashed.returncode == -9, (kill_at, crashed.returncode, crashed.stderr)

    recovered = cli("recover", "--repo", repo, "--store", "s", "--json")
    assert recovered.returncode == 0, recovered.stderr
    plan = recovered.json()
    committed_now = kill_at in COMMITTED_FROM + RESOLVED_FROM
    if kill_at == "CommitCompleted":
        assert plan == []
    elif kill_at in RESOLVED_FROM:
        assert [row["action"] for row in plan] == ["resolve"] and plan[0]["outcome"].startswith("finished")
    else:
        assert [row["action"] for row in plan] == ["finish" if committed_now else "abort"]

    records = _records(repo)
    expected_state = state2 if committed_now else state1
    if committed_now or later:
        assert len(records) == 1  # --retain 1
        _assert_repository_holds_exactly(repo, records)
        dest = tmp_path / "restored" / "s"
        restored = cli("restore", dest, "--repo", repo, work=tmp_path / "fresh-host")
        assert restored.returncode == 0, restored.stderr
        assert read_all(dest) == expected_state
    else:
        assert records == []
        assert not repo_files(repo, "blobs") and not repo_files(repo, "indexes") and not repo_files(repo, "ttl")
        assert cli("restore", tmp_path / "none" / "s", "--repo", repo, work=tmp_path / "h2").returncode == 5

    again = cli("backup", store, "--repo", repo, "--retain", "1")
    assert again.returncode == 0, again.stderr
    _assert_repository_holds_exactly(repo, _records(repo))
    assert not list((tmp_path / "work").rglob("journal.log.compact"))


def test_crash_between_the_log_append_and_the_journal_append_is_committed(tmp_path, repo, cli, work_base):
    """The log has the checkpoint but the journal lost CheckpointWritten: recovery must finish, not abort."""
    store = tmp_path / "s"
    data = write_keys(store, n=3_000)
    killer = {"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"}
    assert cli("backup", store, "--repo", repo, env=killer).returncode == -9
    journal_path = next(work_base.rglob("journal.log"))
    result = decode(journal_path.read_bytes())
    assert type(result.events[-1]).__name__ == "CheckpointWritten"
    journal_path.write_bytes(MAGIC + b"".join(encode(e) for e in result.events[:-1]))  # drop it

    dry = cli("recover", "--repo", repo, "--store", "s", "--dry-run", "--json")
    assert dry.json()[0]["action"] == "finish" and dry.json()[0]["outcome"] == "planned"
    assert repo_files(repo, "ttl"), "dry run must not change anything"
    assert cli("recover", "--repo", repo, "--store", "s").returncode == 0
    _assert_repository_holds_exactly(repo, _records(repo))
    dest = tmp_path / "r" / "s"
    assert cli("restore", dest, "--repo", repo, work=tmp_path / "h").returncode == 0
    assert read_all(dest) == data


def test_backup_runs_recovery_before_its_first_commit(tmp_path, repo, cli):
    store = tmp_path / "s"
    write_keys(store, n=2_000)
    killer = {"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "BlobUploaded"}
    assert cli("backup", store, "--repo", repo, env=killer).returncode == -9
    assert repo_files(repo, "blobs")
    shown = cli("journal", "show", "--repo", repo, "--store", "s")
    assert "UploadsPlanned" in shown.stdout and "UPLOADING" in shown.stderr
    assert cli("backup", store, "--repo", repo).returncode == 0  # recovers the dead commit, then commits
    _assert_repository_holds_exactly(repo, _records(repo))
    assert len(_records(repo)) == 1


def test_restore_init_cleanup_on_a_new_host_removes_ttl_and_leaves_retention_to_the_writer(tmp_path, repo, cli):
    """Without a journal (another host), restore does the post-commit TTL removal from the index alone; retention
    is a writer's (a reader's view may be older than the log it would prune: Safety rule 15)."""
    store = tmp_path / "s"
    write_keys(store, n=2_000)
    assert cli("backup", store, "--repo", repo, "--retain", "1").returncode == 0
    write_keys(store, n=2_000, start=10_000)
    killer = {"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"}
    assert cli("backup", store, "--repo", repo, "--retain", "1", env=killer).returncode == -9
    assert repo_files(repo, "ttl")  # the crashed commit's blobs still carry leases
    r = cli("restore", tmp_path / "new" / "s", "--repo", repo, work=tmp_path / "new-host")
    assert r.returncode == 0, r.stderr
    assert not repo_files(repo, "ttl")
    assert len(_records(repo)) == 2  # the reader pruned nothing
    write_keys(store, n=2_000, start=20_000)
    assert cli("backup", store, "--repo", repo, "--retain", "1", work=tmp_path / "new-host").returncode == 0
    # the writer's retention (1) is applied: the older checkpoints and the blobs only they used are gone
    records = _records(repo)
    assert len(records) == 1 and records[0]["generation"] == 3
    _assert_repository_holds_exactly(repo, records)
