"""A ``file://`` repository on the local disk: durable writes, and no symlink followed inside it.

Durability (RocksDB BackupEngine's ``sync`` option, on by default there too): every file ``put`` writes (blob,
lease, index, checkpoint record) is fsynced before ``put`` returns, and so is its directory entry and every
directory it had to create (each new directory's parent is fsynced), so a power loss after the checkpoint record
landed never leaves the record pointing at an empty or missing file. ``BLOBSTATE_FILE_FSYNC=0`` (the settings'
``file_fsync``, handed to ``LocalRepository``) turns this off; it exists to measure the cost (``bench/``), never for
production.

Containment: the repository root itself may be (or sit under) a symlink, but below it nothing is followed: a
symlinked directory or file anywhere under the root makes read, write, list and delete raise ``UnsafePathError``
(exit 3), so a hostile or mixed-up repository can never make gc delete, or restore read, a file outside it.
Every path is checked component by component with ``lstat`` and opened with ``O_NOFOLLOW``.

Rewriting an object in place (the repository marker: ``replace_if``) is a compare-and-swap: an exclusive ``flock``
on the object's current file (re-taken when a rename replaced the file while it waited), its bytes compared with the
version read before, the new bytes written to a temporary file beside it and fsynced, renamed over it, the directory
fsynced. A reader sees the old bytes or the new ones, never a part; a SIGKILL at any point leaves one of the two
(and at most a temporary file, which the next rewrite removes under the same lock); of two rewrites from one
version the second is refused. Why not a lock file or a rename-away: a lock file a SIGKILLed writer leaves behind
would block every later rewrite, and renaming the object away to claim it leaves a moment with no marker at all,
which a first backup would take for an empty location.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from blobstate.errors import ObjectChangedError, StorageError, UnsafePathError
from blobstate.local.files import fsync_dir

FSYNC_ENV = "BLOBSTATE_FILE_FSYNC"
COPY_BUFFER = 1 << 20  # bytes per copy step when the kernel cannot copy for us (1 MiB)
REWRITE_LOCK_WAIT_S = 30.0  # how long ``replace_if`` waits for another rewrite of the same object to finish
REWRITE_READ_MAX = (1 << 20) + 1  # bytes of the current file compared: past a metadata object's size, it differs anyway
REWRITE_TMP = ".tmp-rewrite-"  # ``<name>.tmp-rewrite-<hex>``: ``replace_if``'s temporary files (hidden by listings)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LocalRepository:
    """File operations under ``root`` (an absolute local path) that never follow a symlink below it.

    Paths given to every method are absolute paths under ``root`` (as the fsspec store builds them). Raises
    ``UnsafePathError`` for a symlink below the root or a path outside it; ``FileNotFoundError`` as ``open`` does.
    ``fsync``: False skips the fsyncs (the settings' ``file_fsync``: a benchmark switch).
    """

    def __init__(self, root: str, *, fsync: bool = True) -> None:
        self.root = os.path.abspath(root) if root else os.sep
        self.sync = fsync

    def _parts(self, path: str) -> list[str]:
        rel = os.path.relpath(path, self.root)
        if rel == ".":
            return []
        if rel == ".." or rel.startswith(".." + os.sep) or os.path.isabs(rel):
            raise UnsafePathError(f"path outside the repository: {path!r}")
        return rel.split(os.sep)

    def check(self, path: str) -> None:
        """Refuse ``path`` when any existing component below the root is a symlink."""
        current = self.root
        for part in self._parts(path):
            current = os.path.join(current, part)
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                return
            except NotADirectoryError:
                return
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(f"symlink inside the repository, not followed: "
                                      f"{os.path.relpath(current, self.root)!r}")

    # -- writes ----------------------------------------------------------------------------------------------
    def makedirs(self, directory: str) -> None:
        """Create ``directory`` and missing parents below the root; each new one made durable in its parent."""
        self.check(directory)
        if not os.path.isdir(self.root):  # the root and above: ordinary directories (symlinks allowed there)
            os.makedirs(self.root, exist_ok=True)
            if self.sync:
                fsync_dir(os.path.dirname(self.root), strict=True)
        missing = []
        current = directory
        while current != self.root and not os.path.isdir(current):
            missing.append(current)
            current = os.path.dirname(current)
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except FileExistsError:
                if os.path.islink(d) or not os.path.isdir(d):
                    raise UnsafePathError(f"not a directory inside the repository: {d!r}") from None
                continue
            if self.sync:
                fsync_dir(os.path.dirname(d), strict=True)

    def open_write(self, path: str, *, exclusive: bool = False) -> int:
        """A new file descriptor for writing ``path`` (created or truncated; ``exclusive``: must not exist)."""
        self.makedirs(os.path.dirname(path))
        flags = os.O_WRONLY | os.O_CREAT | NOFOLLOW | (os.O_EXCL if exclusive else os.O_TRUNC)
        try:
            return os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(f"symlink inside the repository, not followed: {path!r}") from None
            raise

    def finish(self, fd: int, path: str) -> None:
        """fsync the written file and its directory entry (when durability is on), then close it."""
        try:
            if self.sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if self.sync:
            fsync_dir(os.path.dirname(path), strict=True)

    def write_bytes(self, path: str, data: bytes) -> None:
        fd = self.open_write(path)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        except BaseException:
            os.close(fd)
            raise
        self.finish(fd, path)

    def write_range(self, path: str, source: str, offset: int, length: int) -> None:
        """Copy ``length`` bytes of the local file ``source`` from ``offset`` into ``path`` (in the kernel when it
        can: ``copy_file_range``). Raises ``StorageError`` when the source is shorter."""
        fd = self.open_write(path)
        try:
            with open(source, "rb") as src:
                _copy_range(src.fileno(), fd, offset, length, source)
        except BaseException:
            os.close(fd)
            raise
        self.finish(fd, path)

    def link_into_place(self, tmp: str, path: str) -> None:
        """Hard-link the durable temp file ``tmp`` as ``path`` (``FileExistsError`` if it exists), drop ``tmp``,
        and make the new entry durable."""
        self.check(path)
        try:
            os.link(tmp, path, follow_symlinks=False)
        finally:
            os.unlink(tmp)
        if self.sync:
            fsync_dir(os.path.dirname(path), strict=True)

    def replace_if(self, path: str, data: bytes, expected: str, version_of: Callable[[bytes], str]) -> None:
        """Replace the file ``path`` with ``data`` only while ``version_of`` its bytes is ``expected``: the
        compare-and-swap of the module docstring (always durable: the file and the directory are fsynced whatever
        ``BLOBSTATE_FILE_FSYNC`` says, as for an exclusive create). Raises ``ObjectChangedError`` when the file
        changed or vanished (nothing written), ``StorageError`` when another rewrite holds it past
        ``REWRITE_LOCK_WAIT_S``."""
        self.check(path)
        deadline = time.monotonic() + REWRITE_LOCK_WAIT_S
        while True:
            fd = self._locked(path, deadline)
            try:
                if fd is None:
                    continue  # replaced while we waited: lock the file the name holds now
                current = _read_fd(fd)
                if version_of(current) != expected:
                    raise ObjectChangedError(f"{os.path.basename(path)} changed since it was read")
                self._swap(path, data)
                return
            finally:
                if fd is not None:
                    os.close(fd)  # releases the lock (on the file the rename just unlinked)

    def _locked(self, path: str, deadline: float) -> int | None:
        """A descriptor of ``path``'s current file holding its exclusive ``flock``; None when a rename replaced the
        file while this waited for it."""
        try:
            fd = os.open(path, os.O_RDWR | NOFOLLOW)  # writable: an exclusive lock needs it on NFS
        except FileNotFoundError:
            raise ObjectChangedError(f"{os.path.basename(path)} vanished since it was read") from None
        except PermissionError:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StorageError(f"{path} is being rewritten by another process (locked for more than "
                                           f"{REWRITE_LOCK_WAIT_S:.0f} s)") from None
                    time.sleep(0.005)  # another rewrite holds it for a write, an fsync and a rename
            held, now = os.fstat(fd), os.lstat(path)
        except FileNotFoundError:
            os.close(fd)
            raise ObjectChangedError(f"{os.path.basename(path)} vanished since it was read") from None
        except BaseException:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) != (now.st_dev, now.st_ino):
            os.close(fd)
            return None
        return fd

    def _swap(self, path: str, data: bytes) -> None:
        """Under the lock: the leftovers of killed rewrites removed, ``data`` written to a temporary file, fsynced and
        renamed over ``path``, the directory fsynced."""
        directory, name = os.path.split(path)
        for other in os.listdir(directory):
            if other.startswith(name + REWRITE_TMP):
                self.remove(os.path.join(directory, other))
        tmp = f"{path}{REWRITE_TMP}{uuid.uuid4().hex}"
        fd = self.open_write(tmp, exclusive=True)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            self.remove(tmp)
            raise
        os.close(fd)
        try:
            os.rename(tmp, path)
        except BaseException:
            self.remove(tmp)
            raise
        fsync_dir(directory, strict=True)

    # -- reads, deletes, listing -----------------------------------------------------------------------------
    def open_read(self, path: str) -> Any:
        """``path`` opened for binary reading, never through a symlink."""
        self.check(path)
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePathError(f"symlink inside the repository, not followed: {path!r}") from None
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                raise FileNotFoundError(path) from None
            raise
        return os.fdopen(fd, "rb")

    def read_bytes(self, path: str) -> bytes:
        with self.open_read(path) as fh:
            return fh.read()

    def exists(self, path: str) -> bool:
        self.check(path)
        return os.path.lexists(path)

    def remove(self, path: str) -> None:
        """Unlink ``path``; a missing file is fine."""
        self.check(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def remove_empty_dirs(self, directory: str) -> None:
        """Remove ``directory`` and then each parent below the root, while they are empty (a missing one is fine; a
        non-empty one ends it)."""
        self._parts(directory)
        current = os.path.abspath(directory)
        while current != self.root and current.startswith(self.root + os.sep):
            self.check(current)
            try:
                os.rmdir(current)
            except FileNotFoundError:
                pass
            except OSError:  # not empty (or not a directory): the objects of others live there
                return
            current = os.path.dirname(current)

    def walk(self, base: str) -> Iterator[tuple[str, os.stat_result]]:
        """Every regular file under ``base`` with its ``lstat``; a symlink anywhere raises ``UnsafePathError``."""
        self.check(base)
        if not os.path.isdir(base):
            return
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            for name in [*dirnames, *filenames]:
                full = os.path.join(dirpath, name)
                if os.path.islink(full):
                    raise UnsafePathError(f"symlink inside the repository, not followed: "
                                          f"{os.path.relpath(full, self.root)!r}")
            for name in filenames:
                full = os.path.join(dirpath, name)
                try:
                    st = os.lstat(full)
                except FileNotFoundError:
                    continue  # removed since the directory was read (a temp file linked into place, a delete)
                yield full, st


def _copy_range(src: int, dst: int, offset: int, length: int, what: str) -> None:
    remaining, pos = length, offset
    use_kernel = hasattr(os, "copy_file_range")
    while remaining:
        n = 0
        if use_kernel:
            try:
                n = os.copy_file_range(src, dst, min(remaining, 1 << 30), pos)
            except OSError:
                use_kernel = False
                continue
        else:
            data = os.pread(src, min(COPY_BUFFER, remaining), pos)
            n = len(data)
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view):]
        if n == 0:
            raise StorageError(f"{what} shrank while it was uploaded")
        remaining -= n
        pos += n


def _read_fd(fd: int, limit: int = REWRITE_READ_MAX) -> bytes:
    """The bytes of the open file ``fd`` from its start, at most ``limit`` of them."""
    chunks, offset = [], 0
    while offset < limit:
        data = os.pread(fd, min(COPY_BUFFER, limit - offset), offset)
        if not data:
            break
        chunks.append(data)
        offset += len(data)
    return b"".join(chunks)
