"""Issue 27 case 12 for ``blobstate spark rescale``: a rescale killed while its tasks hold scratch RocksDB copies
leaves none of them behind once the next run completed (``blobstate.spark.executor.leftovers``).

- with real processes and no Spark: a process SIGKILLed inside a held scratch directory of one kind (a driver
  store's write) leaves it; the next scratch directory of *another* kind taken in the same place (a read task's)
  sweeps it, and leaves alone the one a live process holds;
- with a real local Spark: ``blobstate spark rescale`` into 2 partitions (its own driver: Python, JVM, Python
  workers) is SIGKILLed while the write task of new partition 1 stages its snapshot from its scratch RocksDB copy
  in ``--local-dir``; the operator reruns it into 1 partition (the killed run never appended: the destination is
  empty), which runs no task of partition 1; nothing of the killed run is left in ``--local-dir`` and the copy is
  exact.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

from blobstate.spark.executor.leftovers import DANGLING_AFTER_S, HELD, scratch_dir

_HOLD = textwrap.dedent("""
    import os, signal, sys
    from blobstate.spark.executor.leftovers import scratch_dir
    with scratch_dir(sys.argv[1], sys.argv[2]) as path:
        with open(os.path.join(path, "CURRENT"), "w") as fh:
            fh.write("MANIFEST-000001")
        print(path, flush=True)
        if sys.argv[3] == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        sys.stdin.read()  # held until the test closes stdin
""")


def _holder(parent, prefix: str, what: str) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([sys.executable, "-c", _HOLD, str(parent), prefix, what], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    return child, child.stdout.readline().strip()


def test_a_scratch_directory_left_by_a_killed_process_is_swept_by_the_next_one_of_any_kind(tmp_path):
    live, live_path = _holder(tmp_path, "blobstate-rescale-write-p1-", "hold")
    dead, dead_path = _holder(tmp_path, "blobstate-write-driver-", "die")
    assert dead.wait(timeout=60) == -signal.SIGKILL
    dangling = tmp_path / f"blobstate-rescale-read-p3-gone{HELD}"  # its creator died before its directory existed
    dangling.write_text("")
    old = time.time() - DANGLING_AFTER_S - 5
    os.utime(dangling, (old, old))
    try:
        assert os.path.isdir(dead_path) and os.path.exists(dead_path + HELD)
        with scratch_dir(str(tmp_path), "blobstate-read-p0-") as mine:
            assert not os.path.exists(dead_path) and not os.path.exists(dead_path + HELD)
            assert not dangling.exists()
            assert os.path.isfile(os.path.join(live_path, "CURRENT"))  # a live process holds it: never swept
        assert not os.path.exists(mine)
    finally:
        live.communicate("", timeout=60)
    assert sorted(os.listdir(tmp_path)) == []  # the live one removed its own at its end


def test_a_rescale_killed_while_a_task_holds_its_scratch_copy_leaves_nothing_after_the_rerun(
        spark_session, flights_days, tmp_path):
    from click.testing import CliRunner
    from spark_fixtures import child_env, merged, restored_partitions, run_in_group

    from blobstate.cli import main
    from blobstate.model.records import StoreKey
    from blobstate.spark import partitioned
    from blobstate.spark.demo.flights import ROUTE_COLS, flights_schema, reference_routes, update_routes

    directory, frame = flights_days
    repo, scratch = f"file://{tmp_path}/repo", tmp_path / "scratch"
    ps = partitioned(spark_session, repo=repo, checkpoint_location=str(tmp_path / "ck"), job="flights",
                     store="routes", num_partitions=2, key_cols=ROUTE_COLS, local_dir=str(tmp_path / "local"),
                     work_dir=str(tmp_path / "work"))
    try:
        day = spark_session.read.schema(flights_schema()).option("header", True).csv(
            os.path.join(directory, sorted(os.listdir(directory))[0]))
        ps.run_batch(day, 0, update_routes)
    finally:
        ps.close()
    old = merged(restored_partitions(tmp_path / "old", repo, key=StoreKey("flights", "group", "routes"),
                                     partitions=2)[0])
    assert old == reference_routes(frame[frame["day"] == frame["day"].min()])

    def args(m: int) -> list[str]:
        return ["spark", "rescale", "--repo", repo, "--job", "flights", "--store", "routes", "--to-store",
                "routes-new", "--partitions", str(m), "--key-schema", "origin string, dest string", "--key-of",
                "blobstate.spark.demo.flights:route_of", "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                "--conf", "spark.sql.shuffle.partitions=2", "--local-dir", str(scratch), "--work-dir",
                str(tmp_path / "work-rescale"), "--json"]

    env = child_env(BLOBSTATE_PLUGINS="snapshot_task_killer", BLOBSTATE_TEST_KILL_TASK_PARTITION="1")
    code, _, err = run_in_group([sys.executable, "-m", "blobstate.cli", *args(2)], env)
    assert code == -signal.SIGKILL, err
    left = sorted(n for n in os.listdir(scratch) if n.startswith("blobstate-rescale-write-p1-")
                  and not n.endswith(HELD))
    assert left and os.path.isfile(scratch / left[0] / "checkpoint" / "CURRENT"), os.listdir(scratch)

    again = CliRunner().invoke(main, args(1))  # the rerun, on this process's Spark session: no task of partition 1
    assert again.exit_code == 0, again.output
    report = json.loads(again.stdout)
    assert (report["batchId"], report["keys"], report["toPartitions"]) == (0, len(old), 1)
    assert sorted(os.listdir(scratch)) == []  # no scratch copy (nor lock file) of either run is left
    new = StoreKey("flights", "group", "routes-new")
    assert merged(restored_partitions(tmp_path / "new", repo, key=new, partitions=1)[0]) == old
