"""Test-only plugin module: SIGKILLs its own process in the middle of a restore's swap.

``BLOBSTATE_TEST_KILL_AT_RENAME=N``: the process dies right after the N-th rename that moves an entry into or out
of a restore's staging directory (the swap's own renames). Loaded through ``BLOBSTATE_PLUGINS=swap_killer``.
"""

from __future__ import annotations

import os
import signal

_real_rename = os.rename
_count = 0


def _rename(src, dst, *args, **kwargs):  # noqa: ANN001, ANN202 - os.rename's signature
    global _count
    _real_rename(src, dst, *args, **kwargs)
    if ".blobstate-restore-" in os.fspath(src) + os.fspath(dst):
        _count += 1
        if _count == int(os.environ.get("BLOBSTATE_TEST_KILL_AT_RENAME", "0")):
            os.kill(os.getpid(), signal.SIGKILL)


os.rename = _rename
