"""The suite's ``--dist loadgroup`` keeps each ``xdist_group`` on one worker: a module fixture that runs a benchmark
or a set of Spark queries once, and the Spark processor tests sharing one session, depend on it. pytest 9.2 with
pytest-xdist 3.8 drops the groups silently (pytest-dev/pytest-xdist#1386); the test extra pins pytest below it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

PROBE = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("one")


@pytest.mark.parametrize("i", range(8))
def test_where(i):
    print("worker", os.environ.get("PYTEST_XDIST_WORKER"))
'''


def test_an_xdist_group_runs_on_one_worker(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                          "no:cacheprovider", "test_probe.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=180, env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    workers = set(re.findall(r"\[(gw\d+)\] .*PASSED", out.stdout))
    assert len(re.findall(r"PASSED", out.stdout)) == 8, out.stdout[-2000:]
    assert len(workers) == 1, f"one xdist_group ran on {sorted(workers)}:\n{out.stdout[-2000:]}"
