"""Measuring one operation: a child process timed on the wall clock, with its peak RSS (GNU time's ``%M``, the
``wait4`` rusage of the tool itself) and its I/O (this process's ``/proc/self/io`` before and after reaping it:
the kernel adds a reaped child's I/O counters to its parent's, the same way it does for rusage).

Page cache: ``drop_caches()`` writes ``3`` to ``/proc/sys/vm/drop_caches`` (root only); ``can_drop_caches()``
checks once whether it is permitted and effective here.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

DROP_CACHES = "/proc/sys/vm/drop_caches"
TIME_BIN = "/usr/bin/time"  # GNU time (Debian package ``time``)


class BenchError(RuntimeError):
    """A benchmarked command failed (non-zero exit); the message carries the tail of its stderr."""


@dataclass
class Sample:
    """One timed run of one operation.

    ``wall_s``: seconds, including a final ``syncfs`` of the destination (so a tool that does not fsync is not
    favoured). ``peak_rss_mib``: MiB (2**20 bytes), the largest resident set of the child or of a descendant
    it reaped.
    ``read_bytes``/``write_bytes``: bytes the block layer read / the page cache dirtied (``/proc/*/io``);
    ``rchar``/``wchar``: bytes through read/write syscalls (files, pipes and sockets). ``requests``: HTTP
    requests the S3 server answered, by method (``None`` for file:// runs). ``repo_bytes_added``: bytes of
    objects new or changed in the repository (or destination) after the operation, measured by listing it.
    """

    wall_s: float
    peak_rss_mib: float
    read_bytes: int
    write_bytes: int
    rchar: int
    wchar: int
    requests: dict[str, int] | None = None
    repo_bytes_added: int | None = None
    repo_objects_added: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    cpu_s: float | None = None  # user + system CPU seconds of the child and what it reaped (less load-sensitive)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_self_io() -> dict[str, int]:
    """This process's I/O counters (``rchar``, ``wchar``, ``read_bytes``, ``write_bytes``, ...), bytes."""
    out: dict[str, int] = {}
    with open("/proc/self/io") as fh:
        for line in fh:
            name, _, value = line.partition(":")
            out[name.strip()] = int(value)
    return out


def drop_caches() -> None:
    """Write back dirty pages and drop the page cache, dentries and inodes. Raises ``OSError`` if not allowed."""
    os.sync()
    with open(DROP_CACHES, "w") as fh:
        fh.write("3\n")


def _cached_kb() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("Cached:"):
                return int(line.split()[1])
    return 0


def can_drop_caches() -> tuple[bool, str]:
    """Whether dropping the page cache is permitted and visibly shrinks ``Cached`` in ``/proc/meminfo``."""
    try:
        before = _cached_kb()
        drop_caches()
        after = _cached_kb()
    except OSError as exc:
        return False, f"cannot drop the page cache ({exc.strerror}); every run measured warm"
    if before > 64 * 1024 and after > before * 0.9:
        return False, "drop_caches is accepted but has no effect here; every run measured warm"
    return True, "page cache dropped before every timed operation (cold)"


def warm(paths: Sequence[str]) -> None:
    """Read every file under ``paths`` once, so the following operation finds them in the page cache."""
    for top in paths:
        if not os.path.exists(top):
            continue
        if os.path.isfile(top):
            _read_all(top)
            continue
        for root, _dirs, files in os.walk(top):
            for name in files:
                _read_all(os.path.join(root, name))


def _read_all(path: str) -> None:
    try:
        with open(path, "rb", buffering=0) as fh:
            while fh.read(1 << 20):
                pass
    except OSError:
        pass


def syncfs(path: str) -> None:
    """``syncfs(2)`` on the filesystem holding ``path`` (through ``sync -f``)."""
    subprocess.run(["sync", "-f", path], check=False)


def run_measured(argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
                 sync_path: str | None = None, log_path: str | None = None,
                 timeout_s: float = 3600.0) -> tuple[Sample, str]:
    """Run ``argv`` to completion and measure it; returns the sample and the child's stdout (text).

    stdout/stderr go to files (no reader threads in this process, so the I/O delta is the child's). Raises
    ``BenchError`` on a non-zero exit or a timeout (the child is killed by its PID after ``timeout_s``).
    """
    import tempfile

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        io_before = read_self_io()
        start = time.perf_counter()
        # GNU time in between: a child's maxrss starts at the high-water mark of the address space it exec'd
        # from, so exec'ing straight from this (large) process would report our RSS, not the tool's.
        rss_file = tempfile.NamedTemporaryFile(prefix="bench-rss-", delete=False)
        rss_file.close()
        wrapped = [TIME_BIN, "-f", "%M", "-o", rss_file.name, "--", *argv]
        proc = subprocess.Popen(wrapped, stdout=out, stderr=err, env=dict(env) if env else None, cwd=cwd)
        import threading

        timer = threading.Timer(timeout_s, proc.kill)  # kills this child by its PID only
        timer.start()
        try:
            _pid, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if sync_path:
            syncfs(sync_path)
        wall = time.perf_counter() - start
        io_after = read_self_io()
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        peak_kb = _read_peak_kb(rss_file.name)
    if log_path:
        with open(log_path, "a") as fh:
            fh.write(f"$ {' '.join(argv)}\n[exit {proc.returncode}, {wall:.3f} s]\n{stderr[-4000:]}\n")
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv[:3])} ... exited {proc.returncode}: {stderr.strip()[-1500:]}")

    def delta(name: str) -> int:
        return max(0, io_after.get(name, 0) - io_before.get(name, 0))

    sample = Sample(
        wall_s=wall,
        peak_rss_mib=peak_kb / 1024.0 if peak_kb is not None else usage.ru_maxrss / 1024.0,
        read_bytes=delta("read_bytes"),
        write_bytes=delta("write_bytes"),
        rchar=delta("rchar"),
        wchar=delta("wchar"),
        cpu_s=usage.ru_utime + usage.ru_stime,
    )
    return sample, stdout


def _read_peak_kb(path: str) -> int | None:
    """The ``%M`` (peak RSS, KiB) GNU time wrote to ``path`` (last line; earlier lines may report a signal)."""
    try:
        with open(path) as fh:
            lines = [ln.strip() for ln in fh if ln.strip()]
        os.unlink(path)
    except OSError:
        return None
    try:
        return int(lines[-1]) if lines else None
    except ValueError:
        return None
