"""Rule 13's residual window closed where the store conditions a delete on the TTL mark (issue 27): on azurite
(Azure's emulator, which enforces ``x-ms-if-tags`` on Delete Blob and on each sub-request of a Blob Batch), native
TTL mode. A gc that decided and re-checked, then paused *inside* its delete call (``soak_plugin``: the call is
entered, its request not sent) while a late commit of those blobs lands, removes its expiry tags and completes:
gc's delete must be refused by the store (412: the tag no longer says expired), so the late commit restores.
Without the conditional delete (``BLOBSTATE_TEST_NO_CONDITIONAL_DELETE``) the same pause deletes the late commit's
blobs (``verify`` exit 3): the window today's bound leaves on every store without such a precondition.

What the emulators here enforce (checked by hand for this test): azurite refuses a Delete Blob whose
``x-ms-if-tags`` does not match (412), also per batch sub-request; moto refuses ``DeleteObject`` with a wrong
``If-Match`` ETag, but tag changes leave the ETag as it was (no condition sees a mark go) and ``DeleteObjects``
ignores a per-object ETag; the GCS emulator ignores ``ifMetagenerationMatch`` on delete.
"""

from __future__ import annotations

import json
import time

import pytest
from fault_harness import Target, pause_env, send_cont, start_cli, wait_stopped
from fixtures_core import read_all, write_keys

from blobstate.model.records import StoreKey

KEY = StoreKey("j", "0", "s")
LATE_MS = 25 * 3600 * 1000  # past the 1-day TTL of the late commit's blobs


@pytest.mark.parametrize("conditional", [True, False], ids=["conditional", "without"])
def test_a_gc_paused_inside_its_delete_call_never_deletes_a_late_commits_blobs_on_azure(
        azure_target, cli, tmp_path, work_base, conditional):
    env = {**azure_target.env, "BLOBSTATE_TTL_MODE": "native"}
    target = Target(azure_target.url, azure_target.storage_options, env)
    store = tmp_path / "s"
    write_keys(store, n=400, value_size=200, seed=1)
    assert cli("backup", store, *target.args(KEY), "-q", env=env).returncode == 0
    write_keys(store, n=100, value_size=200, seed=2, start=20_000)
    expected = read_all(store)
    clock = tmp_path / "clock"
    writer = start_cli("backup", store, *target.args(KEY), "-q", work_base=work_base,
                       env={**env, **pause_env("CheckpointAppending", clock)})
    wait_stopped(writer)  # its blobs carry expiry tags; the append about to be sent
    gc_env = {**env, "BLOBSTATE_PLUGINS": "soak_plugin,no_conditional_delete" if not conditional else "soak_plugin",
              "BLOBSTATE_TEST_STOP_BEFORE_DELETE": "1"}
    gc = start_cli("gc", "--repo", target.url, "--now", str(int(time.time() * 1000) + LATE_MS), "--json",
                   work_base=tmp_path / "gc-host", env=gc_env)
    wait_stopped(gc)  # decided, re-checked, inside its first delete call
    send_cont(writer, clock_file=clock, advance_ms=LATE_MS)
    _, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err  # landed a day late; TTLs removed, every blob present at its heal check
    send_cont(gc)
    out, err = gc.communicate(timeout=120)
    assert gc.returncode == 0, err
    report = json.loads(out)[0]
    verified = cli("verify", *target.args(KEY), "--all", env=env)
    if not conditional:  # today's bound: the call deletes the late commit's data blobs
        assert report["expiredDeleted"] and verified.returncode == 3, report
        return
    assert report["spared"] and not report["expiredDeleted"], report
    assert verified.returncode == 0, verified.stdout + verified.stderr
    restored = cli("restore", tmp_path / "out" / KEY.store, *target.args(KEY), "-q", env=env,
                   work=tmp_path / "restore-host")
    assert restored.returncode == 0, restored.stderr
    assert read_all(tmp_path / "out" / KEY.store) == expected
