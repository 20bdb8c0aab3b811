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
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import adlfs  # noqa: F401 - this backend's dependencies: a missing extra fails at resolution (blobstate.plugin.records)
import azure.storage.blob  # noqa: F401

from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, StorageError, TransientStorageError
from blobstate.plugin.interfaces import BoundedSink, FileRange, PutRequest
from blobstate.plugins.toolkit.native_ttl import NativeTtlBlobStore, ttl_days
from blobstate.plugins.toolkit.transfer import ObstoreTransport, throttle

TTL_TAG = "blobstate_ttl"
EXPIRES_TAG = "blobstate_expires"
EXPIRES_DIGITS = 20
CONNECT_TIMEOUT_S = 5
BATCH_MAX = 256  # sub-requests per Blob Batch request (the service limit)
T = TypeVar("T")


class AzureBlobStore(NativeTtlBlobStore):
    """``BlobStore`` on Azure Blob Storage through adlfs.

    ``url``: ``az://container/prefix`` (also ``abfs://``, ``abfss://``); ``storage_options`` go to
    ``adlfs.AzureBlobFileSystem`` (``connection_string``, ``account_name``, ``account_key``, ``sas_token``,
    ``credential``...). Raises ``MissingDependencyError`` without adlfs / azure-storage-blob.
    """

    ttl_tag = TTL_TAG

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8, settings: Settings | None = None) -> None:
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency,
                         settings=settings)
        # One retry policy (blobstate's): the SDK's own retries, which adlfs gives no option for, are switched off
        # on its client's policy (an unreachable endpoint took 168 s to fail with both).
        policy = getattr(getattr(self.fs.service_client, "_config", None), "retry_policy", None)
        for name in ("total_retries", "connect_retries", "read_retries", "status_retries"):
            if hasattr(policy, name):
                setattr(policy, name, 0)

    def _accepts_userinfo(self, userinfo: str) -> bool:
        return ":" not in userinfo  # adlfs's container@account; a container name never holds ':'

    @property
    def container(self) -> str:
        """The container (Azure's name for the bucket)."""
        return self.bucket

    def _sync(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run an async SDK call on adlfs's event loop (the loop its clients are bound to)."""
        from fsspec.asyn import sync

        return sync(self.fs.loop, fn)

    def _blob_name(self, blob_id: str) -> str:
        return self.bucket_key(blob_id)[1]

    # -- writes ----------------------------------------------------------------------------------------------
    def _ttl_tags(self, ttl_ms: int) -> dict[str, str]:
        expires = int(time.time() * 1000) + ttl_ms
        return {TTL_TAG: str(ttl_days(ttl_ms)), EXPIRES_TAG: f"{expires:0{EXPIRES_DIGITS}d}"}

    def _native_ttl_kwargs(self, ttl_ms: int) -> dict[str, Any]:
        return {"tags": self._ttl_tags(ttl_ms)}

    def _write_range(self, path: str, source: FileRange, request: PutRequest) -> None:
        """A part of a file (one chunk, at most ``chunk_size`` bytes) in one upload call, tags included."""
        with open(source.path, "rb") as src:
            src.seek(source.offset)
            data = src.read(source.length)
        if len(data) != source.length:
            raise StorageError(f"{source.path} shrank while it was uploaded")
        self.fs.pipe_file(path, data, **self._put_kwargs(request))

    def _put_exclusive_with_fsspec(self, blob_id: str, data: bytes) -> None:
        """Upload with ``overwrite=False``; ``FileExistsError`` when the blob exists."""
        self.fs.pipe_file(self.path(blob_id), data, overwrite=False)

    def _obstore_transport(self, options: dict[str, Any]) -> Callable[[], ObstoreTransport] | None:
        """obstore's ``AzureStore`` when the options hold a connection string or an account name and key (a SAS
        token or a credential object keeps adlfs for the blob bytes too)."""
        config = _obstore_config(options)
        if config is None:
            return None

        def make() -> ObstoreTransport:
            from obstore.store import AzureStore

            endpoint = str(config.get("endpoint", ""))
            store = AzureStore(self.container, retry_config={"max_retries": 0},
                               client_options={"allow_http": endpoint.startswith("http://"),
                                               "connect_timeout": f"{CONNECT_TIMEOUT_S}s"}, **config)
            return ObstoreTransport(store, self.budget, pool_size=2 * self.max_concurrency, limits=self.limits)

        return make

    # -- the Rewrite door through the SDK (no obstore transport) ---------------------------------------------
    def _get_versioned_with_fsspec(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """One ``Get Blob``: the bytes and the ETag they were read at."""
        from azure.core.exceptions import ResourceNotFoundError

        async def call() -> tuple[bytes, str] | None:
            async with self.fs.service_client.get_blob_client(self.container, self._blob_name(blob_id)) as bc:
                try:
                    download = await bc.download_blob()
                except ResourceNotFoundError:
                    return None
                if download.size > sink.limit:
                    raise sink.too_large()
                return await download.readall(), str(download.properties.etag)

        found = self._sync(call)
        if found is None:
            raise BlobNotFound(blob_id)
        sink.write(found[0])
        return found

    def _rewrite_with_fsspec(self, blob_id: str, data: bytes, expected: str) -> None:
        """``Put Blob`` with ``If-Match``: azurite and Azure answer 412 (``FileExistsError`` here) when the ETag
        moved on."""
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError, ResourceNotFoundError

        async def call() -> None:
            async with self.fs.service_client.get_blob_client(self.container, self._blob_name(blob_id)) as bc:
                await bc.upload_blob(data, overwrite=True, etag=expected, match_condition=MatchConditions.IfNotModified)

        throttle(self.limits.upload, len(data))
        try:
            self._sync(call)
        except (ResourceModifiedError, ResourceNotFoundError):
            raise FileExistsError(blob_id) from None

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

    def _remove_native_ttl(self, blob_id: str) -> None:
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

    def _drop_native_ttl(self, blob_id: str) -> None:
        """One ``Set Blob Tags`` with no tags: the blob carries blobstate's two tags and nothing else."""
        from azure.core.exceptions import ResourceNotFoundError

        async def call() -> None:
            async with self.fs.service_client.get_blob_client(self.container, self._blob_name(blob_id)) as bc:
                try:
                    await bc.set_blob_tags({})
                except ResourceNotFoundError:
                    return  # missing blob: nothing to make permanent

        self._sync(call)

    def _expired_native(self, prefix: str, now_ms: int) -> list[str]:
        """One ``Find Blobs by Tags`` query for ``blobstate_expires <= now_ms`` in the container, filtered to
        ``prefix``."""
        base = self.rule_prefix()
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
    def _sync_container_client(self) -> Any | None:
        """A synchronous ``ContainerClient`` with adlfs's credentials (connection string, account key or SAS
        token), or None when the credential is an async token credential only adlfs can use."""
        from azure.storage.blob import BlobServiceClient

        fs = self.fs
        if fs.connection_string:
            service = BlobServiceClient.from_connection_string(fs.connection_string, retry_total=0)
        elif fs.account_key or fs.sas_token:
            credential = fs.account_key or fs.sas_token.lstrip("?")
            service = BlobServiceClient(account_url=fs.account_url, credential=credential, retry_total=0)
        else:
            return None
        return service.get_container_client(self.container)

    def delete_if_expired(self, blob_ids: Sequence[str], now_ms: int) -> list[str] | None:
        """Blob Batch deletes conditioned on the expiry tag (``x-ms-if-tags: "blobstate_expires" <= 'now'``): a blob
        whose mark its committer removed, or that never had one, is refused by the service (412) and returned; a
        missing one counts as deleted (``blobstate.plugin.capabilities.expired_delete``). None in lease mode or with a
        credential only adlfs can use (no conditional batch then)."""
        client = self._sync_container_client() if self.native else None
        if client is None:
            return None
        from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseError

        condition = f"\"{EXPIRES_TAG}\" <= '{now_ms:0{EXPIRES_DIGITS}d}'"
        ids = list(blob_ids)
        refused: list[str] = []
        try:
            with client:
                for start in range(0, len(ids), BATCH_MAX):
                    part = ids[start:start + BATCH_MAX]
                    responses = client.delete_blobs(*[self._blob_name(b) for b in part],
                                                    if_tags_match_condition=condition, raise_on_any_failure=False)
                    for blob_id, response in zip(part, responses, strict=True):
                        if response.status_code == 412:
                            refused.append(blob_id)
                        elif response.status_code not in (202, 404):
                            raise StorageError(f"conditional delete of {blob_id} in {self.display_url} answered "
                                               f"{response.status_code}")
        except (ServiceRequestError, ServiceResponseError) as exc:
            raise TransientStorageError(f"conditional delete of {len(ids)} blobs in {self.display_url} failed: "
                                        f"{self.redact(str(exc))}") from None
        except AzureError as exc:
            raise StorageError(f"conditional delete of {len(ids)} blobs in {self.display_url} failed: "
                               f"{self.redact(str(exc))}") from None
        return refused

    def _delete_paths(self, paths: list[str]) -> None:
        """Blob Batch deletes (``ContainerClient.delete_blobs``: up to 256 blobs per ``POST ?comp=batch``), missing
        blobs ignored. The synchronous SDK client makes them (the async client's batch requests are refused by
        azurite with 400); with an async-only credential, adlfs deletes blob by blob instead."""
        from azure.core.exceptions import AzureError, ServiceRequestError, ServiceResponseError

        names = [p.split("/", 1)[1] for p in paths]
        client = self._sync_container_client()
        if client is None:
            self.map_concurrent(self._rm, paths)
            return
        try:
            with client:
                for start in range(0, len(names), BATCH_MAX):
                    responses = client.delete_blobs(*names[start:start + BATCH_MAX], raise_on_any_failure=False)
                    failed = [r.status_code for r in responses if r.status_code not in (202, 404)]
                    if failed:
                        raise StorageError(f"batch delete in {self.display_url} answered {failed[0]} for "
                                           f"{len(failed)} of {len(names[start:start + BATCH_MAX])} blobs")
        except (ServiceRequestError, ServiceResponseError) as exc:  # no answer: the retry wrapper tries again
            raise TransientStorageError(f"delete of {len(names)} blobs in {self.display_url} failed: "
                                        f"{self.redact(str(exc))}") from None
        except AzureError as exc:
            raise StorageError(f"delete of {len(names)} blobs in {self.display_url} failed: "
                               f"{self.redact(str(exc))}") from None


def _obstore_config(options: dict[str, Any]) -> dict[str, Any] | None:
    """obstore ``AzureStore`` keyword arguments for adlfs ``options``: a connection string with an account key, or
    ``account_name`` + ``account_key``; None for anything else (SAS tokens, credential objects, unknown options)."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return None
    if set(options) - {"connection_string", "account_name", "account_key"}:
        return None
    if options.get("connection_string"):
        parts = dict(p.split("=", 1) for p in str(options["connection_string"]).split(";") if "=" in p)
        if not parts.get("AccountName") or not parts.get("AccountKey") or "SharedAccessSignature" in parts:
            return None
        config = {"account_name": parts["AccountName"], "access_key": parts["AccountKey"]}
        if parts.get("BlobEndpoint"):
            config["endpoint"] = parts["BlobEndpoint"].rstrip("/")
        return config
    if options.get("account_name") and options.get("account_key"):
        return {"account_name": options["account_name"], "access_key": options["account_key"]}
    return None
