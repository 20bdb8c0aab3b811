"""This host's cache of a repository's immutable objects: checkpoint records and snapshot indexes, kept so that a
repository-wide verb run again (``list``, ``stats``, ``gc``) and a writer's next process (``blobstate backup``, a
driver: ``blobstate.commit.backup.StoreCommitter``) read from the blob store only what is new.

Like restic's local cache of its index and snapshot files, and safe for the same reason: the objects are never
overwritten under their names, and an entry is trusted only when its bytes match a checksum the caller read from
the repository in the same run. A snapshot index is checked against the size and CRC32C its record carries; a
record against the entity tag the log's listing gives it, when that tag is the MD5 of the object (S3's for a
single PUT). Anything else (a missing, stale, damaged or foreign entry) is a miss: the object is read from the
store as before, and written here afterwards. Nothing is ever decided from an entry that did not pass its check.
A writer also keeps what it wrote itself once it landed (its index after its commit point, its record when the
listing after the append names it by its MD5), and what its retention or gc deletes is discarded here (``discard``).

``<base>/cache/<repository id>/<2 hex>/<sha256 of the object's name>`` where ``<base>`` is the work directory's
base (the settings' ``work_base``: ``BLOBSTATE_WORK_DIR`` or platformdirs' user state dir) and the repository id is
the one its marker records, as for its store work directories (``workdir.host_key``: two repositories one URL
reaches never share a cache); ``cache`` is never a host key (hex digits). A writer whose work
directory is a path of its own (not a store's place under a base) keeps its cache inside it, ``object-cache/``.
Only the plain bytes of an unencrypted repository are kept (an encrypted repository's are not cached: nothing it
protects is written to this disk in the clear). Writes are all or nothing (``replace_file``); a cache that cannot
be written is no error, only slower. ``BLOBSTATE_OBJECT_CACHE=off`` turns it off (the settings' ``object_cache``:
the caller asks for no cache then).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from blobstate.local.files import replace_file

if TYPE_CHECKING:
    from blobstate.model.records import StoreKey

CACHE = "cache"
_log = logging.getLogger("blobstate.cache")


class ObjectCache:
    """Immutable objects by name, each entry served only when ``valid(bytes)`` holds for it.

    ``directory``: the repository's cache directory (``for_repository``). ``hits`` and ``misses`` count the lookups
    (what ``-v`` reports)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.hits = 0
        self.misses = 0

    @classmethod
    def for_repository(cls, repository: str, base: str) -> ObjectCache:
        """The cache of the repository whose host key (``workdir.host_key``: its id) is ``repository``, under
        ``base`` (the work directories' base)."""
        return cls(os.path.join(base, CACHE, repository))

    @classmethod
    def for_writer(cls, repository: str, key: StoreKey, work_dir: str) -> ObjectCache:
        """The cache a writer of ``key`` with the work directory ``work_dir`` uses: under the base that directory
        lies in when it is the store's work directory there (``workdir.store_work_dir``: shared with ``list`` and
        ``gc`` of that base), else inside ``work_dir`` itself (``workdir.OBJECT_CACHE``: a writer given a directory
        of its own writes nothing outside it, and its cache goes with it)."""
        from blobstate.local import workdir

        base = workdir.base_of(work_dir, repository, key)
        if base is None:
            return cls(os.path.join(work_dir, workdir.OBJECT_CACHE))
        return cls.for_repository(repository, base)

    @staticmethod
    def _digest(name: str) -> str:
        return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()

    def _path(self, name: str) -> str:
        digest = self._digest(name)
        return os.path.join(self.directory, digest[:2], digest)

    def get(self, name: str, valid: Callable[[bytes], bool]) -> bytes | None:
        """The cached bytes of ``name`` when there are any and ``valid`` accepts them; None otherwise (a miss)."""
        try:
            with open(self._path(name), "rb") as fh:
                data = fh.read()
        except OSError:
            self.misses += 1
            return None
        if not valid(data):
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, name: str, data: bytes) -> None:
        """Keep ``data`` as ``name``'s bytes (the caller checked them against the repository); a failure to write
        is logged, never raised."""
        path = self._path(name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            replace_file(path, data)
        except OSError as exc:
            _log.debug("object cache: cannot keep %s: %s", path, exc)

    def discard(self, names: Iterable[str]) -> None:
        """Forget the entries of ``names`` (objects the repository deleted; a name without an entry is no error);
        a failure to remove one is logged, never raised."""
        for name in names:
            _unlink(self._path(name))

    def retain_only(self, names: Iterable[str]) -> int:
        """Remove every entry (and any file a killed write left) but those of ``names``, the objects the repository
        holds: what another host deleted, or a process that ran without the cache, leaves nothing here for longer
        than until the next call (``blobstate gc`` of the whole repository). Returns how many files went; a failure
        to remove one is logged, never raised."""
        keep = {self._digest(name) for name in names}
        removed = 0
        try:
            folders = [entry.path for entry in os.scandir(self.directory) if entry.is_dir(follow_symlinks=False)]
        except OSError:
            return 0
        for folder in folders:
            try:
                stale = [entry.path for entry in os.scandir(folder) if entry.name not in keep]
            except OSError:
                continue
            removed += sum(_unlink(path) for path in stale)
        return removed


def _unlink(path: str) -> bool:
    """Remove the entry file ``path``: True when this call removed it; a missing one is no error, a failure is
    logged, never raised (``discard`` and ``retain_only``)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        _log.warning("object cache: cannot remove %s: %s", path, exc)
        return False
    return True
