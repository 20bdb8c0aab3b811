"""The ``dir`` local store: a plain directory, copied entry by entry (no knowledge of which files change).

The copy keeps what a restore gives back: directories (empty ones too), symbolic links as links (never followed),
permission bits and mtimes. Sockets, FIFOs and devices are refused (``UnsafePathError``): a restore could not give
them back. A file that changes while it is copied is copied again, up to ``COPY_ATTEMPTS`` times, then the
checkpoint fails naming it (``LocalStoreError``, tar's "file changed as we read it"): a committed snapshot never
holds a torn file. "Changed" is told by the file's stat (size, inode, mtime and ctime in ns) before and after the
copy, and for a file modified in the last ``RACY_NS`` (where a coarse clock could hide a write in the same tick: the
"racy timestamp" of git) by reading it again and comparing with the copy.

Every file may change in place, so every file is mutable: compared by CRC32C and XXH3-128, read at every commit
(never taken from the cache) and copied, never hard-linked, on restore. Unchanged files (same name, size and
checksums) are still not uploaded again.
"""

from __future__ import annotations

import os
import shutil
import stat
import time

from blobstate.errors import LocalStoreError, UnsafePathError
from blobstate.plugin.interfaces import LocalStore

COPY_ATTEMPTS = 5
RACY_NS = 2_000_000_000  # a file modified less than 2 s before its copy is compared byte for byte afterwards
_BUFFER = 1 << 20


def _identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _copy_bytes(src_fd: int, dst_fd: int) -> int:
    """Copy ``src_fd`` from its start into ``dst_fd``; returns the bytes copied (sendfile where it works)."""
    offset = 0
    try:
        while sent := os.sendfile(dst_fd, src_fd, offset, 1 << 30):
            offset += sent
        return offset
    except OSError:
        if offset:
            raise
    os.lseek(src_fd, 0, os.SEEK_SET)
    while data := os.read(src_fd, _BUFFER):
        os.write(dst_fd, data)
        offset += len(data)
    return offset


def _same_bytes(a: str, b: str) -> bool:
    with open(a, "rb", buffering=0) as fa, open(b, "rb", buffering=0) as fb:
        while True:
            da, db = fa.read(_BUFFER), fb.read(_BUFFER)
            if da != db:
                return False
            if not da:
                return True


def copy_stable_file(src: str, dst: str, *, name: str) -> None:
    """Copy the regular file ``src`` to the new file ``dst`` with its permission bits and mtime, retrying while it
    changes under the copy; ``LocalStoreError`` naming ``name`` after ``COPY_ATTEMPTS``."""
    for _ in range(COPY_ATTEMPTS):
        src_fd = os.open(src, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            before = os.fstat(src_fd)
            if not stat.S_ISREG(before.st_mode):
                raise UnsafePathError(f"{name!r} stopped being a regular file while it was copied")
            dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                copied = _copy_bytes(src_fd, dst_fd)
                os.fchmod(dst_fd, stat.S_IMODE(before.st_mode))
                os.utime(dst_fd, ns=(before.st_atime_ns, before.st_mtime_ns))
            finally:
                os.close(dst_fd)
            after = os.fstat(src_fd)
        finally:
            os.close(src_fd)
        if _identity(before) != _identity(after) or copied != after.st_size:
            continue
        racy = time.time_ns() - max(after.st_mtime_ns, after.st_ctime_ns) < RACY_NS
        if racy and not _same_bytes(src, dst):
            continue
        return
    raise LocalStoreError(f"file {name!r} changed as we read it ({COPY_ATTEMPTS} attempts): no consistent copy; "
                          "back it up when it is not being written, or retry")


class DirStore(LocalStore):
    """Copies ``source`` (a directory path) entry by entry into ``target_dir`` (see the module docstring)."""

    store_type = "dir"

    def create_checkpoint(self, source: object, target_dir: str) -> None:
        root = os.fspath(source)  # type: ignore[call-overload]
        if not os.path.isdir(root):
            raise FileNotFoundError(f"not a directory: {root}")
        os.mkdir(target_dir)  # FileExistsError when it exists: the target must be new
        try:
            self._copy_tree(root, target_dir)
        except BaseException:
            shutil.rmtree(target_dir, ignore_errors=True)
            raise

    def _copy_tree(self, root: str, target: str) -> None:
        dirs: list[tuple[str, os.stat_result]] = [(target, os.stat(root))]
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                rel = os.path.join(rel_dir, entry.name) if rel_dir else entry.name
                dst = os.path.join(target, rel)
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    os.mkdir(dst, 0o700)
                    dirs.append((dst, st))
                    stack.append(rel)
                elif stat.S_ISLNK(st.st_mode):
                    os.symlink(os.readlink(entry.path), dst)
                    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)
                elif stat.S_ISREG(st.st_mode):
                    copy_stable_file(entry.path, dst, name=rel)
                else:
                    raise UnsafePathError(f"{rel!r} is not a regular file, directory or symbolic link (a socket, "
                                          "FIFO or device): a restore could not give it back; move it out of the "
                                          "store")
        for path, st in reversed(dirs):  # children first: filling a directory moves its mtime
            os.chmod(path, stat.S_IMODE(st.st_mode))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

    def is_mutable(self, relative_path: str) -> bool:
        return True


def looks_like_dir(directory: str) -> bool:
    return os.path.isdir(directory)
