"""GCS blob store (gcsfs) with native TTL: ``customTime`` at upload and a ``daysSinceCustomTime`` lifecycle rule.

Native mode (``ttl_mode="native"``): ``put`` with a TTL writes the object with ``customTime`` = upload time and the
custom metadata ``blobstate-expires`` (ms since the epoch, read by ``expired()`` from the listing, so ``blobstate
gc`` also sweeps where lifecycle rules never run, such as the emulator) in the same upload. ``remove_ttl`` moves
``customTime`` far forward (GCS only lets it move forward: ``daysSinceCustomTime`` then never matches) and drops
the metadata. ``install_lifecycle`` adds a ``Delete`` rule ``daysSinceCustomTime >= days`` limited to the
repository prefix to the bucket's lifecycle configuration (objects without ``customTime`` never match).

The checkpoint log's exclusive create is an upload with ``ifGenerationMatch=0`` (GCS answers 412, gcsfs raises
``FileExistsError``). The gcp-storage-emulator does not enforce this precondition.
"""

from __future__ import annotations

import json
import time
import types
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import gcsfs  # noqa: F401 - this backend's dependency: a missing extra fails at resolution (blobstate.plugin.records)

from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, StorageError, TransientStorageError
from blobstate.plugin.interfaces import BoundedSink, PutRequest
from blobstate.plugins.toolkit.native_ttl import NativeTtlBlobStore, ttl_days
from blobstate.plugins.toolkit.transfer import throttle

EXPIRES_KEY = "blobstate-expires"
#: customTime after ``remove_ttl``: the lifecycle rule's age is negative until then.
PERMANENT_CUSTOM_TIME = "2999-12-31T00:00:00Z"
PERMANENT_YEAR = 2999
#: copies of a piece gcsfs and aiohttp hold while it is sent (measured: peak RSS over the budget otherwise)
GCSFS_COPIES = 4


def rfc3339(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def is_permanent(custom_time: str | None) -> bool:
    """True when ``customTime`` is absent or was moved to the far future by ``remove_ttl``."""
    if not custom_time:
        return True
    try:
        return int(custom_time[:4]) >= PERMANENT_YEAR
    except ValueError:
        return False


class GcsBlobStore(NativeTtlBlobStore):
    """``BlobStore`` on Google Cloud Storage through gcsfs.

    ``url``: ``gs://bucket/prefix`` or ``gcs://bucket/prefix``; ``storage_options`` go to ``gcsfs.GCSFileSystem``
    (``project``, ``token``, ``endpoint_url``...). Raises ``MissingDependencyError`` without gcsfs.
    """

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8, settings: Settings | None = None) -> None:
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency,
                         settings=settings)
        # One retry policy (blobstate's): gcsfs retries every request 6 times with backoff and offers no option
        # (an unreachable endpoint took 166 s to fail under both); its undecorated request is bound instead.
        plain = getattr(type(self.fs)._request, "__wrapped__", None)
        if plain is not None:
            self.fs._request = types.MethodType(_request_once(plain), self.fs)

    #: A file's bytes go up as a resumable upload of 16 MiB pieces (gcsfs holds one piece, not the whole blob)
    write_block_size = 16 << 20

    # -- writes ----------------------------------------------------------------------------------------------
    def _put_with_fsspec(self, request: PutRequest) -> None:
        source = request.source
        if isinstance(source, bytes) or source.length <= self.write_block_size:
            super()._put_with_fsspec(request)
            return
        if request.ttl_ms is not None:
            self._set_ttl_before_put(request.blob_id, request.ttl_ms)
        with self.budget.reserve(GCSFS_COPIES * self.write_block_size):
            self._write_range(self.path(request.blob_id), source, request)

    def _native_ttl_kwargs(self, ttl_ms: int) -> dict[str, Any]:
        now = int(time.time() * 1000)
        return {"fixed_key_metadata": {"custom_time": rfc3339(now)}, "metadata": {EXPIRES_KEY: str(now + ttl_ms)}}

    # -- the Rewrite door: generations -------------------------------------------------------------------------
    def _get_versioned_with_fsspec(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """The object's generation (its resource), then its bytes read at that generation (``ifGenerationMatch``:
        a write in between is a transient fault, read again)."""
        obj = self._object(blob_id)
        if obj is None:
            raise BlobNotFound(blob_id)
        if int(obj.get("size") or 0) > sink.limit:
            raise sink.too_large()
        generation = str(obj["generation"])
        try:
            _, data = self.fs.call("GET", "b/{}/o/{}", self.bucket, self.bucket_key(blob_id)[1], alt="media",
                                   ifGenerationMatch=generation)
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        except FileExistsError:  # 412: another generation by now
            raise TransientStorageError(f"{blob_id} was written while it was read") from None
        if len(data) > sink.limit:
            raise sink.too_large()
        throttle(self.limits.download, len(data))
        sink.write(data)
        return bytes(data), generation

    def _rewrite_with_fsspec(self, blob_id: str, data: bytes, expected: str) -> None:
        """A media upload with ``ifGenerationMatch``: GCS answers 412 (``FileExistsError``) when the generation moved
        on. The gcp-storage-emulator ignores the precondition (docs/plugins.md)."""
        from urllib.parse import quote

        throttle(self.limits.upload, len(data))
        self.fs.call("POST", f"{self.fs._location}/upload/storage/v1/b/{quote(self.bucket)}/o", uploadType="media",
                     name=self.bucket_key(blob_id)[1], ifGenerationMatch=expected, data=data,
                     headers={"Content-Type": "application/octet-stream"}, json_out=True)
        self.fs.invalidate_cache(self.path(blob_id))

    # -- TTL -------------------------------------------------------------------------------------------------
    def _object(self, blob_id: str) -> dict[str, Any] | None:
        """The object resource, fresh from the server (not gcsfs's listing cache); None if it does not exist."""
        _, key = self.bucket_key(blob_id)
        try:
            return self.fs.call("GET", "b/{}/o/{}", self.bucket, key, json_out=True)
        except FileNotFoundError:
            return None

    def _remove_native_ttl(self, blob_id: str) -> None:
        obj = self._object(blob_id)
        if obj is None or (is_permanent(obj.get("customTime")) and EXPIRES_KEY not in (obj.get("metadata") or {})):
            return
        self._drop_native_ttl(blob_id)

    def _drop_native_ttl(self, blob_id: str) -> None:
        """One metadata update (``customTime`` moved to the permanent value, the expiry key removed), without
        reading the object first: a commit's own uploads carry the mark."""
        try:
            self.fs.setxattrs(self.path(blob_id), fixed_key_metadata={"custom_time": PERMANENT_CUSTOM_TIME},
                              **{EXPIRES_KEY: None})
        except FileNotFoundError:
            return  # deleted meanwhile
        self.fs.invalidate_cache(self.path(blob_id))

    def has_ttl(self, blob_id: str) -> bool:
        if not self.native:
            return super().has_ttl(blob_id)
        obj = self._object(blob_id)
        return obj is not None and not is_permanent(obj.get("customTime"))

    def _expired_native(self, prefix: str, now_ms: int) -> list[str]:
        """Objects whose ``blobstate-expires`` metadata is <= ``now_ms`` and whose ``customTime`` was not moved
        forward (from one listing, no per-object calls)."""
        self.fs.invalidate_cache()
        out = []
        for rel, info in sorted(self._find(prefix).items()):
            value = (info.get("metadata") or {}).get(EXPIRES_KEY)
            if value and str(value).isdigit() and int(value) <= now_ms and not is_permanent(info.get("customTime")):
                out.append(rel)
        return out

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _rule(self, ttl_ms: int) -> dict[str, Any]:
        condition: dict[str, Any] = {"daysSinceCustomTime": ttl_days(ttl_ms)}
        if self.key_prefix:
            condition["matchesPrefix"] = [self.rule_prefix()]
        return {"action": {"type": "Delete"}, "condition": condition}

    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        """The rule as the bucket's ``lifecycle`` JSON (``gcloud storage buckets update --lifecycle-file``)."""
        return json.dumps({"lifecycle": {"rule": [self._rule(ttl_ms)]}}, indent=2)

    def current_lifecycle_rules(self) -> list[dict[str, Any]]:
        """The bucket's lifecycle rules ([] when it has none)."""
        try:
            bucket = self.fs.call("GET", "b/{}", self.bucket, json_out=True)
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"cannot read the bucket of {self.display_url}: "
                               f"{self.redact(str(exc))}") from None
        return list((bucket.get("lifecycle") or {}).get("rule") or [])

    def install_lifecycle(self, ttl_ms: int) -> bool:
        """Add the rule to the bucket (a blobstate rule for the same prefix is replaced)."""
        rule = self._rule(ttl_ms)

        def ours(r: dict[str, Any]) -> bool:
            cond = r.get("condition") or {}
            return "daysSinceCustomTime" in cond and cond.get("matchesPrefix") == rule["condition"].get(
                "matchesPrefix") and (r.get("action") or {}).get("type") == "Delete"

        rules = [r for r in self.current_lifecycle_rules() if not ours(r)] + [rule]
        try:
            self.fs.call("PATCH", "b/{}", self.bucket, json={"lifecycle": {"rule": rules}}, json_out=True)
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"cannot install the lifecycle rule on {self.display_url}: "
                               f"{self.redact(str(exc))}") from None
        return True


def _request_once(plain: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """gcsfs's request without its retry loop; what that loop would have retried (408, 429, 5xx, a checksum
    mismatch) becomes ``TransientStorageError`` for blobstate's retry wrapper. Connection errors pass unchanged
    (the wrapper knows them)."""
    from gcsfs.retry import ChecksumError, HttpError

    async def request(fs: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await plain(fs, *args, **kwargs)
        except HttpError as exc:
            if exc.code in (408, 429) or (exc.code or 0) >= 500:
                raise TransientStorageError(f"GCS answered {exc.code}: {exc.message}") from None
            raise
        except ChecksumError as exc:
            raise TransientStorageError(f"GCS transfer failed its checksum: {exc}") from None

    return request
