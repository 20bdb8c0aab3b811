"""Local leftovers of a store on a host: scratch directories held by a lock while used, swept once abandoned.

A partition snapshot task copies its partition into a RocksDB local checkpoint (hard links to the partition's SSTs:
their disk space is only freed once every link is gone) and uploads it after letting go of the partition; the
tasks of ``read_state``, ``write_state`` and ``blobstate spark rescale`` restore or fill scratch RocksDB copies
(``blobstate.spark.data.executor.tasks``), and ``write_state`` of a driver store fills one on the driver. A task
killed with its driver (or its executor) leaves that directory behind, and nothing else would ever remove it. So
every such directory is *held* (``blobstate.local.held``: a lock file taken before the directory exists, released
after it is removed) and swept by the next process there. A partition task sweeps its partition's stale snapshot
checkpoints; every scratch directory taken (``scratch_dir``) and every state read, write or rescale the driver starts
(``sweep_scratch``) sweeps the stale scratch directories of *every* kind in its directory (``SCRATCH_KINDS``), so a
rerun that runs other partitions, fewer of them, or no task at all (it finds the copy already committed) still
removes what a killed run left.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

from blobstate.local.held import DANGLING_AFTER_S, HELD, MAX_SWEEP, held_dir, new_held_dir, sweep

#: the names of held scratch directories (``<kind>-...``): the state tasks' (``ReadPlan.scratch``,
#: ``WritePlan.scratch``, a rescale's) and a driver store's write
SCRATCH_KINDS = ("blobstate-read-", "blobstate-write-", "blobstate-rescale-read-", "blobstate-rescale-write-")


@contextlib.contextmanager
def scratch_dir(parent: str | None, prefix: str) -> Iterator[str]:
    """A new held directory ``<parent>/<prefix>XXXX`` (``parent`` None: the temporary directory; ``prefix`` starts
    with one of ``SCRATCH_KINDS``), after sweeping the abandoned scratch directories of ``parent``
    (``sweep_scratch``); removed at the end."""
    with new_held_dir(sweep_scratch(parent), prefix) as path:
        yield path


def sweep_scratch(parent: str | None) -> str:
    """Sweep the abandoned scratch directories of every kind (``SCRATCH_KINDS``) in ``parent`` (None: the temporary
    directory; created when missing); returns its path."""
    parent = parent or tempfile.gettempdir()
    sweep(parent, tuple(f"{kind}*" for kind in SCRATCH_KINDS))
    return parent


__all__ = ["DANGLING_AFTER_S", "HELD", "MAX_SWEEP", "SCRATCH_KINDS", "held_dir", "scratch_dir", "sweep",
           "sweep_scratch"]
