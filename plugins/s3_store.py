"""S3 blob store (s3fs) with native TTL: an object tag at upload and a tag-filtered lifecycle expiration rule.

Native mode (``ttl_mode="native"``): ``put`` with a TTL writes the object with the tags ``blobstate-ttl=<days>``
(what the lifecycle rule filters on) and ``blobstate-expires=<ms since the epoch>`` (the exact expiry, which
``expired()`` reads, so ``blobstate gc`` also sweeps on stores that never run lifecycle rules, such as moto) in the
same PUT, so a blob never exists without its TTL. ``remove_ttl`` removes both tags (other tags stay).
``install_lifecycle`` merges a rule ``blobstate-ttl-<days>d-...`` into the bucket's lifecycle configuration.

The checkpoint log's exclusive create is S3's conditional PUT (``If-None-Match: *``): of two writers creating the
same generation object, S3 rejects the second with 412, which s3fs raises as ``FileExistsError``.

Whole-file uploads go multipart at ``2 * MULTIPART_CHUNK`` bytes with parts sent in parallel; deletes of a batch go
out as bulk ``DeleteObjects`` calls (1000 keys each) through s3fs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from typing import Any
from urllib.parse import urlencode

import s3fs  # noqa: F401 - the dependency of this backend: importing it here makes a missing extra fail at

#                           resolution, with the registration record's install hint (blobstate.specs)
from blobstate.errors import StorageError
from blobstate.interfaces import PutRequest
from blobstate.plugins.fsspec_store import FsspecBlobStore

TTL_TAG = "blobstate-ttl"
EXPIRES_TAG = "blobstate-expires"
DAY_MS = 86_400_000
MULTIPART_CHUNK = 16 << 20  # bytes per multipart part; whole files >= 2x this go multipart


def ttl_days(ttl_ms: int) -> int:
    """Whole days a lifecycle rule needs to cover ``ttl_ms`` (at least 1)."""
    return max(1, math.ceil(ttl_ms / DAY_MS))


class S3BlobStore(FsspecBlobStore):
    """``BlobStore`` on S3 (or an S3-compatible server) through s3fs.

    ``url``: ``s3://bucket/prefix`` (query parameters become storage options, see ``blobstate.storage_options``).
    ``storage_options`` go to ``s3fs.S3FileSystem`` (``endpoint_url``, ``key``, ``secret``, ``client_kwargs``...).
    Raises ``MissingDependencyError`` without s3fs, ``ConfigurationError`` for a bad URL or ttl mode.
    """

    native_ttl = True

    ttl_tag = TTL_TAG

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8) -> None:
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency)
        self.bucket, _, self.key_prefix = self.root.partition("/")

    # -- writes ----------------------------------------------------------------------------------------------
    def _ttl_tags(self, ttl_ms: int) -> dict[str, str]:
        return {TTL_TAG: str(ttl_days(ttl_ms)), EXPIRES_TAG: str(int(time.time() * 1000) + ttl_ms)}

    def _put_kwargs(self, request: PutRequest) -> dict[str, Any]:
        if self.ttl_mode == "native" and request.ttl_ms is not None:
            return {"Tagging": urlencode(self._ttl_tags(request.ttl_ms))}
        return {}

    def put(self, request: PutRequest) -> None:
        source = request.source
        if isinstance(source, bytes) or source.offset != 0 or os.path.getsize(source.path) != source.length:
            super().put(request)
            return
        if request.ttl_ms is not None:
            self._set_ttl_before_put(request.blob_id, request.ttl_ms)  # the lease first (lease mode only)
        try:  # a whole file: multipart with parallel parts at >= 2 x MULTIPART_CHUNK
            # Parts of one file go one at a time: the batch already runs max_concurrency files at once, and
            # parallel parts of every file would hold max_concurrency^2 parts in memory.
            self.fs.put_file(source.path, self.path(request.blob_id), chunksize=MULTIPART_CHUNK,
                             max_concurrency=1, **self._put_kwargs(request))
        except FileNotFoundError as exc:
            raise StorageError(f"cannot write blob {request.blob_id}: {exc}") from exc

    def put_exclusive(self, blob_id: str, data: bytes) -> None:
        """Conditional PUT (``If-None-Match: *``); ``FileExistsError`` when the object exists."""
        self.fs.pipe_file(self.path(blob_id), data, mode="create")

    # -- TTL -------------------------------------------------------------------------------------------------
    def _bucket_key(self, blob_id: str) -> tuple[str, str]:
        bucket, _, key = self.path(blob_id).partition("/")
        return bucket, key

    def _tags(self, blob_id: str) -> dict[str, str] | None:
        """The object's tags, or None when the object does not exist."""
        bucket, key = self._bucket_key(blob_id)
        try:
            out = self.fs.call_s3("get_object_tagging", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        return {t["Key"]: t["Value"] for t in out.get("TagSet", [])}

    def remove_ttl(self, blob_id: str) -> None:
        if self.ttl_mode != "native":
            super().remove_ttl(blob_id)
            return
        tags = self._tags(blob_id)
        if not tags or not ({TTL_TAG, EXPIRES_TAG} & tags.keys()):
            return
        bucket, key = self._bucket_key(blob_id)
        rest = {k: v for k, v in tags.items() if k not in (TTL_TAG, EXPIRES_TAG)}
        try:
            if rest:
                self.fs.call_s3("put_object_tagging", Bucket=bucket, Key=key,
                                Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in rest.items()]})
            else:
                self.fs.call_s3("delete_object_tagging", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return  # deleted meanwhile: nothing left to expire

    def expired(self, prefix: str, now_ms: int) -> list[str]:
        """Lease mode: expired leases. Native mode: objects whose ``blobstate-expires`` tag is <= ``now_ms``
        (one tagging call per object, run concurrently; S3's lifecycle rule deletes them anyway, at day grain)."""
        if self.ttl_mode != "native":
            return super().expired(prefix, now_ms)
        candidates = [info.blob_id for info in self.list(prefix)]

        def is_expired(blob_id: str) -> bool:
            tags = self._tags(blob_id) or {}
            value = tags.get(EXPIRES_TAG)
            return value is not None and value.isdigit() and int(value) <= now_ms

        flags = self.map_concurrent(is_expired, candidates)
        return [b for b, flag in zip(candidates, flags, strict=True) if flag]

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _rule(self, ttl_ms: int) -> dict[str, Any]:
        days = ttl_days(ttl_ms)
        tag = {"Key": TTL_TAG, "Value": str(days)}
        prefix = f"{self.key_prefix}/" if self.key_prefix else ""
        digest = hashlib.sha1(prefix.encode()).hexdigest()[:8]
        flt: dict[str, Any] = {"And": {"Prefix": prefix, "Tags": [tag]}} if prefix else {"Tag": tag}
        return {"ID": f"blobstate-ttl-{days}d-{digest}", "Status": "Enabled", "Filter": flt,
                "Expiration": {"Days": days}}

    def lifecycle_rule(self, ttl_ms: int) -> str | None:
        """The rule as ``put-bucket-lifecycle-configuration`` JSON (``{"Rules": [...]}``)."""
        return json.dumps({"Rules": [self._rule(ttl_ms)]}, indent=2)

    def current_lifecycle_rules(self) -> list[dict[str, Any]]:
        """The bucket's lifecycle rules ([] when it has none)."""
        try:
            out = self.fs.call_s3("get_bucket_lifecycle_configuration", Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001 - s3fs maps "no configuration" to a generic error
            if "NoSuchLifecycleConfiguration" in f"{type(exc).__name__} {exc}" or \
                    "lifecycle configuration does not exist" in str(exc):
                return []
            raise StorageError(f"cannot read the lifecycle configuration of {self.display_url}: "
                               f"{self.redact(str(exc))}") from None
        return list(out.get("Rules", []))

    def install_lifecycle(self, ttl_ms: int) -> bool:
        """Merge the rule into the bucket's lifecycle configuration (a rule with the same ID is replaced)."""
        rule = self._rule(ttl_ms)
        rules = [r for r in self.current_lifecycle_rules() if r.get("ID") != rule["ID"]] + [rule]
        try:
            self.fs.call_s3("put_bucket_lifecycle_configuration", Bucket=self.bucket,
                            LifecycleConfiguration={"Rules": rules})
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"cannot install the lifecycle rule on {self.display_url}: "
                               f"{self.redact(str(exc))}") from None
        return True

    # -- batches ---------------------------------------------------------------------------------------------
    def delete_many(self, blob_ids: Any) -> None:
        """Bulk ``DeleteObjects`` (s3fs batches 1000 keys per call); leases too in lease mode. Idempotent."""
        ids = list(blob_ids)
        if not ids:
            return
        paths = [self.path(b) for b in ids]
        if self.ttl_mode == "lease":
            from blobstate.plugins.fsspec_store import is_lease, lease_id

            paths += [self.path(lease_id(b)) for b in ids if not is_lease(b)]
        try:
            self.fs.rm(paths)
        except FileNotFoundError:
            pass
