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


def _pip_install_cmd(path: Path) -> list[str]:
    import importlib.util
    import sys
    from importlib import metadata

    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--disable-pip-version-check"]
    try:
        setuptools_major = int(metadata.version("setuptools").split(".")[0])
    except metadata.PackageNotFoundError:
        setuptools_major = 0
    if setuptools_major >= 64 and importlib.util.find_spec("wheel") is not None:
        cmd.append("--no-build-isolation")  # offline and fast; .ci/install-contrib.sh provides wheel
    return [*cmd, "-e", str(path)]


def install_editable(path: Path, dist: str, module: str) -> Path:
    """pip-install the distribution at ``path`` (editable, like a plugin author's checkout, without dependencies)
    into this environment, check that its entry point (group ``blobstate``) names ``module``, and make ``module``
    importable in this already running process too."""
    import fcntl
    import importlib
    import importlib.util
    import subprocess
    import sys
    import tempfile
    from importlib import metadata

    # Serialised across concurrent test sessions on this machine: two pip runs on one environment can collide.
    with open(os.path.join(tempfile.gettempdir(), "blobstate-contrib-install.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.run(_pip_install_cmd(path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip install failed:\n{proc.stdout}\n{proc.stderr}"
    importlib.invalidate_caches()
    if importlib.util.find_spec(module) is None:
        # The editable install's import hook is set up by a .pth file at interpreter start; subprocesses get it,
        # this already running process needs the path itself.
        sys.path.insert(0, str(path))
    found = metadata.distribution(dist)
    assert [(ep.name, ep.value) for ep in found.entry_points if ep.group == "blobstate"] == [(module, module)]
    return path
