"""The same binding under Spark Connect (a Connect server in the child's own JVM, on a free port of its own:
``spark_child.connect_session``).

``foreachBatch`` is pickled to the server's Python worker; the engine opens there on the first batch, restores, and
commits a delta inside every batch; snapshots are triggered when the next batch starts. Each case runs the flights
query from a ``cleanSource=archive`` file source in a child process (a Connect session cannot share a process with
the classic one of the other tests), SIGKILLs the whole group (client, server JVM, Python worker) at a point of the
batch, restarts under Connect, and ends equal to the pandas reference with Spark's ``offsets/`` and ``commits/``
untouched; the restart also records what the client-side binding refuses.
"""

from __future__ import annotations

import json
import signal

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")  # the `connect` extra

from spark_fixtures import (  # noqa: E402
    KEY,
    assert_untouched,
    kill_paths,
    kinds,
    restored_state,
    run_child,
    spark_listing,  # noqa: E402
)

from blobstate.spark.demo.flights import reference_state  # noqa: E402

CASES = {
    "inside-delta-upload": dict(kill_at_event="UploadsPlanned:4:delta"),
    "after-delta-commit-point": dict(kill_at_event="CheckpointWritten:4:delta"),
}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.long) if c == "after-delta-commit-point" else c
                                  for c in CASES])
def test_sigkill_under_spark_connect_then_restart_equals_the_reference(case, flights_days, tmp_path):
    directory, frame = flights_days
    paths = kill_paths(tmp_path, directory)
    code, out, err = run_child(tmp_path, paths, connect=True, **CASES[case])
    assert code == -signal.SIGKILL, (code, out, err)
    after_kill = spark_listing(paths["checkpoint"])
    assert max(int(n) for n in after_kill["commits"] if n.isdigit()) == 2
    committed = [b for kind, b in kinds(paths["repo"]) if kind == "delta"]
    assert (3 in committed) == (case == "after-delta-commit-point")

    probe = tmp_path / "refused.json"
    code, out, err = run_child(tmp_path, {**paths, "probe": str(probe)}, connect=True)
    assert code == 0 and "not killed" in out, (code, out, err)
    assert_untouched(after_kill, spark_listing(paths["checkpoint"]))
    records = kinds(paths["repo"])
    assert ("delta", 7) in records and any(kind == "snapshot" for kind, _ in records)
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)
    refused = json.loads(probe.read_text())
    assert set(refused) == {"db", "batch_stats", "wait_snapshot", "pause_snapshots"}
    assert all("not available under Spark Connect" in message for message in refused.values())


def test_a_connect_child_dials_the_port_its_own_server_bound_even_when_its_old_port_is_taken(tmp_path):
    """Issue 43 item 10: the child's Connect server was told a port picked free beforehand
    (``BLOBSTATE_TEST_CONNECT_PORT``); on a loaded machine with two workers something else could take it first, and
    Spark then binds the next port up without a word (``startServiceOnPort``) while the client dials the taken one
    (another child's server: "a Spark Connect server error" before the kill point). Here that port is held by a
    listener before the child starts: the child binds port 0, dials the port its own server reports, and runs a
    query (on the old code it failed: its client reached the listener, not its server)."""
    import socket
    import sys

    from spark_fixtures import child_env, run_in_group

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(8)
    try:
        code = ("import spark_child; s = spark_child.session(True); print('rows', s.range(5).count(), flush=True); "
                "s.stop()")
        env = child_env(BLOBSTATE_TEST_CONNECT_PORT=str(taken.getsockname()[1]))
        rc, out, err = run_in_group([sys.executable, "-c", code], env, timeout=240)
    finally:
        taken.close()
    assert rc == 0 and "rows 5" in out, (rc, out, err)
