"""The wheel must contain every package folder: compare the folders on disk with pyproject's `packages`."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = config["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    mapping = setuptools["package-dir"]
    on_disk = set()
    for package, folder in mapping.items():
        base = ROOT / folder
        assert (base / "__init__.py").is_file(), f"{folder}/ mapped to {package} has no __init__.py"
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            on_disk.add(".".join([package, *rel.parts]))
    missing = on_disk - listed
    assert not missing, f"package folders missing from [tool.setuptools].packages: {sorted(missing)}"
    stale = listed - on_disk
    assert not stale, f"packages listed without a folder: {sorted(stale)}"


def test_import_blobstate_needs_only_core_dependencies():
    import subprocess
    import sys

    code = (
        "import sys, blobstate, blobstate.cli, blobstate.api\n"
        "heavy = [m for m in ('s3fs', 'gcsfs', 'adlfs', 'kafka', 'sqlalchemy', 'pyspark', 'cryptography')\n"
        "         if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
