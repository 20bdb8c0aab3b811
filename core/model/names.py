"""The names a snapshot may hold, and the limits they keep: one rule for backup and restore.

A name a restore would refuse is refused at backup, so a snapshot never holds a file it cannot give back. On POSIX
every name is allowed except those with NUL or ``/`` (which no file system gives), ``.`` and ``..``, and names
longer than ``NAME_MAX`` bytes; a name that is not UTF-8 is carried as Python's ``os.fsdecode`` form (the
undecodable bytes as lone surrogates ``\\udc80``-``\\udcff``) and written back as the same bytes. Backslashes and
colons are ordinary characters on POSIX; on Windows they are refused. Pure: the rules of a name, no disk
(``blobstate.local.paths.safe_join`` joins a checked name under a directory).
"""

from __future__ import annotations

import os

from blobstate.errors import UnsafePathError

NAME_MAX = 255  # bytes in one name (Linux, macOS, the BSDs)
PATH_MAX = 4095  # bytes in a relative path or a symlink target (PATH_MAX 4096 with its NUL)
MAX_DEPTH = 200  # directory levels below the store's root: deeper trees are refused at backup and in an index

_WINDOWS_FORBIDDEN = set('\\:*?"<>|')


def name_bytes(name: str) -> bytes:
    """The bytes ``name`` stands for on this system (``os.fsencode``); ``UnsafePathError`` when it has none."""
    try:
        return os.fsencode(name)
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise UnsafePathError(f"unsafe name {name!r}: not a file name on this system") from None


def check_name(name: object) -> str:
    """``name`` when it is one valid path component; ``UnsafePathError`` otherwise (see the module docstring)."""
    if not isinstance(name, str) or not name or name in (".", "..") or "/" in name or "\x00" in name:
        raise UnsafePathError(f"unsafe name {name!r}")
    if len(name_bytes(name)) > NAME_MAX:
        raise UnsafePathError(f"unsafe name {name[:40]!r}...: longer than {NAME_MAX} bytes")
    if os.name == "nt" and (_WINDOWS_FORBIDDEN & set(name) or name.endswith((" ", "."))):
        raise UnsafePathError(f"unsafe name {name!r}: not a valid Windows file name")
    return name


def check_relpath(relative: str) -> list[str]:
    """The components of ``relative`` (``/``-separated, from an index or a scan), each checked with
    ``check_name``, the whole at most ``PATH_MAX`` bytes and ``MAX_DEPTH`` + 1 components; ``UnsafePathError``
    otherwise."""
    if not isinstance(relative, str) or not relative or relative.startswith("/"):
        raise UnsafePathError(f"unsafe name in index: {relative!r}")
    parts = relative.split("/")
    for part in parts:
        try:
            check_name(part)
        except UnsafePathError:
            raise UnsafePathError(f"unsafe name in index: {relative[:200]!r}") from None
    if len(parts) > MAX_DEPTH + 1:
        raise UnsafePathError(f"path nested deeper than {MAX_DEPTH} directories: {relative[:200]!r}...")
    if len(name_bytes(relative)) > PATH_MAX:
        raise UnsafePathError(f"path longer than {PATH_MAX} bytes: {relative[:200]!r}...")
    return parts
