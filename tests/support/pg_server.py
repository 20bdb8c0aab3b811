"""Session fixture: a real PostgreSQL (Debian's, 15) in a temp directory on a free loopback port.

PostgreSQL refuses to run as root: when the suite runs as root, ``initdb`` and ``pg_ctl`` run as the unprivileged
user ``blobstate-pg`` (created by ``.ci/install-logs.sh``; ``postgres`` as a fallback) through ``runuser``. The
server is stopped with ``pg_ctl stop -m immediate`` on its data directory (its own PID file), never by name.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_server import free_port, wait_for  # noqa: E402

PG_USERS = ("blobstate-pg", "postgres")
PASSWORD = "blobstate-test-pw"


def pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<v>/bin`` with ``initdb``, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _run_as() -> tuple[list[str], str | None]:
    """The command prefix to run PostgreSQL as a non-root user, and that user (None: the current user)."""
    if os.geteuid() != 0:
        return [], None
    for user in PG_USERS:
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        return ["runuser", "-u", user, "--"], user
    raise RuntimeError("running as root and no unprivileged PostgreSQL user exists: run .ci/install-logs.sh")


@dataclass
class PgServer:
    """A running PostgreSQL; ``url(db)`` is a ``postgresql://`` URL with user ``blobstate`` and ``PASSWORD``."""

    bin_dir: Path
    base: Path
    port: int = 0
    prefix: tuple[str, ...] = ()

    def url(self, database: str = "blobstate") -> str:
        return f"postgresql://blobstate:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        out = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120)
        if check and out.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {out.stdout}\n{out.stderr}")
        return out

    def start(self) -> None:
        prefix, user = _run_as()
        self.prefix = tuple(prefix)
        data = self.base / "data"
        pwfile = self.base / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if user is not None:
            info = pwd.getpwnam(user)
            os.chown(self.base, info.pw_uid, info.pw_gid)
            os.chown(pwfile, info.pw_uid, info.pw_gid)
        self._run(str(self.bin_dir / "initdb"), "-D", str(data), "-U", "blobstate", "--pwfile", str(pwfile),
                  "-A", "scram-sha-256", "-E", "UTF8", "--no-sync")
        self.port = free_port()
        opts = (f"-k {self.base} -p {self.port} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=50 -c shared_buffers=16MB")
        self._run(str(self.bin_dir / "pg_ctl"), "-D", str(data), "-l", str(self.base / "pg.log"), "-o", opts,
                  "-w", "-t", "60", "start")
        wait_for(self._ready, "PostgreSQL", 60, log_file=self.base / "pg.log")
        self._createdb("blobstate")

    def _ready(self) -> bool:
        out = self._run(str(self.bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), check=False)
        return out.returncode == 0

    def _createdb(self, name: str) -> None:
        env = {**os.environ, "PGPASSWORD": PASSWORD}
        out = subprocess.run([str(self.bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
                              "-U", "blobstate", name], capture_output=True, text=True, timeout=60, env=env)
        if out.returncode != 0:
            raise RuntimeError(f"createdb {name} failed: {out.stderr}")

    def create_database(self, name: str) -> str:
        """Create database ``name``; return its URL."""
        self._createdb(name)
        return self.url(name)

    def stop(self) -> None:
        data = self.base / "data"
        if (data / "postmaster.pid").exists():
            self._run(str(self.bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop", check=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """PostgreSQL on 127.0.0.1 for the whole session; skipped (failed under CI) when it is not installed."""
    bin_dir = pg_bin()
    if bin_dir is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed: run .ci/install-logs.sh")
        pytest.skip("PostgreSQL is not installed: run .ci/install-logs.sh")
    base = Path(tempfile.mkdtemp(prefix="blobstate-pg-"))
    server = PgServer(bin_dir=bin_dir, base=base)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
