"""The ``dir`` local store: a plain directory, copied file by file (no knowledge of which files change).

Every file may change in place, so every file is mutable: its CRC32C is always computed (never taken from the
cache) and it is copied, never hard-linked, on restore. Unchanged files (same name, size and CRC32C) are still not
uploaded again.
"""

from __future__ import annotations

import os
import shutil

from blobstate.interfaces import LocalStore


class DirStore(LocalStore):
    """Copies ``source`` (a directory path) with ``shutil.copytree``; symlinks are kept as links, not followed."""

    store_type = "dir"

    def create_checkpoint(self, source: object, target_dir: str) -> None:
        shutil.copytree(os.fspath(source), target_dir, symlinks=True)  # type: ignore[arg-type]

    def is_mutable(self, relative_path: str) -> bool:
        return True


def looks_like_dir(directory: str) -> bool:
    return os.path.isdir(directory)
