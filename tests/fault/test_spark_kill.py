"""A real SIGKILL of the Spark driver process (Python and its JVM) at every point of a micro-batch, then a restart.

The child (``tests/support/spark_child.py``) runs the flights query, one day file per batch, from a file source
with ``cleanSource=archive`` (Spark moves a batch's files away once it committed the batch: a re-planned batch
would find them gone). It is killed inside the user function, inside the delta upload, between the delta's commit
point and ``foreachBatch``'s return, after Spark wrote ``commits/N``, in the middle of a listener-triggered
snapshot, and with snapshots held back for K batches. Every case restarts in this process, ends equal to the
reference computed by pandas, and Spark's ``offsets/`` and ``commits/`` are never touched by blobstate: the
listing after the kill is exactly what the restart's restore leaves, and every entry survives to the end.
"""

from __future__ import annotations

import os
import signal

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import (  # noqa: E402
    KEY,
    assert_untouched,  # noqa: E402
    kill_paths,
    kinds,
    restored_state,
    run_child,
    spark_listing,
)

from blobstate.spark import register  # noqa: E402
from blobstate.spark.demo.flights import flights_schema, reference_state, update_state  # noqa: E402


def restart_to_end(spark, paths, after_kill):
    """Restart in this process: the restore must leave Spark's listing exactly as the kill left it."""
    binding = register(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint"], state_dir=paths["state"],
                       work_dir=paths["work"], key=KEY)
    assert spark_listing(paths["checkpoint"]) == after_kill, "blobstate's restart touched Spark's checkpoint"
    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .option("cleanSource", "archive").option("sourceArchiveDir", paths["archive"]).csv(paths["input"]))
    binding.start(stream.writeStream, update_state).processAllAvailable()
    binding.close()
    assert_untouched(after_kill, spark_listing(paths["checkpoint"]))
    return binding


CASES = {
    # name: (child options, what the restart must see: (Spark's last commit, batch the restore ends at))
    "inside-fn": (dict(kill="fn:3"), (2, 2)),
    "inside-delta-upload": (dict(kill_at_event="UploadsPlanned:4:delta"), (2, 2)),
    "after-delta-commit-point": (dict(kill_at_event="CheckpointWritten:4:delta"), (2, 2)),
    "after-spark-commit": (dict(kill="after-commit:3"), (3, 3)),
    "mid-snapshot": (dict(kill_at_event="BlobUploaded:3:snapshot"), (None, None)),
}
# the suite's short version: a kill at the commit point and one mid-snapshot; `python -m bench.long_tests` runs all
SUITE_CASES = ("after-delta-commit-point", "mid-snapshot")


@pytest.mark.parametrize("case", [c if c in SUITE_CASES else pytest.param(c, marks=pytest.mark.long) for c in CASES])
def test_sigkill_of_the_driver_then_restart_equals_the_reference(case, spark_session, flights_days, tmp_path):
    directory, frame = flights_days
    paths = kill_paths(tmp_path, directory)
    options, (last_commit, restored) = CASES[case]
    code, out, err = run_child(tmp_path, paths, **options)
    assert code == -signal.SIGKILL, (code, out, err)
    after_kill = spark_listing(paths["checkpoint"])
    records = kinds(paths["repo"])
    if case == "after-delta-commit-point":
        assert ("delta", 3) in records  # committed, but Spark never got to commit batch 3
    if case == "inside-delta-upload":
        assert ("delta", 3) not in records

    second = restart_to_end(spark_session, paths, after_kill)
    plan = second.plan
    if last_commit is not None:
        assert (plan.last_committed, plan.restored_batch) == (last_commit, restored)
    assert plan.restored_batch == plan.last_committed  # the state after exactly Spark's last commit
    deltas = [b for kind, b in kinds(paths["repo"]) if kind == "delta"]
    assert deltas == sorted(deltas)  # in generation order, batch ids never go back (a re-run repeats one)
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)
    # Spark archives a batch's files when it commits its source, best effort (its docs: cleaning is not
    # guaranteed; a kill between commits/N and the source commit leaves N's file in place). What must hold: no
    # file lost, and none archived that the state does not hold (the state equals the reference above, so a
    # re-planned batch that found its files archived away would have failed there).
    days = sorted(os.listdir(directory))
    archived = sorted(os.path.basename(f) for _, _, files in os.walk(paths["archive"]) for f in files)
    assert sorted(os.listdir(paths["input"]) + archived) == days, "a day file was lost"
    assert archived, "Spark archived nothing: cleanSource=archive was not in effect"


def test_sigkill_with_k_snapshots_pending_restores_from_snapshot_and_deltas(spark_session, flights_days, tmp_path):
    """Snapshots held back from batch 1 on (a lagging listener), killed inside batch 6: the restart restores the
    snapshot of batch 0 and the 5 deltas after it, exactly."""
    directory, frame = flights_days
    paths = kill_paths(tmp_path, directory)
    code, out, err = run_child(tmp_path, paths, kill="pause-snapshots:1,fn:6")
    assert code == -signal.SIGKILL, (code, out, err)
    snapshots = [b for kind, b in kinds(paths["repo"]) if kind == "snapshot"]
    assert max(snapshots, default=-1) <= 1
    after_kill = spark_listing(paths["checkpoint"])
    second = restart_to_end(spark_session, paths, after_kill)
    plan = second.plan
    assert plan.last_committed == 5 and plan.restored_batch == 5
    assert plan.deltas == 5 - (plan.snapshot_batch if plan.snapshot_batch is not None else -1) >= 4
    assert restored_state(tmp_path, paths["repo"], KEY) == reference_state(frame)
