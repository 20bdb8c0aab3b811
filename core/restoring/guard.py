"""What a restore must never touch: the repository, its checkpoint log and the work directory.

A restore makes its destination hold exactly a snapshot's entries, so whatever else the destination holds is
removed (``--force`` only lets it replace a directory no restore made). ``check_destination`` refuses, before
anything changes, a destination that

- is one of the protected paths, or contains one (the restore would remove it with the rest), or
- lies inside the repository or the store's own work directory (it would put foreign files among their objects,
  and a forced restore there would remove them). Inside the work directory *base* but outside every store's own
  directory (``--work-dir /data``, restoring into ``/data/mystore``) is allowed: nothing there is touched.

Protected paths are local ones only: a ``file://`` repository (and the file log inside it), a SQLite log's
database file, the work directory base and the store's own work directory. Paths are compared resolved
(``os.path.realpath``: symbolic links followed, ``..`` removed), so a link to the repository is the repository.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from blobstate.errors import UnsafeDestination


def local_path(url: str | None) -> str | None:
    """The local file system path a repository or log URL names (``file://``, a plain path, a SQLite URL), or
    None for a remote one. A relative SQLite path is relative to the working directory (SQLAlchemy's form)."""
    if not url:
        return None
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    if scheme == "file":
        return url[len("file://"):] if url.startswith("file://") else url
    if scheme.split("+", 1)[0] == "sqlite":
        from sqlalchemy.engine import make_url

        database = make_url(url).database
        return database if database and database != ":memory:" else None
    return None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_destination(dest: str, protected: Iterable[tuple[str, str | None, bool]]) -> None:
    """Raise ``UnsafeDestination`` (exit 2) when ``dest`` is or contains one of ``protected``, or lies inside one
    whose flag says so: ``(what, local path or None, refuse inside)`` triples, ``("repository", "/backups",
    True)``; see the module docstring."""
    target = os.path.realpath(os.path.abspath(dest))
    for what, path, refuse_inside in protected:
        if not path:
            continue
        guarded = os.path.realpath(os.path.abspath(os.path.expanduser(path)))
        if _inside(guarded, target):
            relation = "is" if guarded == target else "contains"
            raise UnsafeDestination(f"refusing to restore into {target}: it {relation} the {what} ({guarded}), "
                                    "which a restore would delete with everything else the snapshot lacks "
                                    "(--force or not). Choose a directory outside it")
        if refuse_inside and _inside(target, guarded):
            raise UnsafeDestination(f"refusing to restore into {target}: it lies inside the {what} ({guarded}), "
                                    "which a restore must never write into. Choose a directory outside it")


def check_restore_destination(dest: str, *, repo_url: str, log_url: str | None, work_dir: str,
                              work_base: str) -> None:
    """``check_destination`` with what every restore protects: the repository, its log, the store's work
    directory (nothing inside any of them) and the work directory base."""
    check_destination(dest, [("repository", local_path(repo_url), True), ("checkpoint log", local_path(log_url), True),
                             ("work directory", work_dir, True), ("work directory", work_base, False)])
