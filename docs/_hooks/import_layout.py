"""MkDocs hook: lay the package out as Python imports it, for mkdocstrings to read.

The source tree maps folders onto packages (``[tool.setuptools.package-dir]`` in pyproject.toml: ``core/`` is
``blobstate``, ``spark/`` is ``blobstate.spark``, ...), which a static reader of the source cannot follow. At every
build this hook makes ``build/docs-packages/`` (mkdocstrings' ``paths`` in mkdocs.yml): one folder per mapped
package, holding symbolic links to the mapped folder's entries. Nothing is listed by hand: a module moved or added
inside a mapped folder appears in the reference by the namespaces it is exported from.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

STAGE = Path("build") / "docs-packages"


def lay_out(root: Path, stage: Path) -> dict[str, Path]:
    """Make ``stage`` hold every package of ``root``'s pyproject.toml at its import path; return ``{package:
    folder}``. Raises ``ValueError`` when two mappings claim one path."""
    mapping: dict[str, str] = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    if stage.exists():
        shutil.rmtree(stage)
    made: dict[str, Path] = {}
    for package in sorted(mapping, key=lambda name: name.count(".")):
        source = (root / mapping[package]).resolve()
        target = stage.joinpath(*package.split("."))
        if target.exists() or target.is_symlink():
            if target.is_symlink():
                target.unlink()  # a linked entry of the parent's folder: the mapping says where it really is
            else:
                raise ValueError(f"{package}: {target} is laid out twice")
        target.mkdir(parents=True)
        for entry in sorted(source.iterdir()):
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry)
        made[package] = source
    return made


@event_priority(100)  # before mkdocstrings reads its paths: a fresh clone has no layout yet
def on_config(config: Any) -> Any:
    """MkDocs event: lay the packages out before any page is rendered, and before mkdocstrings looks for them."""
    root = Path(config.config_file_path).resolve().parent
    lay_out(root, root / STAGE)
    return config
