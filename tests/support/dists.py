"""Third-party plugins as real distributions for tests: a dist-info with entry points in a folder put on
PYTHONPATH, exactly what ``pip install`` leaves behind."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path


def make_dist(root: Path, dist: str, version: str, module: str, source: str) -> Path:
    """A minimal installed distribution in ``root``: ``<dist>-<version>.dist-info`` whose entry point (group
    ``blobstate``) names ``module``, and ``module.py`` itself. Put ``root`` on PYTHONPATH to "install" it."""
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[blobstate]\n{module} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


def plugin_env(*roots: Path, **extra: str) -> dict[str, str]:
    from fixtures_core import SUPPORT_DIR

    path = [str(r) for r in roots] + [SUPPORT_DIR] + [p for p in [os.environ.get("PYTHONPATH", "")] if p]
    return {"PYTHONPATH": os.pathsep.join(path), **extra}
