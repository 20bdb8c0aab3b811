"""Local file primitives every room shares: replace a file all or nothing, take a lock file, fsync a directory.

``replace_file`` writes to a temporary file beside the target (its name unique per process and thread) and renames
it over the target, so a reader sees the old content or the new one, never a part (RocksDB's and Flink's
write-then-rename); the temporary file is removed when the write fails. ``try_lock`` takes an exclusive ``flock``
on a lock file without waiting: the kernel releases it when its descriptor is closed or its process dies (a
SIGKILL never leaves a store locked). ``fsync_dir`` makes the renames and creations in a directory durable.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading


def fsync_dir(path: str, *, strict: bool = False) -> None:
    """fsync the directory ``path`` so that renames and creations in it survive a power loss. Best effort by
    default (a file system that cannot fsync a directory is not an error); ``strict`` (a repository's own
    durability, where a failed fsync must fail the write) raises the ``OSError``."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        if strict:
            raise
        return
    try:
        os.fsync(fd)
    except OSError:
        if strict:
            raise
    finally:
        os.close(fd)


def replace_file(path: str, data: bytes | str, *, fsync: bool = False) -> None:
    """Replace the file ``path`` with ``data`` (bytes, or text written as UTF-8) all or nothing. ``fsync``: the
    file and its directory are made durable before this returns. Raises ``OSError`` (nothing replaced)."""
    tmp = f"{path}.tmp-{os.getpid()}-{threading.get_ident()}"
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    try:
        with open(tmp, "wb") as fh:
            fh.write(raw)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(os.path.dirname(path) or ".")


def try_lock(path: str, mode: int = 0o600) -> int | None:
    """Open (creating) the lock file ``path`` and take an exclusive ``flock`` on it without waiting: its file
    descriptor (close it to release the lock), or ``None`` when another process (or another descriptor of this
    one) holds it. Raises ``OSError`` when the file cannot be opened."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd
