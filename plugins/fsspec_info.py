"""What the fsspec blob store reads from a URL and from fsspec's ``info`` dicts, without importing fsspec: the root of
a local URL, an object's last-modified time and its entity tag, for every backend fsspec reaches."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

LOCAL_PROTOCOLS = ("file", "local")


def local_root(url: str, options: dict[str, Any]) -> str | None:
    """The root fsspec gives a plain ``file://``/``local://`` URL (``url_to_fs(url)[1]`` without its trailing ``/``,
    following ``LocalFileSystem._strip_protocol``; checked against it in ``tests/contract``), or None when fsspec
    must answer (another protocol, a ``::`` chain, a ``protocol`` option, a non-POSIX host): a local repository
    opens without importing fsspec (40-100 ms of a CLI start-up: asyncio, ssl, an entry-point scan)."""
    protocol, sep, path = url.partition("://")
    if not sep or protocol not in LOCAL_PROTOCOLS or "::" in url or "protocol" in options or os.sep != "/":
        return None
    if path.startswith("~"):
        path = os.path.expanduser(path)
    elif not path.startswith("/"):
        path = f"{os.getcwd()}/{'' if path == '.' else path.removeprefix('./')}"
    return path.rstrip("/")


def modified_ms(info: dict[str, Any]) -> int | None:
    """Last-modified time in ms from an fsspec ``info`` dict of any backend (local, s3, gcs, azure, memory)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "creation_time"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return int(value * 1000)
        if isinstance(value, datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, str):
            try:
                return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)
            except ValueError:
                continue
    return None


def etag(info: dict[str, Any]) -> str | None:
    """The entity tag in an fsspec ``info`` dict (s3fs: ``ETag``; adlfs, gcsfs: ``etag``), or None."""
    tag = info.get("ETag") or info.get("etag")
    return str(tag) if tag else None
