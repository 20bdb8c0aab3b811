"""Issue 31: S3 native mode records a data blob's TTL as its expiry in the blob's own metadata (set in the PUT, no
tag, nothing to remove after the commit: U + 5 requests for a snapshot of an open committer). Such a blob carries
no mark, so until its commit lands gc sees it as an orphan: Safety rule 2 (gc honours the expiry each writer
recorded, never its own idea of the TTL) holds only because gc reads that expiry before it deletes an orphan
(``blobstate.maintenance.gc:past_recorded_expiry``). Real ``blobstate`` processes against the moto server, the
writer SIGSTOPped after its uploads (tests/support/pause_plugin.py) and its clock moved forward on resume."""

from __future__ import annotations

import time
import uuid

import pytest
from fault_harness import DAY_MS, Target, assert_end_state, pause_env, resume, start_cli, wait_stopped
from fixtures_core import read_all, write_keys

from blobstate.model.records import StoreKey

KEY = StoreKey("j", "0", "s")
HOUR_MS = 3600 * 1000
NATIVE = ["--ttl-mode", "native"]


@pytest.fixture
def target(s3_target):
    return Target(f"{s3_target.url}-{uuid.uuid4().hex[:8]}", {**s3_target.storage_options, "skip_instance_cache": True},
                  s3_target.env)


def _paused_writer(cli, target, tmp_path, work_base, *ttl):
    store = tmp_path / "s"
    write_keys(store, n=2_000, value_size=200, seed=1)
    first = cli("backup", store, *target.args(KEY), *NATIVE, "-q", env=target.env)
    assert first.returncode == 0, first.stderr
    write_keys(store, n=300, value_size=200, seed=2, start=20_000)
    clock = tmp_path / "clock"
    writer = start_cli("backup", store, *target.args(KEY), *NATIVE, *ttl, "-q", work_base=work_base,
                       env={**target.env, **pause_env("CheckpointAppending", clock)})
    wait_stopped(writer)  # paused right before its append: data blobs with a recorded expiry, the index tagged
    return store, writer, clock


def _gc(cli, target, tmp_path, at_ms):
    gc = cli("gc", "--repo", target.url, *NATIVE, "--now", str(at_ms), "--json", env=target.env,
             work=tmp_path / "gc-host")
    assert gc.returncode == 0, gc.stderr
    return gc.json()[0]


@pytest.mark.slow
def test_gc_with_a_shorter_ttl_never_deletes_a_paused_commits_untagged_blobs(target, cli, tmp_path, work_base):
    """The writer recorded a 2-day expiry; gc, with its own 1-day TTL, runs 29 hours later: the uploads are older
    than gc's TTL and no record references them, yet none is deleted. Without ``past_recorded_expiry`` gc deletes
    the data blobs as orphans and the resumed commit has to put them back."""
    store, writer, clock = _paused_writer(cli, target, tmp_path, work_base, "--ttl", str(2 * DAY_MS))
    report = _gc(cli, target, tmp_path, int(time.time() * 1000) + 29 * HOUR_MS)
    assert report["expiredDeleted"] == [] and report["orphansDeleted"] == [], report
    done = resume(writer, clock_file=clock, advance_ms=29 * HOUR_MS)
    assert done.returncode == 0, done.stderr
    assert "missing" not in done.stderr and "lost" not in done.stderr, done.stderr  # nothing to heal
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=read_all(store), ttl_mode="native")


@pytest.mark.slow
def test_a_commit_paused_past_its_recorded_expiry_that_lands_anyway_is_healed(target, cli, tmp_path, work_base):
    """Past the writer's 1-day expiry gc reclaims the paused commit's uploads (its data blobs as orphans past
    their recorded expiry, its index by its expired tag); the writer, resumed, lands late, finds them missing and
    puts them back (Safety rule 5), so the snapshot restores."""
    store, writer, clock = _paused_writer(cli, target, tmp_path, work_base)
    report = _gc(cli, target, tmp_path, int(time.time() * 1000) + 25 * HOUR_MS)
    assert report["orphansDeleted"] and report["expiredDeleted"], report
    done = resume(writer, clock_file=clock, advance_ms=25 * HOUR_MS)
    assert done.returncode == 0, done.stderr
    assert "missing" in done.stderr or "lost" in done.stderr, done.stderr  # it noticed, and healed
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=read_all(store), ttl_mode="native")
