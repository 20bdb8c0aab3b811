"""The README's first quick-start command on a clean machine (issue 29, case 1): extracted from README.md and run in
a copy of the clone with nothing but the distribution's Python (``env -i PATH=/usr/bin:/bin HOME=<empty>``,
``/usr/bin/python3``: Debian 12's 3.11.2 here). It must make its virtual environment, install blobstate with the
``demo`` extra from the clone, and reach ``blobstate demo`` (which must work outside the clone: its files go to the
user's cache directory). The demo is stopped once it reports its first committed micro-batch: the full run (90-160
s) is covered by ``tests/test_demo*.py``.

Installing pyspark from PyPI into an empty environment takes minutes, so this test runs as its own step of
``.ci/run`` (``BLOBSTATE_QUICKSTART_TEST=1``), before the suite and outside its 20-minute budget; in the suite it
is skipped. pip reads ``/etc/pip.conf`` (a machine's index and certificates), as it would for a new user.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- readme-quick-start"
SYSTEM_PYTHON = "/usr/bin/python3"

own_step = pytest.mark.skipif(os.environ.get("BLOBSTATE_QUICKSTART_TEST") != "1",
                                reason="a CI step of its own (.ci/run sets BLOBSTATE_QUICKSTART_TEST=1): minutes of "
                                       "pip install into an empty environment")


def quick_start_commands() -> list[str]:
    """The quick-start block's commands (comments stripped)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text[text.index(MARK):], flags=re.S)
    assert block, "the README's quick-start block is missing"
    return [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_quick_start_is_two_commands():
    commands = quick_start_commands()
    assert len(commands) == 2 and commands[1] == "bash .ci/run", commands
    assert "venv" in commands[0] and commands[0].endswith("blobstate demo"), commands[0]


def copy_clone(target: Path) -> None:
    """The files of this clone (tracked, and untracked but not ignored), as a fresh clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    target.mkdir(parents=True)
    archive = target.parent / "clone.tar"
    with tarfile.open(archive, "w") as tar:
        for name in filter(None, listed):
            if (ROOT / name).exists():
                tar.add(ROOT / name, arcname=name, recursive=False)
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="tar")
    archive.unlink()


def kill_processes_under(root: Path, timeout_s: float = 30.0) -> None:
    """SIGKILL every process whose command line names a path under ``root`` (the demo's driver and its Spark JVM
    run from the clone's venv, in sessions of their own), then wait until none is left."""
    def running() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if str(root).encode() in (entry / "cmdline").read_bytes():
                        found.append(int(entry.name))
                except OSError:
                    pass  # gone meanwhile
        return found

    deadline = time.monotonic() + timeout_s
    while (pids := running()) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    assert not running(), f"processes of {root} outlived SIGKILL"


@own_step
def test_the_first_command_reaches_blobstate_demo_with_the_distributions_python(tmp_path):
    if not os.access(SYSTEM_PYTHON, os.X_OK) or shutil.which("git") is None:
        pytest.skip("no distribution python3 at /usr/bin/python3 (or no git)")
    command = quick_start_commands()[0]
    clone, home = tmp_path / "clone", tmp_path / "home"
    copy_clone(clone)
    home.mkdir()
    log_path = tmp_path / "quickstart.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["/bin/bash", "-c", command], cwd=clone, stdout=log, stderr=subprocess.STDOUT,
                                env={"PATH": "/usr/bin:/bin", "HOME": str(home)}, start_new_session=True)
    reached = re.compile(r"run1: batch \d+ of \d+ committed")
    deadline = time.monotonic() + 1500
    try:
        while True:
            text = log_path.read_text(errors="replace")
            if reached.search(text) or proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(1)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the demo: the point is made
        except ProcessLookupError:
            pass
        proc.wait(60)
        kill_processes_under(clone)  # its driver runs in a session of its own, and the JVM under it
    text = log_path.read_text(errors="replace")
    assert reached.search(text), f"the first command did not reach a committed demo batch:\n{text[-4000:]}"
    assert "externally-managed-environment" not in text
    # The venv is the distribution's Python, and the demo works outside the clone.
    config = (clone / ".venv" / "pyvenv.cfg").read_text()
    assert "home = /usr/bin" in config, config
    assert not (clone / "blobstate-demo").exists()
    assert (home / ".cache" / "blobstate" / "demo" / "input").is_dir()
