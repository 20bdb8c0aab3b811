"""The suite's budget (20 minutes on two cores) leaves the variants marked ``long`` to ``python -m bench.long_tests``;
every such test keeps a short variant in the suite (the same test function, another parameter), so no behaviour is
tested only outside the suite."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _files_with_long_tests() -> list[str]:
    found = []
    for folder, _dirs, names in os.walk(os.path.join(REPO, "tests")):
        for name in names:
            if name.startswith("test_") and name.endswith(".py") and name != "test_long_marker.py":
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as fh:
                    if "mark.long" in fh.read():
                        found.append(os.path.relpath(path, REPO))
    return sorted(found)


def _collect(files: list[str], *extra: str) -> set[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider",
                          *extra, *files], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "BLOBSTATE_LONG_TESTS": "0"})
    assert out.returncode in (0, 5), out.stdout[-3000:] + out.stderr[-3000:]
    return {line.strip() for line in out.stdout.splitlines() if "::" in line}


def test_every_long_variant_keeps_a_short_variant_of_the_same_test_in_the_suite():
    files = _files_with_long_tests()
    if not files:
        pytest.skip("no test is marked long")
    suite = _collect(files)
    everything = _collect(files, "--long")
    long_only = everything - suite
    assert long_only, "the tests marked long are deselected without --long"
    assert suite < everything
    in_suite = {re.sub(r"\[.*\]$", "", node) for node in suite}
    orphans = sorted(node for node in long_only if re.sub(r"\[.*\]$", "", node) not in in_suite)
    assert orphans == [], f"marked long with no short variant left in the suite: {orphans}"


def test_bench_long_tests_runs_exactly_the_long_ones():
    sys.path.insert(0, REPO)
    from bench import long_tests

    cmd = long_tests.command(["-x"])
    assert cmd[1:] == ["-m", "pytest", "--long", "-m", "long", "-x"]
