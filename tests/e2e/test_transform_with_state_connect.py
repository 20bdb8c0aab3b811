"""``blobstate.spark.transform_with_state`` under Spark Connect (issue 41): the same call from a Connect client, the
processor, the sink and ``foreachBatch`` pickled to the server's Python worker, the partitioned state (N=4) and the
driver's store opened there on the first batch (no placement under Connect, as the partitioned store has none).

* the running count over one input file per batch: the output rows per batch id and the final state read back from
  the repository are those of the plain-Python reference (``tests/processors/reference.py``), which
  ``tests/processors/test_against_spark.py`` and ``tests/e2e/test_transform_with_state.py`` check against Spark's
  own ``transformWithStateInPandas`` and the classic run of ``transform_with_state`` (no Spark query in this
  process: Spark's operator here only added a Python worker's connect-back timeout on a loaded machine). The clients
  are children of their own (a Connect client cannot share a process with the classic session), all of this
  module's clients dialling one Connect server (``connect_server``);
* an initial state is refused by ``transform_with_state`` under Connect, before the query starts
  (``blobstate.spark.stateful.driver.entry.refuse_under_connect``);
* the sessions processor (an event-time timer) on N=4 in a child holding its own server, SIGKILLed as a whole
  (client, server JVM, Python workers) right after batch 3's group record is committed and before the sink saw it,
  then restarted under Connect: the union of the sink's rows, one file per batch id (an overwrite), is what the
  reference gives for the query's own times, each session closed exactly once.

Slow: ``python -m pytest -n 0 tests/e2e/test_transform_with_state_connect.py``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from spark_fixtures import SUPPORT, child_env, run_in_group  # noqa: E402

from tests.e2e.test_transform_with_state import our_state, sessions_expected  # noqa: E402
from tests.processors import inputs, reference, sessions  # noqa: E402
from tests.processors.reference import Batch, canonical  # noqa: E402
from tests.processors.test_against_spark import committed_batches, write_inputs  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("spark-connect-processors")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def client_env(**extra: str) -> dict:
    """A Connect child's environment: the support modules and the repository root importable (the server's Python
    workers unpickle ``tests.processors``)."""
    env = child_env(**extra)
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env["PYTHONPATH"]])
    return env


@pytest.fixture(scope="module")
def connect_server() -> Any:
    """One Spark Connect server for the module (``connect_server.py`` in a process group of its own): yields
    ``(port, environment of its clients)``; stopped by closing its stdin, its group killed after."""
    env = client_env(SPARK_CONNECT_AUTHENTICATE_TOKEN=str(uuid.uuid4()))
    server = subprocess.Popen([sys.executable, os.path.join(SUPPORT, "connect_server.py")], env=env,
                              start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        line = server.stdout.readline()  # blocks until the server bound its port (or died: an empty line)
        assert line.startswith("port "), f"the Connect server did not start: {line!r}"
        yield int(line.split()[1]), env
    finally:
        server.stdin.close()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait()


def run_client(tmp_path: Any, env: dict, *, name: str, source: Any, partitions: int | None, port: int | None,
               last_file: int, timeout: float = 600, initial: list | None = None) -> tuple[int, str, str]:
    """``name``'s processor through ``transform_with_state`` in a Connect client child (``stateful_connect_child``)
    until a committed batch read file ``last_file``; the sink writes batch N's rows to ``tmp_path/out/N.json``."""
    config = {"port": port, "name": name, "source": str(source), "checkpoint": str(tmp_path / "checkpoint"),
              "repo": f"file://{tmp_path}/repo", "out": str(tmp_path / "out"), "partitions": partitions,
              "state_dir": str(tmp_path / "driver-state"), "local": str(tmp_path / "local"), "last_file": last_file,
              "watermark_ms": sessions.WATERMARK_DELAY_MS if name == "sessions" else 0, "initial": initial}
    path = tmp_path / "child.json"
    path.write_text(json.dumps(config))
    return run_in_group([sys.executable, os.path.join(SUPPORT, "stateful_connect_child.py"), str(path)], env,
                        timeout=timeout)


def test_an_initial_state_under_connect_is_refused_before_the_query_starts(connect_server, tmp_path):
    """Without the refusal the first batch failed in the server's worker with Spark's ``SESSION_NOT_SAME`` (the
    initial state's DataFrame belongs to the client's session, the batch's to the worker's clone)."""
    port, env = connect_server
    source = write_inputs(tmp_path / "in", inputs.running_count(1))
    code, out, err = run_client(tmp_path, env, name="running_count", source=source, partitions=4, port=port,
                                last_file=0, initial=[["k0", 100]])
    assert code == 1 and "ConfigurationError: initial_state is not available under Spark Connect" in err, (code, err)
    assert not (tmp_path / "checkpoint").exists() and not (tmp_path / "repo").exists()  # nothing started


def sink_rows(tmp_path: Any) -> dict[int, list[dict]]:
    """What the sink wrote, by batch id (one file per batch id: a re-run's rows replace the first run's)."""
    out = tmp_path / "out"
    return {int(n[:-5]): json.loads((out / n).read_text()) for n in os.listdir(out) if n.endswith(".json")}


@pytest.mark.parametrize("partitions", [pytest.param(4, id="n4"),
                                        pytest.param(None, id="driver", marks=pytest.mark.long)])
def test_the_running_count_under_connect_equals_the_reference_batch_for_batch(connect_server, tmp_path, partitions):
    port, env = connect_server
    data = inputs.running_count()
    source = write_inputs(tmp_path / "in", data)
    code, out, err = run_client(tmp_path, env, name="running_count", source=source, partitions=partitions,
                                port=port, last_file=len(data) - 1)
    assert code == 0 and "not killed" in out, (code, out, err)
    committed = committed_batches(str(tmp_path / "checkpoint"))
    ours = {b: rows for b, rows in sink_rows(tmp_path).items() if b in committed}
    expected, counts = reference.running_count([Batch(frame, 0) for frame in data])
    assert sorted(ours) == list(range(len(data)))  # foreachBatch: one batch per file
    for batch_id, rows in enumerate(expected):
        assert canonical(ours[batch_id]) == canonical(rows), f"batch {batch_id}"
    got = our_state(tmp_path, "running_count", partitions)
    assert {dict(r["key"])["k"]: dict(r["value"])["count"] for r in got} == counts


@pytest.mark.parametrize("partitions", [pytest.param(4, id="n4"),
                                        pytest.param(None, id="driver", marks=pytest.mark.long)])
def test_a_sigkill_of_the_connect_server_mid_stream_then_restart_emits_each_batch_once(tmp_path, partitions):
    """Batch 3's record committed (a group record on N=4, a delta on the driver's store), then the whole group of
    client, server JVM and Python workers SIGKILLed before the sink saw batch 3; the restart under a new server
    re-runs batch 3 with the same times: the sink's rows by batch id are the reference's, each timer's session
    emitted once."""
    data = [f for f in inputs.sessions_events() if f is not None]
    source = write_inputs(tmp_path / "in", data)
    kind = "delta" if partitions is None else "group"
    killed = client_env(BLOBSTATE_PLUGINS="kill_plugin", BLOBSTATE_TEST_KILL_AT=f"CheckpointWritten:4:{kind}",
                        BLOBSTATE_TEST_KILL_GROUP="1")
    code, out, err = run_client(tmp_path, killed, name="sessions", source=source, partitions=partitions, port=None,
                                last_file=len(data) - 1)
    assert code == -signal.SIGKILL, (code, out, err)
    assert sorted(committed_batches(str(tmp_path / "checkpoint"))) == [0, 1, 2]  # batch 3: ours, never Spark's
    assert 3 not in sink_rows(tmp_path)  # killed before its sink
    code, out, err = run_client(tmp_path, client_env(), name="sessions", source=source, partitions=partitions,
                                port=None, last_file=len(data) - 1)
    assert code == 0 and "not killed" in out, (code, out, err)

    got = sink_rows(tmp_path)
    expected, state = sessions_expected(str(tmp_path / "checkpoint"), data)
    assert sorted(got) == sorted(expected)
    for b in expected:
        assert canonical(got[b]) == canonical(expected[b]), f"batch {b}"
    assert got[3]  # the killed batch fires a timer: its re-run's rows reached the sink
    closed = [(r["user"], r["start_ms"]) for rows in got.values() for r in rows]
    assert closed and len(closed) == len(set(closed))  # each timer's session emitted exactly once
    timers = our_state(tmp_path, "sessions", partitions, timers=True)
    assert sorted(dict(r["key"])["user"] for r in timers) == sorted(state)
