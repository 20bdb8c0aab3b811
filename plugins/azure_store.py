"""Azure Blob Storage blob store (adlfs) with native TTL: blob index tags and a lifecycle management policy.

Tag names use underscores: azurite cannot query tag names with hyphens.

Native mode (``ttl_mode="native"``): ``put`` with a TTL uploads the blob with the index tags
``blobstate_ttl=<days>`` (what the lifecycle policy's ``blobIndexMatch`` filters on) and ``blobstate_expires=<ms
since the epoch, zero-padded to 20 digits>`` in the same call. ``expired()`` asks the service for blobs whose
``blobstate_expires`` tag is <= now (``Find Blobs by Tags``: string comparison, hence the padding), so ``blobstate
gc`` also sweeps where the policy is not installed (azurite). ``remove_ttl`` removes both tags.

Lifecycle policies are a management-plane (ARM) call that a storage data-plane credential cannot make:
``lifecycle_rule`` returns the policy JSON for ``az storage account management-policy create --policy @file``
and ``install_lifecycle`` returns False.

The checkpoint log's exclusive create is an upload with ``overwrite=False`` (``If-None-Match: *``); adlfs raises
``FileExistsError`` when the blob exists.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

import adlfs  # noqa: F401 - this backend's dependencies: a missing extra fails at resolution (blobstate.specs)
import azure.storage.blob  # noqa: F401

from blobstate.errors import StorageError
from blobstate.interfaces import FileRange, PutRequest
from blobstate.plugins.fsspec_store import FsspecBlobStore, is_lease, lease_id

TTL_TAG = "blobstate_ttl"
EXPIRES_TAG = "blobstate_expires"
EXPIRES_DIGITS = 20
DAY_MS = 86_400_000
T = TypeVar("T")


def ttl_days(ttl_ms: int) -> int:
    """Whole days a lifecycle rule needs to cover ``ttl_ms`` (at least 1)."""
    return max(1, math.ceil(ttl_ms / DAY_MS))


class AzureBlobStore(FsspecBlobStore):
    """``BlobStore`` on Azure Blob Storage through adlfs.

    ``url``: ``az://container/prefix`` (also ``abfs://``, ``abfss://``); ``storage_options`` go to
    ``adlfs.AzureBlobFileSystem`` (``connection_string``, ``account_name``, ``account_key``, ``sas_token``,
    ``credential``...). Raises ``MissingDependencyError`` without adlfs / azure-storage-blob.
    """

    native_ttl = True

    ttl_tag = TTL_TAG

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8) -> None:
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency)
        self.container, _, self.key_prefix = self.root.partition("/")

    def _sync(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run an async SDK call on adlfs's event loop (the loop its clients are bound to)."""
        from fsspec.asyn import sync

        return sync(self.fs.loop, fn)

    def _blob_name(self, blob_id: str) -> str:
        return self.path(blob_id).split("/", 1)[1]

    # -- writes ----------------------------------------------------------------------------------------------
    def _ttl_tags(self, ttl_ms: int) -> dict[str, str]:
        expires = int(time.time() * 1000) + ttl_ms
        return {TTL_TAG: str(ttl_days(ttl_ms)), EXPIRES_TAG: f"{expires:0{EXPIRES_DIGITS}d}"}

    def _put_kwargs(self, request: PutRequest) -> dict[str, Any]:
        if self.ttl_mode == "native" and request.ttl_ms is not None:
            return {"tags": self._ttl_tags(request.ttl_ms)}
        return {}

    def _write_range(self, path: str, source: FileRange, request: PutRequest) -> None:
        """A part of a file (one chunk, at most ``chunk_size`` bytes) in one upload call, tags included."""
        with open(source.path, "rb") as src:
            src.seek(source.offset)
            data = src.read(source.length)
        if len(data) != source.length:
            raise StorageError(f"{source.path} shrank while it was uploaded")
        self.fs.pipe_file(path, data, **self._put_kwargs(request))

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        """Upload with ``overwrite=False``; ``FileExistsError`` when the blob exists."""
        self.fs.pipe_file(self.path(blob_id), data, overwrite=False)

    # -- TTL -------------------------------------------------------------------------------------------------
    def _tags(self, blob_id: str) -> dict[str, str] | None:
        """The blob's index tags, or None when the blob does not exist."""
        from azure.core.exceptions import ResourceNotFoundError

        async def call() -> dict[str, str] | None:
            async with self.fs.service_client.get_blob_client(self.container, self._blob_name(blob_id)) as bc:
                try:
                    return dict(await bc.get_blob_tags())
                except ResourceNotFoundError:
                    return None

        return self._sync(call)

    def remove_ttl(self, blob_id: str) -> None:
        if self.ttl_mode != "native":
            super().remove_ttl(blob_id)
            return
        from azure.core.exceptions import ResourceNotFoundError

        async def call() -> None:
            async with self.fs.service_client.get_blob_client(self.container, self._blob_name(blob_id)) as bc:
                try:
                    tags = await bc.get_blob_tags()
                    if TTL_TAG in tags or EXPIRES_TAG in tags:
                        await bc.set_blob_tags({k: v for k, v in tags.items() if k not in (TTL_TAG, EXPIRES_TAG)})
                except ResourceNotFoundError:
                    return  # missing blob: nothing to make permanent

        self._sync(call)

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        """Lease mode: expired leases. Native mode: one ``Find Blobs by Tags`` query for
        ``blobstate_expires <= now_ms`` in the container, filtered to ``prefix``."""
        if self.ttl_mode != "native":
            return super().expired(prefix, now_ms)
        base = f"{self.key_prefix}/" if self.key_prefix else ""
        want = f"{base}{prefix}/" if prefix else base
        expression = f"\"{EXPIRES_TAG}\" <= '{now_ms:0{EXPIRES_DIGITS}d}'"

        async def call() -> list[str]:
            async with self.fs.service_client.get_container_client(self.container) as cc:
                return [b.name async for b in cc.find_blobs_by_tags(expression)]

        names = self._sync(call)
        return sorted(name[len(base):] for name in names if name.startswith(want))

    # -- lifecycle -------------------------------------------------------------------------------------------
    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        """The storage account's management policy (``az storage account management-policy create``)."""
        days = ttl_days(ttl_ms)
        prefix = f"{self.container}/{self.key_prefix}/" if self.key_prefix else f"{self.container}/"
        rule = {
            "enabled": True,
            "name": f"blobstate-ttl-{days}d",
            "type": "Lifecycle",
            "definition": {
                "actions": {"baseBlob": {"delete": {"daysAfterModificationGreaterThan": days}}},
                "filters": {
                    "blobTypes": ["blockBlob"],
                    "prefixMatch": [prefix],
                    "blobIndexMatch": [{"name": TTL_TAG, "op": "==", "value": str(days)}],
                },
            },
        }
        return json.dumps({"rules": [rule]}, indent=2)

    def install_lifecycle(self, ttl_ms: int) -> bool:
        """Always False: management policies need an ARM (management-plane) call; print ``lifecycle_rule``."""
        return False

    # -- batches ---------------------------------------------------------------------------------------------
    def delete_many(self, blob_ids: Iterable[str]) -> None:
        """Concurrent deletes through adlfs (one gathered batch); leases too in lease mode. Idempotent."""
        ids = list(blob_ids)
        if not ids:
            return
        paths = [self.path(b) for b in ids]
        if self.ttl_mode == "lease":
            paths += [self.path(lease_id(b)) for b in ids if not is_lease(b)]
        try:
            self.fs.rm(paths, expand_path=False)
        except RuntimeError as exc:  # adlfs wraps SDK errors in RuntimeError
            raise StorageError(f"delete of {len(ids)} blobs in {self.display_url} failed: "
                               f"{self.redact(str(exc.__cause__ or exc))}") from None
