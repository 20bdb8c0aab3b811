"""Forging hostile metadata for the issue-14 suite: the repository's objects read and written straight through fsspec
(never through blobstate, whose own checks are what is under test), the same way on file:// and moto S3, and a
journal written into a store's work directory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from blobstate.config.settings import Settings
from blobstate.journal import events as ev
from blobstate.journal.file import MAGIC, encode
from blobstate.model.records import StoreKey
from blobstate.repository.host import located_work_dir


class RawRepository:
    """A repository (``fault_harness.Target``) seen as plain objects: names relative to the repository root.

    A fresh filesystem instance per call (``skip_instance_cache`` in the S3 target's options, and ``invalidate_cache``
    here): a listing made before a subprocess wrote is never answered from a cache."""

    def __init__(self, target: Any) -> None:
        self.url = target.url
        self.options = dict(target.options)

    def _fs(self) -> tuple[fsspec.AbstractFileSystem, str]:
        fs, root = fsspec.core.url_to_fs(self.url, **self.options)
        fs.invalidate_cache()
        return fs, root.rstrip("/")

    def objects(self, prefix: str) -> set[str]:
        """Every object (file) whose name starts with the folder ``prefix``."""
        fs, root = self._fs()
        try:
            found = fs.find(f"{root}/{prefix}")
        except FileNotFoundError:
            return set()
        return {path[len(root) + 1:] for path in found}

    def read(self, name: str) -> bytes:
        fs, root = self._fs()
        return fs.cat_file(f"{root}/{name}")

    def write(self, name: str, data: bytes) -> None:
        fs, root = self._fs()
        path = f"{root}/{name}"
        if isinstance(fs, LocalFileSystem):
            fs.makedirs(os.path.dirname(path), exist_ok=True)
        fs.pipe_file(path, data)


def store_objects(raw: RawRepository, key: StoreKey) -> set[str]:
    """A store's blobs, indexes and checkpoint records (file log), leases excluded."""
    return {name for name in raw.objects(key.prefix) | raw.objects(f"checkpoints/{key.prefix}")
            if "/ttl/" not in name}


def forge_journal(work_base: Path, repo_url: str, key: StoreKey, events: list[ev.Event],
                  storage_options: dict | None = None) -> None:
    """Write ``events`` as the journal of ``key``'s work directory for the repository ``repo_url`` (named by its id:
    its marker is read with ``storage_options``)."""
    work = located_work_dir(repo_url, key, Settings.for_call(), str(work_base), storage_options)
    os.makedirs(os.path.join(work, "checkpoints"), exist_ok=True)
    with open(os.path.join(work, "journal.log"), "wb") as fh:
        fh.write(MAGIC + b"".join(encode(e) for e in events))
