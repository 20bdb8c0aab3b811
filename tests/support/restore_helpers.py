"""Helpers of the restore tests: the whole state of a tree (files, links, empty directories, modes, mtimes), a
tmpfs mount for mount-point cases, and rewriting a snapshot index together with its checkpoint record."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


def tree_state(root: str | os.PathLike, *, mtimes: bool = False) -> dict[str, tuple[Any, ...]]:
    """``relative path -> (kind, content sha256 / link target, permission bits[, mtime ns])`` for everything under
    ``root``, links not followed, empty directories included."""
    out: dict[str, tuple[Any, ...]] = {}
    root = os.fspath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                entry: tuple[Any, ...] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                entry = ("dir", stat.S_IMODE(st.st_mode))
            else:
                entry = ("file", hashlib.sha256(Path(path).read_bytes()).hexdigest(), stat.S_IMODE(st.st_mode))
            out[rel] = entry + ((st.st_mtime_ns,) if mtimes else ())
    return out


@contextlib.contextmanager
def tmpfs(path: str | os.PathLike, size: str = "64m") -> Iterator[Path]:
    """Mount a tmpfs at ``path`` (created) for the block; skips the test where mounting is not permitted."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.strip() or proc.returncode}): the mount-point case "
                    "needs root or CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def latest_record(repo: Path, store: str = "*") -> tuple[Path, dict[str, Any]]:
    """The file-log record of the newest checkpoint of ``store`` (any store: of the last one by name)."""
    path = sorted((repo / "checkpoints").glob(f"*/*/{store}/*.json"))[-1]
    return path, json.loads(path.read_text())


def plain_index(stored: bytes) -> bytes:
    """A stored index's JSON: an index is stored compressed (``blobstate.codec.frame``; a plain one is read too)."""
    import zstandard

    return zstandard.ZstdDecompressor().decompress(stored) if stored[:4] == b"\x28\xb5\x2f\xfd" else stored


def rewrite_index(repo: Path, change: Callable[[dict[str, Any]], Any], store: str = "*") -> bytes:
    """Apply ``change`` to the latest snapshot index's JSON and store it with a matching checkpoint record (size
    and CRC32C), as someone who can write the repository could. Returns the new index bytes."""
    import google_crc32c

    record_path, record = latest_record(repo, store)
    index_path = repo / record["indexBlobId"]
    doc = json.loads(plain_index(index_path.read_bytes()))
    change(doc)
    data = json.dumps(doc).encode()
    index_path.write_bytes(data)
    record.update(indexCrc32c=google_crc32c.value(data), indexSizeInBytes=len(data))
    record_path.write_text(json.dumps(record))
    return data


def write_index_bytes(repo: Path, data: bytes) -> None:
    """Store ``data`` as the latest snapshot index, with a matching checkpoint record."""
    import google_crc32c

    record_path, record = latest_record(repo)
    (repo / record["indexBlobId"]).write_bytes(data)
    record.update(indexCrc32c=google_crc32c.value(data), indexSizeInBytes=len(data))
    record_path.write_text(json.dumps(record))
