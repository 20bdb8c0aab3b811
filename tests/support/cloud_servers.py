"""Real cloud emulators for tests: moto server (S3), azurite (Azure Blob) and gcp-storage-emulator (GCS).

Each server is started once per session on 127.0.0.1 on a free port, polled until it answers (no sleeps), and
stopped by its PID at the end. Per-test fixtures (``s3_target``, ``azure_target``, ``gcs_target``) create a fresh
bucket/container and yield a ``CloudTarget``: the repository URL, the storage options to open it with, and the
environment a ``blobstate`` subprocess needs to reach the same server.

A missing emulator fails the test with the install command (``.ci/install-cloud.sh``), it does not skip.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# gcsfs probes for hierarchical-namespace buckets over gRPC unless told not to (60 s per bucket on the emulator).
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

AZURITE_ACCOUNT = "devstoreaccount1"
# The well-known development key every azurite installation uses (public, documented by Microsoft).
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
AZURITE_PREFIX = os.path.expanduser(os.environ.get("BLOBSTATE_AZURITE_PREFIX", "~/.cache/blobstate/azurite"))
INSTALL = "run .ci/install-cloud.sh"
START_TIMEOUT_S = 60.0


@dataclass
class CloudTarget:
    """A fresh bucket/container on an emulator: ``url`` (repository root), ``storage_options`` for the Python
    API, ``env`` for subprocesses (``BLOBSTATE_STORAGE_OPTIONS`` and the SDK's variables), and ``name``."""

    name: str
    url: str
    storage_options: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    bucket: str = ""


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: str
    workdir: str

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, n: int = 3000) -> str:
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(condition: Callable[[], bool], *, timeout_s: float, what: str,
               alive: Callable[[], bool] = lambda: True, interval_s: float = 0.05) -> None:
    """Poll ``condition`` until it is true; fail after ``timeout_s`` or as soon as ``alive()`` turns false."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        if not alive():
            raise RuntimeError(f"{what}: the process exited")
        time.sleep(interval_s)  # polling interval, not synchronisation: the condition decides
    raise TimeoutError(f"{what}: not ready after {timeout_s} s")


def http_answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP status means the server is up
    except OSError:
        return False


def start_server(name: str, cmd: list[str], port: int, *, env: dict[str, str] | None = None,
                 probe: str = "/") -> Server:
    workdir = tempfile.mkdtemp(prefix=f"blobstate-{name}-")
    log_path = os.path.join(workdir, "server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                env={**os.environ, **(env or {})}, start_new_session=True)
    server = Server(name, proc, port, log_path, workdir)
    try:
        wait_until(lambda: http_answers(server.endpoint + probe), timeout_s=START_TIMEOUT_S, what=name,
                   alive=lambda: proc.poll() is None)
    except Exception as exc:
        stop_server(server)
        pytest.fail(f"{name} did not start ({exc}); log:\n{server.log_tail()}")
    return server


def stop_server(server: Server) -> None:
    """Stop the server's process group by its PID: SIGTERM, then SIGKILL after 10 s."""
    proc = server.proc
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
    shutil.rmtree(server.workdir, ignore_errors=True)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# -- S3: moto server ---------------------------------------------------------------------------------------------
def _moto_cmd(port: int) -> list[str]:
    exe = shutil.which("moto_server")
    if exe is None:
        pytest.fail(f"moto_server is not installed ({INSTALL})")
    return [exe, "-H", "127.0.0.1", "-p", str(port)]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[Server]:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    port = free_port()
    server = start_server("moto", _moto_cmd(port), port, env={"AWS_DEFAULT_REGION": "us-east-1"},
                          probe="/moto-api/")
    yield server
    stop_server(server)


def s3_options(endpoint: str) -> dict[str, Any]:
    return {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}


@pytest.fixture
def s3_target(moto_server: Server) -> Iterator[CloudTarget]:
    import boto3

    bucket = unique("bs")
    client = boto3.client("s3", endpoint_url=moto_server.endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket=bucket)
    options = s3_options(moto_server.endpoint)
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(options), "AWS_DEFAULT_REGION": "us-east-1"}
    yield CloudTarget("s3", f"s3://{bucket}/repo", options, env, bucket)


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.slow)])
def repo_target(request, tmp_path):  # noqa: ANN001, ANN201
    """A repository to run a case against: file:// or a fresh prefix of a moto S3 bucket (``fault_harness.Target``)."""
    from fault_harness import Target

    if request.param == "file":
        return Target(f"file://{tmp_path}/repo")
    s3 = request.getfixturevalue("s3_target")
    # In-process checks open a fresh s3fs instance each time: fsspec's shared instance would answer from a
    # listing cached before the subprocesses wrote.
    return Target(f"{s3.url}-{uuid.uuid4().hex[:8]}", {**s3.storage_options, "skip_instance_cache": True}, s3.env)


# -- Azure: azurite -------------------------------------------------------------------------------------------------
def _azurite_cmd(port: int, location: str) -> list[str]:
    exe = shutil.which("azurite-blob") or os.path.join(AZURITE_PREFIX, "node_modules", ".bin", "azurite-blob")
    if not os.path.exists(exe):
        pytest.fail(f"azurite-blob is not installed ({INSTALL})")
    return [exe, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--location", location,
            "--disableTelemetry", "--skipApiVersionCheck", "--silent"]


def azurite_connection_string(endpoint: str) -> str:
    return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};")


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[Server]:
    port = free_port()
    location = tempfile.mkdtemp(prefix="blobstate-azurite-data-")
    server = start_server("azurite", _azurite_cmd(port, location), port, probe=f"/{AZURITE_ACCOUNT}?comp=list")
    yield server
    stop_server(server)
    shutil.rmtree(location, ignore_errors=True)


@pytest.fixture
def azure_target(azurite_server: Server) -> Iterator[CloudTarget]:
    from azure.storage.blob import BlobServiceClient

    container = unique("bs")
    conn = azurite_connection_string(azurite_server.endpoint)
    with BlobServiceClient.from_connection_string(conn) as client:
        client.create_container(container)
    options = {"connection_string": conn}
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(options)}
    yield CloudTarget("azure", f"az://{container}/repo", options, env, container)


# -- GCS: gcp-storage-emulator ----------------------------------------------------------------------------------
def _gcs_cmd(port: int) -> list[str]:
    exe = shutil.which("gcp-storage-emulator")
    if exe is None:
        pytest.fail(f"gcp-storage-emulator is not installed ({INSTALL})")
    return [exe, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory"]


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[Server]:
    port = free_port()
    server = start_server("gcs-emulator", _gcs_cmd(port), port, probe="/storage/v1/b?project=test")
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = server.endpoint
    yield server
    if previous is None:
        os.environ.pop("STORAGE_EMULATOR_HOST", None)
    else:
        os.environ["STORAGE_EMULATOR_HOST"] = previous
    stop_server(server)


@pytest.fixture
def gcs_target(gcs_server: Server) -> Iterator[CloudTarget]:
    bucket = unique("bs")
    req = urllib.request.Request(f"{gcs_server.endpoint}/storage/v1/b?project=test", method="POST",
                                 data=json.dumps({"name": bucket}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, resp.read()
    options = {"project": "test", "token": "anon", "endpoint_url": gcs_server.endpoint}
    # BLOBSTATE_MAX_CONCURRENCY=1: gcp-storage-emulator mixes up the bodies of overlapping uploads (reproduced with
    # plain gcsfs: about 1 object in 300 holds another's bytes); real GCS does not.
    env = {"BLOBSTATE_STORAGE_OPTIONS": json.dumps(options), "STORAGE_EMULATOR_HOST": gcs_server.endpoint,
           "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false", "BLOBSTATE_MAX_CONCURRENCY": "1"}
    yield CloudTarget("gcs", f"gs://{bucket}/repo", options, env, bucket)


@pytest.fixture(params=["s3", "azure", "gcs"])
def cloud_target(request: pytest.FixtureRequest) -> CloudTarget:
    """Each cloud emulator in turn (parametrized)."""
    return request.getfixturevalue(f"{request.param}_target")


@pytest.fixture(params=["file", "s3", "azure"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> CloudTarget:
    """A fresh repository location on file://, moto S3 and azurite in turn (parametrized)."""
    if request.param == "file":
        return CloudTarget("file", f"file://{tmp_path}/repo", {})
    return request.getfixturevalue(f"{request.param}_target")


# -- a blobstate plugin for racing writers (loaded in subprocesses with BLOBSTATE_PLUGINS=cloud_servers) -------------
RACE_DIR_ENV = "BLOBSTATE_TEST_RACE_DIR"
RACE_WRITERS_ENV = "BLOBSTATE_TEST_RACE_WRITERS"


def _race_barrier() -> None:
    """Each writer marks its arrival, then waits (polling, 60 s deadline) until every writer has arrived."""
    directory = os.environ[RACE_DIR_ENV]
    writers = int(os.environ.get(RACE_WRITERS_ENV, "2"))
    Path(directory, f"arrived-{os.getpid()}").touch()
    wait_until(lambda: len(list(Path(directory).glob("arrived-*"))) >= writers, timeout_s=60,
               what="the other racing writers")


try:
    from blobstate import hookimpl as _hookimpl

    @_hookimpl
    def blobstate_journal_event(event: Any, store_key: Any) -> None:
        """With ``BLOBSTATE_TEST_RACE_DIR`` set: hold every writer after its index upload (just before the commit
        point) until all writers got there, so that their checkpoint-log appends race. Inactive otherwise."""
        if os.environ.get(RACE_DIR_ENV) and event.type_name == "IndexUploaded":
            _race_barrier()
except ImportError:  # pragma: no cover - blobstate itself not importable: nothing to hook into
    pass
