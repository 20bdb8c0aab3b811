"""A Spark standalone cluster of several "hosts" on this machine, for the tests and the benchmarks.

A master (``org.apache.spark.deploy.master.Master`` from the installed pyspark, on 127.0.0.1 and a free port, its
REST server off) and ``workers`` workers, each in its own UTS and mount namespace (``unshare -m -u``): its own
hostname (``worker0``, ...), its own tmpfs mounted at the same ``local_dir`` path (its own disk: what one host
writes there the others never see; the tmpfs goes away with the namespace) and its own loopback address
(127.0.0.2, .3, ...: with one address Spark takes two workers for one host and reads the other's shuffle files from
its own disk). Executors run as children of their worker's JVM, so in its namespaces, and keep Spark's own files
(``SPARK_LOCAL_DIRS``: shuffle files, Spark's state store) on that tmpfs too. Everything is started and
stopped by PID: ``kill_worker`` SIGKILLs a worker's JVM and its executors' JVMs (a lost host),
``decommission_worker`` sends them Spark's decommission signal (a host drained: ``decommission=True`` turns
``spark.decommission.enabled`` on in the workers' and the driver's conf), ``stop`` all of them and the master.
Needs root (mount namespaces and tmpfs mounts): ``unavailable()`` says why not, for a skip.

Used by ``tests/e2e/test_spark_cluster.py`` (through ``cluster_driver.py``) and ``bench/spark_state.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from cloud_servers import free_port, wait_until  # noqa: E402

START_TIMEOUT_S = 180.0


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def unavailable() -> str | None:
    """Why a namespace cluster cannot run here (None: it can): not root, no ``unshare``, no tmpfs mount, no
    pyspark."""
    try:
        _spark_home()
    except ImportError:
        return "pyspark is not installed"
    if os.geteuid() != 0:
        return "the multi-host Spark cluster needs root (mount namespaces and tmpfs mounts)"
    probe = subprocess.run(["unshare", "-m", "-u", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt && hostname x"],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return f"unshare -m -u with a tmpfs mount fails here: {probe.stderr.strip()[:200]}"
    return None


def skip_without_cluster_or_helper() -> None:
    """Skip the calling test when the namespace cluster cannot run here (``unavailable``) or blobstate's JVM helper
    cannot be built (no JDK): a failure under ``CI`` for the helper, which ``.ci/install-spark.sh`` builds."""
    import pytest

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    from blobstate.spark.placement import helper_jar

    try:
        helper_jar.ensure_jar(pytest.importorskip("pyspark").__version__)
    except helper_jar.HelperUnavailable as exc:
        message = f"blobstate's JVM helper is unavailable ({exc}): .ci/install-spark.sh builds it"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@dataclass
class Worker:
    """One worker "host": its name, loopback address, the PID of its JVM, its log."""

    name: str
    address: str
    pid: int
    log_path: str
    process: subprocess.Popen = field(repr=False)

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs this worker runs (its children running ``CoarseGrainedExecutorBackend``)."""
        out = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", encoding="utf-8") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                if ppid != self.pid:
                    continue
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if b"CoarseGrainedExecutorBackend" in fh.read():
                        out.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
        return out

    def alive(self) -> bool:
        return self.process.poll() is None


class SparkCluster:
    """A master and ``workers`` namespaced workers of ``cores`` cores and ``memory`` each (see the module
    docstring); ``local_dir``: the path every worker mounts its own tmpfs of ``tmpfs_size`` at (it must exist).
    A context manager: started on enter, stopped on exit."""

    def __init__(self, base: str, local_dir: str, *, workers: int = 2, cores: int = 1, memory: str = "2g",
                 tmpfs_size: str = "2g", decommission: bool = False) -> None:
        self.base, self.local_dir, self.decommission = base, local_dir, decommission
        self.count, self.cores, self.memory, self.tmpfs_size = workers, cores, memory, tmpfs_size
        self.port = free_port()
        self.master: subprocess.Popen | None = None
        self.workers: list[Worker] = []

    @property
    def spark_dir(self) -> str:
        """Where each worker's executors keep Spark's own files (shuffle, Spark's state store): on its tmpfs."""
        return os.path.join(self.local_dir, "spark")

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def driver_conf(self, *, executor_memory: str = "1g") -> dict[str, str]:
        """The Spark conf of a driver on this machine using the whole cluster, one executor per worker."""
        conf = {"spark.master": self.url, "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * self.count), "spark.executor.memory": executor_memory,
                "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
        if self.decommission:  # the executors read it from the driver's conf: their SIGPWR handler, decommissionSelf
            conf["spark.decommission.enabled"] = "true"
        return conf

    def __enter__(self) -> SparkCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        os.makedirs(self.base, exist_ok=True)
        os.makedirs(self.local_dir, exist_ok=True)
        home = _spark_home()
        props = os.path.join(self.base, "master.properties")
        with open(props, "w", encoding="utf-8") as fh:
            fh.write("spark.master.rest.enabled false\nspark.ui.enabled false\n")
        env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=self.base,
                   SPARK_NO_DAEMONIZE="1")
        master_log = os.path.join(self.base, "master.log")
        with open(master_log, "wb") as out:
            self.master = subprocess.Popen(
                [os.path.join(home, "bin", "spark-class"), "org.apache.spark.deploy.master.Master", "--host",
                 "127.0.0.1", "--port", str(self.port), "--webui-port", "0", "--properties-file", props],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: "I have been elected leader" in _read(master_log), timeout_s=START_TIMEOUT_S,
                   what="the Spark master", alive=lambda: self.master.poll() is None)
        for i in range(self.count):
            self.workers.append(self._start_worker(i, home))
        wait_until(lambda: _read(master_log).count("Registering worker") >= self.count, timeout_s=START_TIMEOUT_S,
                   what="the Spark workers", alive=lambda: all(w.alive() for w in self.workers))

    def _start_worker(self, i: int, home: str) -> Worker:
        name, address = f"worker{i}", f"127.0.0.{i + 2}"
        work = os.path.join(self.base, name)
        os.makedirs(work, exist_ok=True)
        script = (f"hostname {name} && mount -t tmpfs -o size={self.tmpfs_size} tmpfs {self.local_dir} && "
                  f"exec {home}/bin/spark-class org.apache.spark.deploy.worker.Worker {self.url} "
                  f"--cores {self.cores} --memory {self.memory} --host {address} --webui-port 0 --work-dir {work}")
        env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP=address, SPARK_NO_DAEMONIZE="1",
                   SPARK_LOCAL_DIRS=self.spark_dir)
        if self.decommission:  # the Worker's own SIGPWR handler (Worker.decommissionSelf) reads its conf
            env["SPARK_WORKER_OPTS"] = (env.get("SPARK_WORKER_OPTS", "") + " -Dspark.decommission.enabled=true").strip()
        log_path = os.path.join(self.base, f"{name}.log")
        with open(log_path, "wb") as out:
            proc = subprocess.Popen(["unshare", "-m", "-u", "--propagation", "private", "bash", "-c", script],
                                    env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return Worker(name, address, proc.pid, log_path, proc)  # unshare and bash exec into the JVM: one PID

    def worker_of(self, executor: str) -> Worker:
        """The worker whose address an executor location (``executor_<host>_<id>``) names."""
        host = executor.split("_")[1]
        return next(w for w in self.workers if w.address == host)

    def kill_worker(self, worker: Worker) -> list[int]:
        """SIGKILL ``worker``'s JVM and its executors' JVMs (by PID) and wait until they are gone; returns the
        executor PIDs killed."""
        executors = worker.executor_pids()
        for pid in [worker.pid, *executors]:
            _kill(pid)
        worker.process.wait(timeout=60)
        wait_until(lambda: not any(_exists(p) for p in executors), timeout_s=60, what="the executors to die")
        return executors

    def decommission_worker(self, worker: Worker) -> list[int]:
        """Drain ``worker`` the way an operator or a cloud does: Spark's decommission signal (SIGPWR, the default of
        ``spark.worker.decommission.signal`` and ``spark.executor.decommission.signal``) to its Worker JVM (it tells
        the master, which tells the driver: no new executor or task there) and to its executors' JVMs (each tells
        the driver, then exits once its running tasks finished). Needs ``decommission=True`` (without it SIGPWR's
        default action kills the JVMs: raises ``RuntimeError`` instead). Returns the executor PIDs signalled; does
        not wait (the executors leave in their own time: wait on ``Worker.executor_pids``)."""
        if not self.decommission:
            raise RuntimeError("SparkCluster(decommission=True) is needed: the JVMs have no SIGPWR handler otherwise")
        executors = worker.executor_pids()
        for pid in [worker.pid, *executors]:
            try:
                os.kill(pid, signal.SIGPWR)
            except ProcessLookupError:
                pass
        return executors

    def stop(self) -> None:
        """SIGKILL every worker (with its executors) and the master, by PID; wait for them."""
        for worker in self.workers:
            if worker.alive():
                self.kill_worker(worker)
        if self.master is not None and self.master.poll() is None:
            _kill(self.master.pid)
            self.master.wait(timeout=60)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def wait_for_executors(sc: object, count: int, timeout_s: float = START_TIMEOUT_S) -> None:
    """Wait until ``count`` executors registered with the driver of SparkContext ``sc``."""
    wait_until(lambda: sc._jsc.sc().getExecutorIds().size() >= count, timeout_s=timeout_s,  # type: ignore[attr-defined]
               what=f"{count} executors")


@contextlib.contextmanager
def cluster_for_test(tmp_path_factory: Any, *, workers: int, tmpfs_size: str, decommission: bool = False) -> Iterator[
        SparkCluster]:
    """A started cluster of ``workers`` one-core workers for a test's fixture (skipped where it cannot run, see
    ``skip_without_cluster_or_helper``), stopped after."""
    skip_without_cluster_or_helper()  # placement is what these tests need: without the helper they fail unclearly
    base = tmp_path_factory.mktemp("cluster")
    with SparkCluster(str(base / "spark"), str(base / "local"), workers=workers, cores=1, memory="2g",
                      tmpfs_size=tmpfs_size, decommission=decommission) as running:
        yield running


def driver_session(cfg: dict[str, Any], app: str) -> Any:
    """A child driver's SparkSession on the cluster (``cfg["conf"]``: ``SparkCluster.driver_conf``), once its
    ``cfg["executors"]`` executors registered."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    for name, value in cfg["conf"].items():
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    wait_for_executors(spark.sparkContext, cfg["executors"])
    return spark
