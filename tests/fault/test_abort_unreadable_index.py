"""Found by the soak (bench/soak.py): an unreadable retained index plus a crash before the commit point wedges the
writer for good.

Recovery aborts the crashed commit (``CleanupExecutor.abort``), and abort subtracts every retained snapshot's
references from the blobs it deletes; with one retained index lost or damaged, ``retained_references`` raises, so
the recovery every backup runs first fails: every backup and every ``blobstate recover`` exits 3. With one writer
nothing ever commits again, so the bad index never leaves the retention window. Issue 12 case 3/4 ("damaged or
missing metadata never wedges a store") holds only while no abort is pending.
"""

from __future__ import annotations

import pytest
from fault_harness import Target, assert_end_state
from fixtures_core import read_all, write_keys

from blobstate.model.records import StoreKey

KEY = StoreKey("j", "0", "s")


@pytest.mark.parametrize("harm", ["lost", "damaged"])
def test_a_crashed_commit_is_aborted_even_when_a_retained_index_is_unreadable(cli, tmp_path, harm):
    target = Target(f"file://{tmp_path}/repo")
    store = tmp_path / "s"
    write_keys(store, n=2_000, value_size=200, seed=1)
    assert cli("backup", store, *target.args(KEY), "--retain", "2", "-q").returncode == 0
    index = tmp_path / "repo" / cli("list", *target.args(KEY), "--json").json()[-1]["indexBlobId"]
    if harm == "lost":
        index.unlink()
    else:
        data = bytearray(index.read_bytes())
        data[len(data) // 2] ^= 0x01
        index.write_bytes(bytes(data))
    write_keys(store, n=300, value_size=200, seed=2, start=20_000)
    crashed = cli("backup", store, *target.args(KEY), "--retain", "2", "-q",
                  env={"BLOBSTATE_PLUGINS": "kill_plugin", "BLOBSTATE_TEST_KILL_AT": "BlobUploaded"})
    assert crashed.returncode == -9  # an open commit: the next backup's recovery aborts it
    for seed in (3, 4):  # the next backups work (full uploads), and push the bad index out of retention
        write_keys(store, n=100, value_size=200, seed=seed, start=30_000 * seed)
        after = cli("backup", store, *target.args(KEY), "--retain", "2", "-q")
        assert after.returncode == 0, after.stderr
    assert_end_state(cli, target, KEY, store, tmp_path, expected_latest=read_all(store))
