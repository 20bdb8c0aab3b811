"""Core fixtures: temporary repositories, RocksDB stores made with rocksdict, the CLI as a real subprocess."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

SUPPORT_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def cli_env(work_base: str | os.PathLike, **extra: str) -> dict[str, str]:
    """Environment for a `blobstate` subprocess: isolated work dir, test plugins importable, no autoload noise."""
    env = dict(os.environ)
    env["BLOBSTATE_WORK_DIR"] = str(work_base)
    env["PYTHONPATH"] = os.pathsep.join([SUPPORT_DIR, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def run_cli(*args: str, work_base: str | os.PathLike, env: dict[str, str] | None = None,
            timeout: float = 300) -> CliResult:
    """Run `python -m blobstate.cli ARGS` as a real subprocess."""
    proc = subprocess.run([sys.executable, "-m", "blobstate.cli", *map(str, args)], capture_output=True, text=True,
                          env={**cli_env(work_base), **(env or {})}, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def write_keys(path: str | os.PathLike, items: dict[bytes, bytes] | None = None, *, n: int = 0,
               value_size: int = 64, seed: int = 0, start: int = 0, flush: bool = True) -> dict[bytes, bytes]:
    """Write ``items`` (or ``n`` random keys from ``start``) into the RocksDB at ``path``; returns what was written."""
    from rocksdict import Rdict, WriteBatch

    rnd = random.Random(seed)
    if items is None:
        items = {f"key{i:08d}".encode(): rnd.randbytes(value_size) for i in range(start, start + n)}
    db = Rdict(str(path))
    try:
        batch = WriteBatch()
        for count, (k, v) in enumerate(items.items(), 1):
            batch.put(k, v)
            if count % 100_000 == 0:
                db.write(batch)
                batch = WriteBatch()
        db.write(batch)
        if flush:
            db.flush(True)
    finally:
        db.close()
    return items


def read_all(path: str | os.PathLike) -> dict[bytes, bytes]:
    from rocksdict import AccessType, Rdict

    db = Rdict(str(path), access_type=AccessType.read_only())
    try:
        return {k: v for k, v in db.items()}
    finally:
        db.close()


def tree_digest(root: str | os.PathLike) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``root`` (to compare directories byte for byte)."""
    out = {}
    root = Path(root)
    if not root.exists():
        return out
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def repo_files(repo: str | os.PathLike, kind: str) -> set[str]:
    """Relative paths of every object of ``kind`` (blobs, indexes, ttl) in a file:// repository."""
    root = Path(repo)
    return {str(p.relative_to(root)) for p in root.glob(f"*/*/*/{kind}/*") if p.is_file()}


@pytest.fixture
def work_base(tmp_path, monkeypatch):
    """An isolated work directory base (journals, local checkpoints) for the test process and its children."""
    base = tmp_path / "work"
    base.mkdir()
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(base))
    return base


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "repo"
    path.mkdir()
    return path


@pytest.fixture
def cli(work_base):
    def call(*args: str, env: dict[str, str] | None = None, work: str | os.PathLike | None = None) -> CliResult:
        return run_cli(*args, work_base=work or work_base, env=env)

    return call


def blobstate_script() -> Path:
    """The `blobstate` console script of the running interpreter's environment (not another one on PATH)."""
    import shutil

    beside = Path(sys.executable).with_name("blobstate")
    if beside.is_file():
        return beside
    found = shutil.which("blobstate")
    assert found, "the blobstate console script is not installed"
    return Path(found)
