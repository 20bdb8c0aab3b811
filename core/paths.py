"""Validation of names that come from a snapshot index before they touch the local disk."""

from __future__ import annotations

import os

from blobstate.errors import UnsafePathError

_FORBIDDEN_CHARS = ("\x00", "\\")


def safe_join(root: str, relative: str) -> str:
    """Join ``relative`` (a ``/``-separated path from an index) under ``root``, refusing escapes.

    Refused with ``UnsafePathError``: empty names, absolute paths, ``.`` or ``..`` components, backslashes and NUL
    bytes, and any path whose resolved form (symlinks followed) lies outside ``root``.
    """
    if not relative or relative.startswith("/") or any(c in relative for c in _FORBIDDEN_CHARS):
        raise UnsafePathError(f"unsafe name in index: {relative!r}")
    parts = relative.split("/")
    if any(p in ("", ".", "..") for p in parts) or os.path.isabs(relative) or (len(relative) > 1
                                                                              and relative[1] == ":"):
        raise UnsafePathError(f"unsafe name in index: {relative!r}")
    root_real = os.path.realpath(root)
    candidate = os.path.join(root_real, *parts)
    resolved = os.path.realpath(candidate)
    if resolved != candidate and not resolved.startswith(root_real + os.sep):
        raise UnsafePathError(f"name in index resolves outside the destination: {relative!r}")
    if os.path.commonpath([root_real, resolved]) != root_real:
        raise UnsafePathError(f"name in index resolves outside the destination: {relative!r}")
    return candidate


def fsync_dir(path: str) -> None:
    """fsync a directory so that renames and creations in it are durable (no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
