"""The suite runs on two pytest-xdist workers (``addopts``: ``-n 2 --dist loadgroup``); each worker starts its own
servers on free ports. The one server that cannot move is a local Spark Connect server: PySpark binds it to port
15002 and its client dials ``sc://localhost`` there. Two of them at once, on two workers, would make one test fail
for a reason that has nothing to do with blobstate. This checks that every test module that starts one carries the
shared ``xdist_group`` (``spark_fixtures.CONNECT_SERVER_GROUP``), so xdist runs them one at a time on one worker."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CONNECT_GROUP = "pytestmark = CONNECT_SERVER_GROUP"
STARTS_CONNECT = re.compile(r"connect=True|\.remote\(")


def test_every_module_that_starts_a_spark_connect_server_keeps_to_one_worker():
    starters = [path for path in sorted(TESTS.rglob("test_*.py"))
                if path.name != Path(__file__).name and STARTS_CONNECT.search(path.read_text(encoding="utf-8"))]
    assert {p.name for p in starters} >= {"test_spark_connect.py", "test_spark_connect_partitioned.py"}
    unmarked = [p.name for p in starters if CONNECT_GROUP not in p.read_text(encoding="utf-8")]
    assert unmarked == [], f"start a Spark Connect server (port 15002) without {CONNECT_GROUP!r}: {unmarked}"


def test_the_configured_run_is_parallel_and_keeps_groups_together():
    import tomllib

    options = tomllib.loads((TESTS.parent / "pyproject.toml").read_text(encoding="utf-8"))
    addopts = options["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "--dist" in addopts and addopts[addopts.index("--dist") + 1] == "loadgroup", addopts
    assert "-n" in addopts, addopts
