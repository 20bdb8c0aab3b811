"""Install hints that work without a package index (issue 29, case 2): blobstate is not on PyPI, so a missing extra
names this installation's own source (PEP 610 ``direct_url.json``): the clone for an editable install, the wheel
for a wheel; and the README installs from a clone or a wheel."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from blobstate.plugin.records import extra_install_hint

ROOT = Path(__file__).resolve().parents[2]


class FakeDist:
    def __init__(self, direct: dict | None) -> None:
        self.direct = direct

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct is None else json.dumps(self.direct)


@pytest.mark.parametrize(("direct", "expected"), [
    ({"url": "file:///src/blobstate", "dir_info": {"editable": True}}, 'pip install -e "/src/blobstate[s3]"'),
    ({"url": "file:///w/blobstate-0.1.0-py3-none-any.whl", "archive_info": {}},
     'pip install "blobstate[s3] @ file:///w/blobstate-0.1.0-py3-none-any.whl"'),
    (None, 'pip install -e ".[s3]" in a clone of blobstate'),
])
def test_the_hint_names_this_installations_source(monkeypatch, direct, expected):
    import importlib.metadata

    from blobstate.plugin import records

    monkeypatch.setattr(importlib.metadata, "distributions", lambda **kw: [FakeDist(direct)])
    records._install_source.cache_clear()  # read once per process: this test installs another source
    try:
        hint = extra_install_hint("s3")
    finally:
        records._install_source.cache_clear()
    assert hint.startswith(expected), hint
    assert "pip install 'blobstate[s3]'" not in hint and not re.search(r"pip install \"?blobstate\[s3\]\"?$", hint)


def test_a_missing_extra_points_at_this_clone(tmp_path):
    """A real missing dependency (s3fs hidden from the import system) in this editable install."""
    code = ("import sys; sys.modules['s3fs'] = None\n"
            "from blobstate.repository.backends import open_blob_store\n"
            "try:\n    open_blob_store('s3://b/p')\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.startswith("MissingDependencyError"), out.stdout + out.stderr
    assert f'pip install -e "{ROOT}[s3]"' in out.stdout, out.stdout


def test_the_readme_installs_from_a_clone_or_a_wheel_never_from_an_index():
    text = (ROOT / "README.md").read_text()
    from_index = re.findall(r'pip install ["\']?blobstate\[\w+\]["\']?(?! @)', text)
    assert not from_index, f"the README installs from an index: {from_index}"
    assert 'pip install -e ".[s3]"' in text and 'pip install "blobstate[s3] @ file://' in text
    assert "not on PyPI" in text


READ_STATE_WITHOUT_PYARROW = """
import os, sys
sys.modules["pyarrow"] = None  # importing pyarrow now fails, as in an environment without it
from pyspark.sql import SparkSession
import blobstate.spark
spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
         .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
try:
    blobstate.spark.read_state(spark, repo=sys.argv[1], job="default", store="counts").collect()
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}")
finally:
    spark.stop()
"""


def test_read_state_without_pyarrow_says_how_to_install_it_in_one_line(tmp_path, work_base):
    """Issue 43, friction 2: ``blobstate.spark.read_state`` runs through ``mapInArrow``, which needs pyarrow (and
    pandas); without it the error was PySpark's own, many lines long. It is blobstate's one line now, naming the
    ``spark`` extra of this installation, raised before anything is read."""
    pytest.importorskip("pyspark")
    from rocksdict import Rdict

    import blobstate

    db = Rdict(str(tmp_path / "counts"))
    db["JFK-LAX"] = 1
    db.close()
    repo = str(tmp_path / "repo")
    blobstate.backup(str(tmp_path / "counts"), repo=repo)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    run = subprocess.run([sys.executable, "-c", READ_STATE_WITHOUT_PYARROW, repo], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout + run.stderr
    assert lines[0].startswith("MissingDependencyError: blobstate.spark.read_state needs pyarrow"), lines[0]
    assert f'pip install -e "{ROOT}[spark]"' in lines[0], lines[0]
