"""Every extra resolves at once (issue 43, friction 1): ``pip install -e ".[s3]"`` into an empty environment took
6 min 20 s because an unpinned ``boto3`` beside s3fs (whose aiobotocore pins botocore) made pip try 23 releases of
boto3, one download each. An extra names only what blobstate imports, and takes a library's dependencies at that
library's own pins (s3fs's aiobotocore pins botocore; pyspark's ``sql`` extra pins pandas and pyarrow), never as a
second, unpinned requirement beside them.

Each extra is resolved by pip itself, as for an empty environment (``--dry-run --ignore-installed --report``), and
the bound on backtracking is zero: the run is stopped, and the test fails, at pip's first "is looking at multiple
versions of X" (its backtracking notice), naming X. One exception, the test suite's own ``test`` extra: moto needs
a boto3, and the newest boto3 needs a newer botocore than the one aiobotocore (s3fs's) pins, so pip must step back
through boto3 releases (small metadata files); it may backtrack on boto3 and on nothing else (``.[all,test]``, what
``.ci/run`` installs, tried 64 aiobotocore and 33 s3fs releases before, each s3fs with its own fsspec). Needs the
package index (pip reads the machine's pip.conf); metadata comes from pip's cache when it is warm. No timing is
asserted (the figures are in the issue's note). A CI step of its own (``.ci/run`` sets ``BLOBSTATE_EXTRAS_TEST=1``),
before the suite and outside its 20-minute budget: eight resolutions against the index take minutes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKTRACKING = re.compile(r"pip is looking at multiple versions of (\S+)")
#: the README's S3 steps install `s3`; `.ci/run` installs `all,test` (`all` holds every backend, `spark`, `connect` and
#: the quick start's `demo`), then `docs`
EXTRAS = ["s3", "gcs", "azure", "spark", "test", "docs", "all", "all,test"]


def resolve(extras: str, report: Path, may_backtrack: frozenset[str] = frozenset()) -> tuple[str | None, str, int]:
    """``(first package pip backtracked on outside ``may_backtrack``, or None; pip's output; exit code)`` of a dry-run
    install of the clone with ``extras``. pip is stopped at its first backtracking notice on any other package."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--progress-bar", "off",
               "--report", str(report), "-e", f"{ROOT}[{extras}]"]
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines, culprit = [], None
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        found = BACKTRACKING.search(line)
        if found and found.group(1) not in may_backtrack:
            culprit = found.group(1)
            proc.kill()
            break
    proc.stdout.close()
    return culprit, "".join(lines), proc.wait()


@pytest.mark.skipif(os.environ.get("BLOBSTATE_EXTRAS_TEST") != "1",
                    reason="a CI step of its own (.ci/run sets BLOBSTATE_EXTRAS_TEST=1): minutes of pip resolution")
@pytest.mark.parametrize("extras", EXTRAS)
def test_the_extra_resolves_without_backtracking(extras, tmp_path):
    report = tmp_path / "report.json"
    with_moto = "test" in extras.split(",")
    culprit, output, code = resolve(extras, report, frozenset({"boto3"}) if with_moto else frozenset())
    assert culprit is None, (f'pip backtracked on {culprit} resolving ".[{extras}]": take it at the pin of the library '
                             f"that depends on it, not as a second requirement\n{output[-3000:]}")
    assert code == 0, output[-3000:]
    chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert "blobstate" in chosen
    if "boto3" in chosen:  # moto's (the test extra): the one that fits the botocore aiobotocore pins
        assert chosen["boto3"].split(".")[:2] == chosen["botocore"].split(".")[:2], chosen
    if extras in ("spark", "demo", "all", "all,test"):
        assert "pyarrow" in chosen and "pandas" in chosen, "the spark extra must bring mapInArrow's pyarrow, pandas"
