"""Faults around the repository marker for a real `blobstate` subprocess (issue 39 cases 1 and 2):
``python -m marker_faults ARGS`` arms what the environment asks for, then runs the CLI with ``ARGS``.

- ``BLOBSTATE_TEST_KILL_WRITE=N`` with ``BLOBSTATE_TEST_KILL_ROOT=DIR``: the process SIGKILLs itself right after
  its N-th change of a file under ``DIR`` (1-based): a file opened for writing (created or truncated), bytes
  written to one, a rename, a link, an unlink. Counted at the system call, whatever blobstate function makes it,
  so a crash matrix over N covers every point of a rewrite, old code or new.
- ``BLOBSTATE_TEST_HOLD_DIR=DIR``: right before its first write of the marker (a ``put`` of it, or a ``rewrite``)
  the process touches ``DIR/arrived-<pid>`` and waits until ``BLOBSTATE_TEST_HOLD_WRITERS`` processes (default 2)
  have arrived, or, with ``BLOBSTATE_TEST_HOLD_UNTIL=FILE``, until ``FILE`` exists (60 s deadline, polled: a file
  barrier between processes, not a sleep standing in for an event). Racing writers all read the marker before any
  of them writes it.
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

_count = 0
_fds: set[int] = set()
_held = False


def _under(path: Any, root: str) -> bool:
    try:
        full = os.path.abspath(os.fsdecode(path))
    except TypeError:
        return False
    return full == root or full.startswith(root + os.sep)


def _changed(limit: int) -> None:
    global _count
    _count += 1
    if _count == limit:
        os.kill(os.getpid(), signal.SIGKILL)


def arm_kill(limit: int, root: str) -> None:
    """SIGKILL this process right after its ``limit``-th change of a file under ``root``."""
    root = os.path.abspath(root)
    real_open, real_write, real_close = os.open, os.write, os.close
    real_builtin_open = builtins.open

    def os_open(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        fd = real_open(path, flags, mode, *args, **kwargs)
        if flags & (os.O_WRONLY | os.O_RDWR) and _under(path, root):
            _fds.add(fd)
            if flags & (os.O_CREAT | os.O_TRUNC):
                _changed(limit)
        return fd

    def os_write(fd: int, data: Any) -> int:
        n = real_write(fd, data)
        if fd in _fds:
            _changed(limit)
        return n

    def os_close(fd: int) -> None:
        _fds.discard(fd)
        real_close(fd)

    def open_(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        fh = real_builtin_open(file, mode, *args, **kwargs)
        if isinstance(file, (str, bytes, os.PathLike)) and any(c in mode for c in "wax+") and _under(file, root):
            _changed(limit)
            real = fh.write

            def write(data: Any) -> int:
                n = real(data)
                fh.flush()
                _changed(limit)
                return n

            try:
                fh.write = write
            except AttributeError:
                pass
        return fh

    def after(name: str, count_if: Any) -> None:
        real = getattr(os, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = real(*args, **kwargs)
            if count_if(*args):
                _changed(limit)
            return out

        setattr(os, name, call)

    os.open, os.write, os.close, builtins.open = os_open, os_write, os_close, open_
    for name in ("rename", "replace", "link"):
        after(name, lambda src, dst, *_: _under(dst, root) or _under(src, root))
    after("unlink", lambda path, *_: _under(path, root))


def _hold() -> None:
    """The barrier of ``BLOBSTATE_TEST_HOLD_DIR`` (the module docstring), once per process."""
    global _held
    directory = os.environ.get("BLOBSTATE_TEST_HOLD_DIR")
    if not directory or _held:
        return
    _held = True
    Path(directory, f"arrived-{os.getpid()}").touch()
    until = os.environ.get("BLOBSTATE_TEST_HOLD_UNTIL")
    writers = int(os.environ.get("BLOBSTATE_TEST_HOLD_WRITERS", "2"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (os.path.exists(until) if until else len(list(Path(directory).glob("arrived-*"))) >= writers):
            return
        time.sleep(0.01)
    raise SystemExit("marker_faults: the other processes never arrived at the barrier")


def arm_hold() -> None:
    """Hold before the first write of the marker (``BLOBSTATE_TEST_HOLD_DIR``)."""
    from blobstate.model.layout import MARKER
    from blobstate.repository.retry import RetryingBlobStore

    real_put = RetryingBlobStore.put

    def put(self: Any, request: Any) -> None:
        if request.blob_id == MARKER:
            _hold()
        real_put(self, request)

    RetryingBlobStore.put = put  # type: ignore[method-assign]
    real_rewrite = getattr(RetryingBlobStore, "rewrite", None)
    if real_rewrite is not None:
        def rewrite(self: Any, blob_id: str, *args: Any, **kwargs: Any) -> Any:
            if blob_id == MARKER:
                _hold()
            return real_rewrite(self, blob_id, *args, **kwargs)

        RetryingBlobStore.rewrite = rewrite  # type: ignore[attr-defined]


def main() -> None:
    if os.environ.get("BLOBSTATE_TEST_KILL_WRITE"):
        arm_kill(int(os.environ["BLOBSTATE_TEST_KILL_WRITE"]), os.environ["BLOBSTATE_TEST_KILL_ROOT"])
    if os.environ.get("BLOBSTATE_TEST_HOLD_DIR"):
        arm_hold()
    from blobstate.cli import main as cli

    sys.argv = ["blobstate", *sys.argv[1:]]
    cli()


if __name__ == "__main__":
    main()
