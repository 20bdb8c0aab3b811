"""Found by the soak (bench/soak.py): a gc that has decided what to delete deletes the blobs of a commit that landed
after its decision and was healed before its deletes.

gc lists the store and reads the log, finds a paused (or crashed) commit's blobs with expired leases and no snapshot
referencing them, and decides to delete them. Before it deletes (a slow or paused gc host: here it is stopped right
after its log read by tests/support/soak_plugin.py, its decision fixed), the commit lands late: the writer resumes and
appends, or a recovery re-appends the record of an append whose outcome was unknown. The writer's post-append check
(``healing.heal_committed``) finds every blob still present, removes the TTLs and completes. Then gc deletes them: the
latest committed snapshot references a deleted index and deleted blobs (``verify`` exit 3, restore ``BlobNotFound``),
and nothing heals it until a later backup happens to re-upload the same files.

The issue-12 property this breaks: "gc never deletes a blob that a commit can still reference at its commit point
... a commit that lands anyway is detected and healed at once. Concurrent gc runs on several hosts are safe."
"""

from __future__ import annotations

import json
import shutil
import time

import pytest
from fault_harness import DAY_MS, Target, assert_end_state, pause_env, send_cont, start_cli, wait_stopped
from fixtures_core import read_all, write_keys

from blobstate.model.records import StoreKey

KEY = StoreKey("j", "0", "s")
HOUR_MS = 3600 * 1000
LATE_MS = DAY_MS + HOUR_MS  # past the default 1-day TTL of the commit's blobs and index


def _committed_then_changed(cli, target: Target, tmp_path):
    """A store backed up once, then changed; returns its directory and the data it holds now."""
    store = tmp_path / "s"
    write_keys(store, n=2_000, value_size=200, seed=1)
    assert cli("backup", store, *target.args(KEY), "-q").returncode == 0
    write_keys(store, n=300, value_size=200, seed=2, start=20_000)
    return store, read_all(store)


def _decided_gc(target: Target, tmp_path, now_ms: int):
    """A gc that stops itself once it has listed the store and read the log: its decision is fixed from then on."""
    gc = start_cli("gc", "--repo", target.url, "--now", str(now_ms), "--json", work_base=tmp_path / "gc-host",
                   env={"BLOBSTATE_PLUGINS": "soak_plugin", "BLOBSTATE_TEST_STOP_AFTER_LOG_READ": "1"})
    wait_stopped(gc)
    return gc


@pytest.mark.parametrize("lands_by", ["resumed-writer", "recovered-append"])
def test_a_commit_landing_after_a_gc_decided_is_never_left_referencing_deleted_blobs(cli, tmp_path, work_base,
                                                                                      lands_by):
    target = Target(f"file://{tmp_path}/repo")
    store, expected = _committed_then_changed(cli, target, tmp_path)
    later = int(time.time() * 1000) + LATE_MS
    if lands_by == "resumed-writer":
        clock = tmp_path / "clock"
        writer = start_cli("backup", store, *target.args(KEY), "-q", work_base=work_base,
                           env=pause_env("CheckpointAppending", clock))
        wait_stopped(writer)  # uploads and index done, the append about to be sent
        gc = _decided_gc(target, tmp_path, later)  # the commit's leases expired: its blobs are gc's to delete
        send_cont(writer, clock_file=clock, advance_ms=LATE_MS)
        _, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err  # landed late; its heal check found every blob present
    else:
        crashed = cli("backup", store, *target.args(KEY), "-q",
                      env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "CheckpointAppending"})
        assert crashed.returncode == -9  # the append's outcome is unknown to the journal
        gc = _decided_gc(target, tmp_path, later)
        recovered = cli("recover", *target.args(KEY), "--json",  # a day later: re-appends the record, it lands
                        env={"BLOBSTATE_PLUGINS": "soak_plugin", "BLOBSTATE_TEST_CLOCK_OFFSET_MS": str(LATE_MS)})
        assert recovered.returncode == 0, recovered.stderr
        assert [r["outcome"].split(":")[0] for r in recovered.json()] == ["finished"]
    send_cont(gc)
    out, err = gc.communicate(timeout=120)
    assert gc.returncode == 0, err
    verified = cli("verify", *target.args(KEY), "--all")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=expected)


# -- one test per rule of the re-check (docs/architecture.md, "Safety", rule 13); each fails without its rule ------


def _late_commit(cli, target: Target, tmp_path, work_base, gc_env: dict[str, str], *, lagging_log=None):
    """A first backup, then a second one paused before its append; a gc (``gc_env`` says where it stops itself)
    that sees the second commit's leases expired; the writer lands a day late and completes; returns the stopped
    gc, the store's directory and the data of the late commit. With ``lagging_log`` (a directory), the gc reads a
    copy of the checkpoint log taken after the first backup (a replica that lags from then on)."""
    store, expected = _committed_then_changed(cli, target, tmp_path)
    if lagging_log is not None:
        shutil.copytree(tmp_path / "repo" / "checkpoints", lagging_log / "checkpoints")
    clock = tmp_path / "clock"
    writer = start_cli("backup", store, *target.args(KEY), "-q", work_base=work_base,
                       env=pause_env("CheckpointAppending", clock))
    wait_stopped(writer)
    # the same log (one per repository), read through a replica that lags: tests/support/lagging_log.py
    lag = ({"BLOBSTATE_PLUGINS": "soak_plugin,lagging_log", "BLOBSTATE_TEST_LAGGING_LOG": str(lagging_log)}
           if lagging_log is not None else {"BLOBSTATE_PLUGINS": "soak_plugin"})
    gc = start_cli("gc", "--repo", target.url, "--now", str(int(time.time() * 1000) + LATE_MS), "--json",
                   work_base=tmp_path / "gc-host", env={**lag, **gc_env})
    wait_stopped(gc)
    send_cont(writer, clock_file=clock, advance_ms=LATE_MS)
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    return gc, store, expected


def _finish(gc, hold_s: float = 0.0) -> dict:
    """Resume ``gc`` (first letting ``hold_s`` seconds pass since it stopped: a pause longer than the re-check bound
    the test set) and return its report."""
    deadline = time.monotonic() + hold_s  # the gc has been stopped at least since the writer resumed
    while time.monotonic() < deadline:
        time.sleep(0.05)  # time passing is the condition under test, not a synchronisation
    send_cont(gc)
    out, err = gc.communicate(timeout=120)
    assert gc.returncode == 0, err
    return json.loads(out)[0]


def test_a_gc_paused_after_its_recheck_checks_again_before_deleting(cli, tmp_path, work_base):
    """Rule 13b: a decision re-checked longer ago than ``RECHECK_AFTER_S`` (monotonic) is re-checked again before
    the next delete batch. The gc stops right after its first re-check's log read (the late commit not yet in the
    log); the bound is scaled down to 0.5 s as the pause is scaled down from minutes to a second."""
    target = Target(f"file://{tmp_path}/repo")
    gc, store, expected = _late_commit(cli, target, tmp_path, work_base, {
        "BLOBSTATE_TEST_STOP_AFTER_LOG_READ": "2", "BLOBSTATE_TEST_GC_RECHECK_AFTER_S": "0.5"})
    report = _finish(gc, hold_s=1.0)
    assert report["spared"] and not report["expiredDeleted"], report  # every decided blob was the late commit's
    assert cli("verify", *target.args(KEY), "--all").returncode == 0
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=expected)


def test_a_gc_whose_log_read_lags_spares_blobs_whose_ttl_their_writer_removed(cli, tmp_path, work_base):
    """Rule 13a's TTL half: an expired blob is deleted only while its TTL is still expired. Here gc reads a
    checkpoint log that lags (a replica copied before the late commit landed: its re-check sees no new record);
    the writer removed the TTLs of its landed commit before its heal check, so the re-check spares them."""
    target = Target(f"file://{tmp_path}/repo")
    gc, store, expected = _late_commit(cli, target, tmp_path, work_base, {"BLOBSTATE_TEST_STOP_AFTER_LOG_READ": "1"},
                                       lagging_log=tmp_path / "lagging-log")
    report = _finish(gc)
    assert report["spared"] and not report["expiredDeleted"], report
    assert cli("verify", *target.args(KEY), "--all").returncode == 0
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=expected)


def test_a_gc_paused_inside_its_delete_call_loses_at_most_data_blobs_the_next_backup_puts_back(cli, tmp_path,
                                                                                               work_base):
    """Rule 13's residual window: a gc paused inside the delete call itself (after its last re-check) deletes the
    late commit's data blobs in that call, but re-checks before its index batch (data before indexes), so the
    late commit's index survives. Meanwhile the late (latest) snapshot does not restore and every earlier one does;
    the next backup's walk of ``blobs/`` uploads the lost blobs again from the local checkpoint under the same
    ids, and every retained snapshot restores again."""
    target = Target(f"file://{tmp_path}/repo")
    gc, store, expected = _late_commit(cli, target, tmp_path, work_base, {
        "BLOBSTATE_TEST_STOP_BEFORE_DELETE": "1", "BLOBSTATE_TEST_GC_RECHECK_AFTER_S": "0.5"})
    report = _finish(gc, hold_s=1.0)
    assert report["expiredDeleted"] and all("/blobs/" in b for b in report["expiredDeleted"]), report
    assert [b for b in report["spared"] if "/indexes/" in b], report  # the late commit's index
    broken = cli("verify", *target.args(KEY), "--all")
    assert broken.returncode == 3 and "<index>" not in broken.stdout, broken.stdout
    first = cli("list", *target.args(KEY), "--json").json()[0]["checkpointId"]
    earlier = cli("restore", tmp_path / "earlier" / KEY.store, *target.args(KEY), "--checkpoint", first,
                  "--no-cleanup", "-q", work=tmp_path / "restore-host")
    assert earlier.returncode == 0, earlier.stderr
    healed = cli("backup", store, *target.args(KEY), "-q")  # the files did not change: every lost blob is reused
    assert healed.returncode == 0, healed.stderr
    assert cli("verify", *target.args(KEY), "--all").returncode == 0
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=expected)


def test_a_gc_spares_a_commit_that_landed_before_its_writer_removed_its_ttls(cli, tmp_path, work_base):
    """Rule 13a's log half: the re-check reads every record that landed since the decision. A recovery re-appends a
    crashed commit's record (it lands) and is SIGKILLed right after, its TTLs still on and expired; the gc that
    decided before the record landed then spares the commit, so it restores even before any cleanup ran."""
    target = Target(f"file://{tmp_path}/repo")
    store, expected = _committed_then_changed(cli, target, tmp_path)
    crashed = cli("backup", store, *target.args(KEY), "-q",
                  env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "CheckpointAppending"})
    assert crashed.returncode == -9
    gc = _decided_gc(target, tmp_path, int(time.time() * 1000) + LATE_MS)
    landed = cli("recover", *target.args(KEY), "--json", env={
        "BLOBSTATE_PLUGINS": "soak_plugin,kill_plugin", "BLOBSTATE_TEST_CLOCK_OFFSET_MS": str(LATE_MS),
        "BLOBSTATE_TEST_KILL_AT": "CheckpointWritten"})
    assert landed.returncode == -9, landed.stderr
    report = _finish(gc)
    assert report["spared"] and not report["expiredDeleted"], report
    verified = cli("verify", *target.args(KEY), "--all")  # before any cleanup of the landed commit
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert cli("recover", *target.args(KEY)).returncode == 0
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=expected)
