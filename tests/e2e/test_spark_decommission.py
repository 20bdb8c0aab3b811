"""Hearing a graceful decommission on a real Spark standalone cluster of three "hosts" (issue 42): a master and three
workers in their own namespaces (``tests/support/spark_cluster.py``, ``decommission=True``: Spark's
``spark.decommission.enabled`` in the workers' and the driver's conf), a driver process
(``tests/support/decommission_child.py``) running ``blobstate.spark.placement.decommission``'s watcher.

One worker is drained with Spark's decommission signal (SIGPWR to its Worker JVM and its executor's) while its
executor runs a task: ``leaving(sc)`` names that executor while it is still alive (its task holds it), the watcher
calls back once for it, and Spark starts no new task there even when every task of a job prefers it (it did before
the signal). Once the task is released the executor exits, and ``leaving`` no longer names it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("pyspark")

from spark_cluster import SparkCluster, skip_without_cluster_or_helper  # noqa: E402
from spark_fixtures import SUPPORT  # noqa: E402

WAIT_S = 120.0
PROBE_TASKS = 8


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    skip_without_cluster_or_helper()  # leaving(sc) asks the helper
    base = tmp_path_factory.mktemp("decommission")
    # two cores per executor: a decommissioned executor busy with one task still has a free core to be refused
    with SparkCluster(str(base / "spark"), str(base / "local"), workers=3, cores=2, memory="1g",
                      tmpfs_size="256m", decommission=True) as running:
        yield running


class Driver:
    """The child driver: commands on its stdin, its lines read by a thread into a queue."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.heard: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("EOF")

    def send(self, command: str) -> None:
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def expect(self, prefix: str, timeout_s: float = WAIT_S) -> str:
        """The rest of the next line starting with ``prefix`` (``HEARD`` lines on the way are collected)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {prefix} line from the driver within {timeout_s} s") from None
            if line == "EOF":
                raise RuntimeError(f"the driver exited before a {prefix} line")
            if line.startswith("HEARD "):
                self.heard.append(line.split()[1])
            if line.startswith(prefix + " ") or line == prefix:
                return line[len(prefix):].strip()

    def ask(self, command: str, answer: str) -> str:
        self.send(command)
        return self.expect(answer)


def _wait_for(condition, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(0.05)  # polling interval: the condition decides


def _start_driver(cluster, tmp_path) -> Driver:
    cfg = {"conf": cluster.driver_conf(executor_memory="512m"), "executors": len(cluster.workers),
           "release": str(tmp_path / "release")}
    config = tmp_path / "driver.json"
    config.write_text(json.dumps(cfg))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SUPPORT, os.environ.get("PYTHONPATH", "")]),
               SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    with open(tmp_path / "driver.err", "wb") as err:
        proc = subprocess.Popen([sys.executable, os.path.join(SUPPORT, "decommission_child.py"), str(config)],
                                env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True)
    return Driver(proc)


def test_a_decommissioned_executor_is_heard_before_it_goes_and_gets_no_new_task(cluster, tmp_path):
    driver = _start_driver(cluster, tmp_path)
    try:
        executors = driver.expect("READY").split(",")
        assert len(executors) == 3
        victim = executors[0]
        worker = cluster.worker_of(victim)
        assert driver.ask("LEAVING", "LEAVING") == ""

        # before the signal, tasks preferring the victim run there (placement works on this cluster)
        hosts = driver.ask(f"PROBE {victim} {PROBE_TASKS}", "PROBED").split(",")
        assert worker.name in hosts, hosts

        driver.send(f"BLOCK {victim}")  # one task holds the victim: it cannot exit while it runs
        started = tmp_path / "release.started"
        _wait_for(started.exists, "the blocking task to start")
        assert started.read_text() == worker.name
        pids = worker.executor_pids()
        assert len(pids) == 1

        cluster.decommission_worker(worker)
        assert driver.expect("HEARD") == victim  # the watcher's callback
        assert driver.ask("LEAVING", "LEAVING") == victim  # leaving(sc) names it ...
        assert worker.executor_pids() == pids  # ... while its JVM is alive (its task still runs)

        # Spark starts no new task on it, though every task prefers it and it has a free core
        hosts = driver.ask(f"PROBE {victim} {PROBE_TASKS}", "PROBED").split(",")
        assert len(hosts) == PROBE_TASKS and worker.name not in hosts, hosts

        (tmp_path / "release").write_text("go")
        driver.expect("RELEASED")
        _wait_for(lambda: not worker.executor_pids(), "the decommissioned executor to exit")
        _wait_for(lambda: driver.ask("LEAVING", "LEAVING") == "", "the gone executor to leave leaving(sc)")
        driver.send("STOP")
        driver.expect("DONE")
        assert driver.proc.wait(timeout=WAIT_S) == 0, (tmp_path / "driver.err").read_text()[-4000:]
        assert driver.heard == [victim]  # called back once, through polls before and after it went
    finally:
        if driver.proc.poll() is None:
            os.killpg(driver.proc.pid, signal.SIGKILL)
            driver.proc.wait()
