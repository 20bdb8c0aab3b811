"""The documentation site's runnable code blocks, run as a reader would run them (issue 43).

A block marked ``<!-- docs-run: ... -->`` on the line before its fence, on any page of ``docs/`` or in README.md,
runs as it stands in an empty directory: a ``bash`` block with ``bash -euo pipefail`` and the installed
``blobstate`` command first on PATH, a ``python`` block with this interpreter; each with its own work directory
(``BLOBSTATE_WORK_DIR``). A block marked ``<!-- docs-run s3: ... -->`` runs against a moto S3 server: its
``s3://my-bucket/`` is a fresh bucket there, and the environment holds the server's endpoint and credentials, as
the page's reader would have set them (the README's S3 steps show how). The README's own marked blocks have their
own tests (its S3 steps: ``test_readme_s3.py``; its quick start: ``tests/project/test_quickstart.py``); every
other block of the site at least parses (``tests/project/test_docs_site.py``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures_core import blobstate_script

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"^<!-- docs-run( s3)?:[^\n]*-->\n```(bash|python)\n(.*?)^```", flags=re.S | re.M)


def marked_blocks() -> list[tuple[str, str, str]]:
    """``(id, language, code)`` of every marked block: id ``page:N`` (N counts the page's marked blocks from 1),
    language ``bash``, ``python``, or ``bash s3`` for a block that runs against S3."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, match in enumerate(MARK.finditer(page.read_text(encoding="utf-8")), 1):
            language = match.group(2) + (" s3" if match.group(1) else "")
            found.append((f"{page.relative_to(ROOT)}:{number}", language, match.group(3)))
    return found


def test_the_pages_mark_their_runnable_blocks():
    pages = {block_id.split(":")[0] for block_id, _, _ in marked_blocks()}
    assert {"docs/getting-started.md", "docs/failure-drills.md"} <= pages, pages


@pytest.mark.parametrize(("block_id", "language", "code"), marked_blocks(), ids=[b[0] for b in marked_blocks()])
def test_the_block_runs_as_written(block_id, language, code, tmp_path, request):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BLOBSTATE_", "AWS_"))}
    env.update(PATH=os.pathsep.join([str(blobstate_script().parent), env.get("PATH", "")]),
               BLOBSTATE_WORK_DIR=str(tmp_path / ".work"), HOME=str(tmp_path / ".home"))
    if language.endswith(" s3"):
        target = request.getfixturevalue("s3_target")  # moto, started for these blocks only
        assert "s3://my-bucket/" in code, block_id
        code = code.replace("s3://my-bucket/", f"s3://{target.bucket}/")
        env.update(target.env, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing")
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{block_id} failed:\nstdout:\n{run.stdout}\nstderr:\n{run.stderr}"
