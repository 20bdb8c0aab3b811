"""The ``blobstate`` entry points of the installed distributions: read once per process, and from a small cache
while nothing installed has changed.

``importlib.metadata.entry_points`` opens every distribution on ``sys.path`` (about 160 here) and parses each one's
``entry_points.txt``, and naming an entry point's distribution and version parses its ``METADATA`` with the email
package: 5-15 ms of a CLI command's start-up, on every command, for the one or two lines the ``blobstate`` group
has. So the answer is kept in ``<user cache dir>/blobstate/entry-points.json`` (``BLOBSTATE_CACHE_DIR`` overrides
the directory), under a fingerprint of what can change it: each ``sys.path`` entry with its mtime, and each
distribution's metadata directory in it (``*.dist-info``, ``*.egg-info``) with the mtimes of the directory and of
its ``entry_points.txt`` (and that file's size). Installing, upgrading or removing a distribution (pip creates and
renames those directories, which moves the mtime of the directory holding them), editing an ``entry_points.txt``
in place, or a ``PYTHONPATH`` naming another folder all change the fingerprint, and the group is read again with
``importlib.metadata``. Taking the fingerprint is a ``stat`` per distribution (under 1 ms). A cache that cannot
be read or written only costs the scan; ``BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD=1`` reads neither.

The cache is a start-up optimisation, nothing more: what it holds is the same list ``importlib.metadata`` gives
(name, ``module:attr`` value, distribution and version), and an entry point is still imported and registered as
before (``blobstate.plugin.manager``). The fingerprint is a stat key, as the checksum cache's are
(``blobstate.local.checksum``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys

import msgspec

GROUP = "blobstate"
CACHE_NAME = "entry-points.json"
_FORMAT = 1
_METADATA_DIRS = (".dist-info", ".egg-info")


# A msgspec Struct, not a dataclass: created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class EntryPointInfo(msgspec.Struct, frozen=True):
    """One entry point of the group: its ``name``, its ``value`` (``module`` or ``module:attr``), and the
    distribution (name, version) that declares it."""

    name: str
    value: str
    distribution: str
    version: str


def fingerprint(path: list[str] | None = None) -> str:
    """A digest of what decides the installed entry points (see the module docstring) over ``path`` (default
    ``sys.path``)."""
    parts: list[str] = [sys.version, sys.prefix]
    for entry in path if path is not None else sys.path:
        where = entry or os.getcwd()
        try:
            st = os.stat(where)
        except OSError:
            parts.append(f"{entry}\0-")
            continue
        parts.append(f"{entry}\0{st.st_mtime_ns}\0{st.st_size}")
        if not os.path.isdir(where):
            continue  # a zip file: its mtime and size stand for what it holds
        try:
            with os.scandir(where) as it:
                names = sorted(e.name for e in it if e.name.endswith(_METADATA_DIRS))
        except OSError:
            continue
        for name in names:
            info = os.path.join(where, name)
            parts.append(f"{name}\0{_stat(info)}\0{_stat(os.path.join(info, 'entry_points.txt'))}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def _stat(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_mtime_ns}:{st.st_size}"


def cache_path(base: str | None = None) -> str | None:
    """Where the cache lives: under ``base`` (the settings' ``cache_dir``, ``BLOBSTATE_CACHE_DIR``) or the user
    cache dir (platformdirs); None if neither can be named."""
    if not base:
        try:
            import platformdirs

            base = platformdirs.user_cache_dir("blobstate", appauthor=False)
        except Exception:  # noqa: BLE001 - no cache, only a slower start
            return None
    return os.path.join(base, CACHE_NAME)


def scan() -> tuple[EntryPointInfo, ...]:
    """The group's entry points as ``importlib.metadata`` finds them (every distribution on ``sys.path``)."""
    from importlib import metadata

    found = []
    for ep in metadata.entry_points(group=GROUP):
        dist = ep.dist
        found.append(EntryPointInfo(ep.name, ep.value, dist.name if dist else "", dist.version if dist else ""))
    return tuple(found)


def _read_cache(path: str, key: str) -> tuple[EntryPointInfo, ...] | None:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        if doc.get("format") != _FORMAT or doc.get("fingerprint") != key:
            return None
        return tuple(EntryPointInfo(str(e["name"]), str(e["value"]), str(e["distribution"]), str(e["version"]))
                     for e in doc["entryPoints"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_cache(path: str, key: str, found: tuple[EntryPointInfo, ...]) -> None:
    doc = {"format": _FORMAT, "fingerprint": key,
           "entryPoints": [{"name": e.name, "value": e.value, "distribution": e.distribution, "version": e.version}
                           for e in found]}
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)  # atomic: a concurrent reader sees the old cache or the new one
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


@functools.cache
def entry_points(cache_dir: str | None = None) -> tuple[EntryPointInfo, ...]:
    """The ``blobstate`` entry points, read once per process: from the cache (under ``cache_dir``, default the user
    cache dir) when its fingerprint matches, else by ``scan()`` (and the cache rewritten).
    ``entry_points.cache_clear()`` reads them again."""
    path = cache_path(cache_dir)
    key = fingerprint()
    if path is not None:
        cached = _read_cache(path, key)
        if cached is not None:
            return cached
    found = scan()
    if path is not None:
        _write_cache(path, key, found)
    return found
