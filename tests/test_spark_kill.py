"""A real SIGKILL between a micro-batch's local checkpoint and its upload, and ``blobstate demo`` end to end.

The child process runs the flights query with blobstate; the lead's ``kill_plugin`` (a third-party-style observer
plugin loaded through ``BLOBSTATE_PLUGINS``) SIGKILLs it when the upload of batch 3 begins (the 4th
``UploadsPlanned`` event): Spark has committed batch 3, its local checkpoint exists on disk, no byte of it is
uploaded. The restart on the same host (journal and local checkpoint still there) must recover and realign.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import restored_state  # noqa: E402

from blobstate import api  # noqa: E402
from blobstate.model import StoreKey  # noqa: E402
from blobstate.spark import committed_batches, last_committed_batch, register  # noqa: E402
from blobstate.spark.flights import flights_schema, reference_state, update_state  # noqa: E402

KEY = StoreKey("flights", "0", "stats")

SUPPORT = os.path.join(os.path.dirname(__file__), "support")

CHILD = textwrap.dedent("""
    import os, sys
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    from blobstate.model import StoreKey
    from blobstate.spark import register
    from blobstate.spark.flights import flights_schema, update_state
    directory, repo, ck, state, work = sys.argv[1:6]
    spark = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2")
             .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1").getOrCreate())
    binding = register(spark, repo=repo, checkpoint_location=ck, state_dir=state, work_dir=work,
                       key=StoreKey("flights", "0", "stats"))
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(directory))
    query = binding.start(stream.writeStream, update_state)
    query.processAllAvailable()
    binding.close()
    print("not killed")
""")


def test_sigkill_between_local_checkpoint_and_upload(spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = _paths(tmp_path)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, BLOBSTATE_PLUGINS="kill_plugin", BLOBSTATE_TEST_KILL_AT="UploadsPlanned:4",
               PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]), SPARK_LOCAL_IP="127.0.0.1")
    child = subprocess.Popen([sys.executable, str(script), directory, paths["repo"], paths["checkpoint_location"],
                              paths["state_dir"], paths["work_dir"]], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = child.communicate(timeout=180)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # the child's own process group: its Spark JVM, if left
        except ProcessLookupError:
            pass
    assert child.returncode == -signal.SIGKILL, out
    assert committed_batches(paths["checkpoint_location"])[-1] == 3
    assert [cp.batch_id for cp in api.list_checkpoints(repo=paths["repo"], key=KEY)][-1] == 2
    local = os.listdir(os.path.join(paths["work_dir"], "checkpoints"))
    assert local, "the killed commit's local checkpoint should still be on disk"

    second = _run_to_end(spark_session, paths, directory)
    assert (second.plan.last_committed, second.plan.restored_batch, second.plan.rewind) == (3, 2, 3)
    batches = second.committed_batches()
    assert batches[0] == 3 and batches == list(range(3, batches[-1] + 1))
    assert _restored_state(tmp_path, paths) == reference_state(frame)


def test_demo_command_passes_its_check(spark_session, tmp_path):
    from click.testing import CliRunner

    from blobstate.cli.main_demo import demo

    result = CliRunner().invoke(demo, ["--days", "6", "--work-dir", str(tmp_path / "demo"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout[result.stdout.index("{"):])
    assert report["check"] == "passed"
    assert report["batches"] == 6 and report["killAt"] == 3
    assert report["committedBatches"]["first"] == 0 and report["committedBatches"]["contiguous"]
    # After the rewind Spark may plan the remaining files into fewer batches; the data is the same.
    assert report["commitsRun1"] == 3 and report["commitsRun2"] >= 2
    assert report["restart"] == {**report["restart"], "lastCommittedBySpark": 3, "restoredBatch": 2,
                                 "rewoundBatch": 3}
    assert report["bytesUploadedPerCommit"]["max"] > 0



def _paths(tmp_path):
    return {"repo": f"file://{tmp_path}/repo", "checkpoint_location": str(tmp_path / "spark-ck"),
            "state_dir": str(tmp_path / "state"), "work_dir": str(tmp_path / "work")}


def _run_to_end(spark, paths, directory):
    binding = register(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint_location"],
                       state_dir=paths["state_dir"], work_dir=paths["work_dir"], key=KEY, max_wait_s=60)
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(directory))
    binding.start(stream.writeStream, update_state).processAllAvailable()
    binding.wait_committed(last_committed_batch(paths["checkpoint_location"]), 120)
    binding.close()
    return binding


def _restored_state(tmp_path, paths):
    return restored_state(tmp_path, paths["repo"], KEY)
