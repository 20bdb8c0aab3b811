"""Part of a test run as an unprivileged user: root reads, writes and searches every directory, so a fault that a
missing permission causes is never seen when the suite runs as root (as it does here).

``run_unprivileged(fn, prepare=None)`` calls ``fn(directory)`` with a fresh directory the user owns, after
``prepare(directory)`` as the suite's own user (as root: what the unprivileged user may not change): as is when the
suite is not root; as root, in a forked child that drops to ``nobody`` (``setgroups``, ``setresgid``, ``setresuid``, as
``setpriv --reuid --regid --clear-groups`` does) before it calls ``fn``. A fork, not ``setpriv`` and a new
interpreter: this one lives under ``/root``, which ``nobody`` may not enter, and the child needs nothing the parent
has not imported. The child's failure is raised here, its traceback in the message.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

#: The user the child runs as.
USER = "nobody"


def run_unprivileged(fn: Callable[[Path], None], prepare: Callable[[Path], None] | None = None) -> None:
    """Call ``fn(directory)`` as an unprivileged user, after ``prepare(directory)`` as this one; raise
    ``AssertionError`` with the child's traceback if ``fn`` fails."""
    if os.geteuid() != 0:
        base = Path(tempfile.mkdtemp(prefix="unprivileged-"))
        try:
            if prepare is not None:
                prepare(base)
            fn(base)
        finally:
            shutil.rmtree(base, ignore_errors=True)
        return
    user = pwd.getpwnam(USER)
    base = Path(tempfile.mkdtemp(prefix="unprivileged-"))  # under /tmp: every user may pass through it
    os.chown(base, user.pw_uid, user.pw_gid)
    if prepare is not None:
        prepare(base)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(user.pw_gid, user.pw_gid, user.pw_gid)
            os.setresuid(user.pw_uid, user.pw_uid, user.pw_uid)
            fn(base)
            status = 0
        except BaseException:  # noqa: BLE001 - everything goes back to the parent
            os.write(write_end, traceback.format_exc().encode())
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            report = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
    finally:
        shutil.rmtree(base, ignore_errors=True)  # as root: whatever modes the child left
    if os.waitstatus_to_exitcode(status) != 0:
        raise AssertionError(f"as {USER}:\n{report}")
