"""Found by the soak (bench/soak.py): a gc that has decided what to delete deletes the blobs of a commit that landed
after its decision and was healed before its deletes.

gc lists the store and reads the log, finds a paused (or crashed) commit's blobs with expired leases and no
snapshot referencing them, and decides to delete them. Before it deletes (a slow or paused gc host: here it is
stopped right before its first delete by tests/support/soak_plugin.py), the commit lands late: the writer resumes
and appends, or a recovery re-appends the record of an append whose outcome was unknown. The writer's post-append
check (``healing.heal_committed``) finds every blob still present, removes the TTLs and completes. Then gc deletes
them: the latest committed snapshot references a deleted index and deleted blobs (``verify`` exit 3, restore
``BlobNotFound``), and nothing heals it until a later backup happens to re-upload the same files.

The issue-12 property this breaks: "gc never deletes a blob that a commit can still reference at its commit point
... a commit that lands anyway is detected and healed at once. Concurrent gc runs on several hosts are safe."
"""

from __future__ import annotations

import time

import pytest
from fault_harness import DAY_MS, Target, assert_end_state, pause_env, send_cont, start_cli, wait_stopped
from fixtures_core import read_all, write_keys

from blobstate.model import StoreKey

KEY = StoreKey("j", "0", "s")
HOUR_MS = 3600 * 1000
LATE_MS = DAY_MS + HOUR_MS  # past the default 1-day TTL of the commit's blobs and index


def _decided_gc(target: Target, tmp_path, now_ms: int):
    """A gc that stops itself right before its first delete, having listed the store and read the log."""
    gc = start_cli("gc", "--repo", target.url, "--now", str(now_ms), "--json", work_base=tmp_path / "gc-host",
                   env={"BLOBSTATE_PLUGINS": "soak_plugin", "BLOBSTATE_TEST_STOP_BEFORE_DELETE": "1"})
    wait_stopped(gc)
    return gc


@pytest.mark.parametrize("lands_by", ["resumed-writer", "recovered-append"])
def test_a_commit_landing_after_a_gc_decided_is_never_left_referencing_deleted_blobs(cli, tmp_path, work_base,
                                                                                      lands_by):
    target = Target(f"file://{tmp_path}/repo")
    store = tmp_path / "s"
    write_keys(store, n=2_000, value_size=200, seed=1)
    assert cli("backup", store, *target.args(KEY), "-q").returncode == 0
    write_keys(store, n=300, value_size=200, seed=2, start=20_000)
    expected = read_all(store)
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
