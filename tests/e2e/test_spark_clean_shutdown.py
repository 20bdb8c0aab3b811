"""A clean shutdown of a partitioned query logs no ERROR (issue 29, case 9): ``PartitionedState.close()`` detaches
its listener before the query stops, so no late progress event schedules a snapshot job, or calls into Python,
while the SparkContext stops after it. In the order ``query.stop(); ps.close()`` (issue 30) a progress event that
reaches the listener after ``query.stop()`` asks for no snapshot job either. A real local Spark in a child process
(its JVM's log on stderr)."""

from __future__ import annotations

import os
import subprocess
import sys

SUPPORT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "support")


def run_child(tmp_path, **env_extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]), **env_extra)
    proc = subprocess.run([sys.executable, os.path.join(SUPPORT, "partitioned_shutdown_child.py"), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=540, start_new_session=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CLOSED 4" in proc.stdout and "STOPPED" in proc.stdout, (proc.stdout, proc.stderr[-3000:])
    assert "EXACT True" in proc.stdout, proc.stdout
    return proc


def test_a_clean_shutdown_of_a_partitioned_query_logs_no_error(tmp_path):
    proc = run_child(tmp_path)
    assert "LATE 0" in proc.stdout, proc.stdout  # no snapshot job after query.stop()
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line or "Py4JException" in line
              or "Exception in thread" in line]
    assert not errors, "\n".join(errors[:20])
    # No snapshot job may start (or fail on the stopped SparkContext) after close().
    assert "snapshot job of" not in proc.stderr, proc.stderr[-3000:]
    assert "stopped SparkContext" not in proc.stderr, proc.stderr[-3000:]


def test_without_the_placement_helper_the_query_runs_where_spark_puts_it_and_ends_exact(tmp_path):
    """Issue 30: the JVM helper cannot load at run time (here a damaged jar named by ``BLOBSTATE_SPARK_HELPER_JAR``):
    the partitioned query runs without placement, says why once, ships nothing to the executors, ends exact and
    closes without an ERROR line."""
    broken = tmp_path / "broken.jar"
    broken.write_bytes(b"not a jar")
    proc = run_child(tmp_path / "run", BLOBSTATE_SPARK_HELPER_JAR=str(broken))
    assert "PLACED 0" in proc.stdout, proc.stdout
    warned = [line for line in proc.stderr.splitlines() if "run without placement" in line]
    assert len(warned) == 1 and "is not visible after adding" in warned[0], proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line or "Exception in thread" in line]
    assert not errors, "\n".join(errors[:20])
