"""The house rules of docs/architecture.md, checked: every ``module:function`` the walkthroughs name exists; a backup
reaches the blob store's ``put`` through each room once (no doubling back); a restore never enters the backup
module; no module is much over 400 lines."""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
MAX_LINES = 420  # "no module over about 400 lines"


def _named_steps() -> list[str]:
    return sorted(set(re.findall(r"`(blobstate(?:\.\w+)*:[\w.]+)`", DOC.read_text())))


def test_the_walkthroughs_name_only_functions_that_exist():
    steps = _named_steps()
    assert len(steps) >= 20, steps
    for step in steps:
        module_name, _, path = step.partition(":")
        obj = importlib.import_module(module_name)
        for part in path.split("."):
            assert hasattr(obj, part), f"{step}: {obj!r} has no attribute {part!r}"
            obj = getattr(obj, part)


def test_no_module_is_much_over_400_lines():
    long = []
    for folder in ("core", "journal", "plugins", "spark"):
        for path in (ROOT / folder).rglob("*.py"):
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                long.append(f"{path.relative_to(ROOT)}: {lines}")
    assert not long, long


class _CallTrace:
    """Records, for every call into a blobstate module, the chain of distinct blobstate modules on the stack."""

    def __init__(self) -> None:
        self.modules_seen: set[str] = set()
        self.stacks_at: dict[str, list[str]] = {}

    def __call__(self, frame, event, arg):  # noqa: ANN001, ANN204 - sys.setprofile's signature
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("blobstate"):
            return
        self.modules_seen.add(module)
        name = frame.f_code.co_name
        if module == "blobstate.plugins.fsspec_store" and name == "put" and "put" not in self.stacks_at:
            chain, f = [], frame
            while f is not None:
                m = f.f_globals.get("__name__", "")
                # BlobStore.map_concurrent (the interface's batch runner) runs the pipeline's own per-blob step:
                # that frame is the interface layer of the path, not a return into an earlier room.
                if m.startswith("blobstate") and m != "blobstate.plugin.interfaces" and (not chain or chain[-1] != m):
                    chain.append(m)
                f = f.f_back
            self.stacks_at["put"] = list(reversed(chain))

    def __enter__(self) -> _CallTrace:
        sys.setprofile(self)
        threading.setprofile(self)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


@pytest.fixture
def dir_store(tmp_path):
    src = tmp_path / "counts"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(os.urandom(1000))
    (src / "sub" / "b.txt").write_bytes(os.urandom(2000))
    return src


def test_a_backup_goes_cli_api_pipeline_store_without_doubling_back(dir_store, tmp_path, monkeypatch):
    from blobstate.cli import main

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "work"))
    with _CallTrace() as trace:
        result = CliRunner().invoke(main, ["backup", str(dir_store), "--repo", str(tmp_path / "repo"), "-q",
                                                    "--max-concurrency", "1"])
    assert result.exit_code == 0, result.output
    chain = trace.stacks_at["put"]
    rooms = [m for m in chain if m in ("blobstate.cli.main_backup", "blobstate.api", "blobstate.commit.backup",
                                       "blobstate.repository.retry", "blobstate.plugins.fsspec_store")]
    assert rooms == ["blobstate.cli.main_backup", "blobstate.api", "blobstate.commit.backup",
                     "blobstate.repository.retry", "blobstate.plugins.fsspec_store"], chain
    assert len(chain) == len(set(chain)), f"a module appears twice on the way to put: {chain}"


def test_a_restore_never_enters_the_backup_module(dir_store, tmp_path, monkeypatch):
    from blobstate.cli import main

    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "work"))
    repo = str(tmp_path / "repo")
    assert CliRunner().invoke(main, ["backup", str(dir_store), "--repo", repo, "-q"]).exit_code == 0
    monkeypatch.setenv("BLOBSTATE_WORK_DIR", str(tmp_path / "other-host"))
    with _CallTrace() as trace:
        result = CliRunner().invoke(main, ["restore", str(tmp_path / "counts-restored"), "--repo", repo,
                                           "--store", "counts", "-q"])
    assert result.exit_code == 0, result.output
    assert "blobstate.restoring.snapshot" in trace.modules_seen
    assert "blobstate.commit.backup" not in trace.modules_seen
    assert not any(m.startswith("blobstate.cli.main_") and m != "blobstate.cli.main_restore"
                   for m in trace.modules_seen)
