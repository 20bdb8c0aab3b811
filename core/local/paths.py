"""Joining a name from a snapshot index under a local directory without leaving it (the rules of a name itself:
``blobstate.model.names``)."""

from __future__ import annotations

import os

from blobstate.errors import UnsafePathError
from blobstate.model.names import check_relpath


def safe_join(root: str, relative: str) -> str:
    """Join ``relative`` (a ``/``-separated path from an index) under ``root``, refusing escapes.

    Refused with ``UnsafePathError``: what ``check_relpath`` refuses (empty names, absolute paths, ``.`` or ``..``
    components, NUL bytes, over-long names), and any path whose resolved form (symlinks followed) lies outside
    ``root``.
    """
    parts = check_relpath(relative)
    root_real = os.path.realpath(root)
    candidate = os.path.join(root_real, *parts)
    resolved = os.path.realpath(candidate)
    if resolved != candidate and not resolved.startswith(root_real + os.sep):
        raise UnsafePathError(f"name in index resolves outside the destination: {relative!r}")
    if os.path.commonpath([root_real, resolved]) != root_real:
        raise UnsafePathError(f"name in index resolves outside the destination: {relative!r}")
    return candidate
