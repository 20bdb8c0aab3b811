"""The suite runs on two pytest-xdist workers (``addopts``: ``-n 2 --dist loadgroup``); each worker starts its own
servers on free ports. PySpark's own local Spark Connect server (``remote("local[...]")``) cannot move: it binds
port 15002 and its client dials ``sc://localhost`` there, so two of them at once, on two workers, make one test fail
for a reason that has nothing to do with blobstate (CI failed so once). The tests' Spark Connect children therefore
start their server on a free port of their own (``spark_child.connect_session``); this checks that nothing in the
tests starts one on the fixed port."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FIXED_PORT_SERVER = re.compile(r"\.remote\(\s*[\"']local")


def test_no_test_starts_a_spark_connect_server_on_the_fixed_port():
    sources = [path for path in sorted(TESTS.rglob("*.py")) if path.name != Path(__file__).name]
    fixed = [p.name for p in sources if FIXED_PORT_SERVER.search(p.read_text(encoding="utf-8"))]
    assert fixed == [], f"start a local Spark Connect server on port 15002 (use spark_child.connect_session): {fixed}"
    child = (TESTS / "support" / "spark_child.py").read_text(encoding="utf-8")
    assert "spark.connect.grpc.binding.port" in child


def test_the_configured_run_is_parallel_and_keeps_groups_together():
    import tomllib

    options = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    addopts = options["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "--dist" in addopts and addopts[addopts.index("--dist") + 1] == "loadgroup", addopts
    assert "-n" in addopts, addopts
