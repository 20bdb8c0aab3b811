"""S3 blob store with native TTL (an object tag and a tag-filtered lifecycle rule); blob bytes move through obstore.

Transport: blob uploads and downloads go through obstore (Rust ``object_store``; ``core/plugin/transfer.py``):
multipart part by part, ranged parallel GETs written in order, a budget of bytes in flight. Measured on the same
moto server, it moved blobs 1.6x (up) and 1.8x (down) faster than s3fs in less memory (``bench/README.md``).
Listings, lease objects and bulk ``DeleteObjects`` go through obstore too (``metadata_by_transport``), so a commit
in lease mode never imports s3fs or botocore; tags and lifecycle rules (native mode) and a new repository's bucket
check stay on s3fs/botocore, and so does the whole store when the storage options hold something the obstore mapping
does not understand (a profile, a session, an unknown option), no explicit credentials, or no region for AWS itself
(botocore discovers a bucket's region, obstore does not): fsspec's options stay the user-facing convention.

Native mode (``ttl_mode="native"``): a data blob (``<store>/blobs/<id>``) put with a TTL records its expiry in its
own metadata (``x-amz-meta-blobstate-expires``, ms since the epoch) in the same request, and carries no tag: its TTL
is never removed, so a commit spends no request on it (S3 has no bulk tagging call: one ``DeleteObjectTagging`` per
object was half of a commit's requests). Until that expiry gc treats the blob as protected whatever its own TTL
(``recorded_expiry``, ``blobstate.maintenance.gc:past_recorded_expiry``); after it, only a retained record that
references it keeps it (Safety rules 2 and 13, docs/architecture.md). A snapshot index keeps the tags
``blobstate-ttl=<days>`` (what the lifecycle rule filters on) and ``blobstate-expires=<ms>`` (the exact expiry,
which ``expired()`` reads, so ``blobstate gc`` also sweeps on stores that never run lifecycle rules, such as moto),
set in the same request (multipart: in ``CreateMultipartUpload``), removed once its commit lands: an index without
a TTL is what recovery takes for a completed commit. ``remove_ttl`` removes both tags (other tags stay: it reads
the tag set first), so data blobs an earlier version tagged lose their tags as before; a commit's own uploads
lose theirs in one ``DeleteObjectTagging`` each (``remove_own_ttl_many``), but for the data blobs this instance
wrote untagged. ``install_lifecycle`` merges a rule ``blobstate-ttl-<days>d-...`` into the bucket's lifecycle
configuration.

The checkpoint log's exclusive create is S3's conditional PUT (``If-None-Match: *``): of two writers creating the
same generation object, S3 rejects the second with 412 (``FileExistsError``).

Retries: one policy, blobstate's own (``blobstate.repository.retry``). botocore's and s3fs's retries are switched off
and obstore's ``max_retries`` is 0, and connections time out after ``CONNECT_TIMEOUT_S``: an unreachable endpoint fails
within seconds, naming the endpoint (the SDK's message), never the credentials.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

from blobstate.config.settings import Settings
from blobstate.errors import BlobNotFound, StorageError, TransientStorageError
from blobstate.model.layout import ObjectKind, kind_of
from blobstate.plugin.inflight import ByteBudget
from blobstate.plugin.interfaces import BoundedSink, PutRequest
from blobstate.plugins.toolkit.native_ttl import NativeTtlBlobStore, ttl_days
from blobstate.plugins.toolkit.transfer import Limits, ObstoreTransport, throttle

# The dependency of this backend, found (not imported: s3fs and botocore cost ~0.3 s of CPU, and a commit in lease
# mode through obstore never needs them) when this module is resolved, so a missing extra fails there with the
# registration record's install hint (blobstate.plugin.records).
if importlib.util.find_spec("s3fs") is None:
    raise ModuleNotFoundError("No module named 's3fs'", name="s3fs")

TTL_TAG = "blobstate-ttl"
EXPIRES_TAG = "blobstate-expires"
EXPIRES_META = "blobstate-expires"  # a data blob's recorded expiry, user metadata (x-amz-meta-blobstate-expires)
CONNECT_TIMEOUT_S = 5
FSSPEC_PART = 16 << 20  # bytes per multipart part when s3fs carries the blob bytes
#: s3fs options the obstore transport maps (anything else keeps the store on s3fs alone)
OBSTORE_OPTIONS = {"endpoint_url", "key", "secret", "token", "anon", "client_kwargs", "config_kwargs",
                   "skip_instance_cache", "use_listings_cache"}


class S3BlobStore(NativeTtlBlobStore):
    """``BlobStore`` on S3 (or an S3-compatible server): obstore for blob bytes, listings and deletes, s3fs for
    tags and lifecycle rules (and for everything when the options cannot be mapped onto obstore).

    ``url``: ``s3://bucket/prefix`` (query parameters become storage options, see ``blobstate.config.options``).
    ``storage_options`` go to ``s3fs.S3FileSystem`` (``endpoint_url``, ``key``, ``secret``, ``client_kwargs``...)
    and are mapped to obstore's S3 configuration; ``transfer_budget`` (bytes in flight, default 96 MiB) is
    blobstate's own. Raises ``MissingDependencyError`` without s3fs, ``ConfigurationError`` for a bad URL or mode.
    """

    ttl_tag = TTL_TAG
    metadata_by_transport = True  # listings, leases and bulk deletes through obstore too, when it can be mapped

    def __init__(self, url: str, *, storage_options: dict[str, Any] | None = None, ttl_mode: str | None = None,
                 max_concurrency: int = 8, settings: Settings | None = None) -> None:
        #: data blobs this instance wrote with their expiry recorded as metadata (native mode): no tag to remove
        self._recorded: set[str] = set()
        super().__init__(url, storage_options=storage_options, ttl_mode=ttl_mode, max_concurrency=max_concurrency,
                         settings=settings)

    @property
    def records_data_ttl(self) -> bool:
        """Native mode: a data blob's TTL is the expiry recorded in its metadata, never removed (see the module
        docstring); its snapshot index keeps the tags."""
        return self.native

    @property
    def fs(self) -> Any:
        """The s3fs filesystem, made on first use (with obstore mapped, only native mode's tags, lifecycle rules
        and a new repository's bucket check need it)."""
        fs = super().fs
        fs.retries = 1  # s3fs's own retry loop (a class attribute, 5 by default): off, ours decides
        return fs

    def _remote_root(self, url: str) -> tuple[str, str] | None:
        if self._make_transport is None or "#" in url or "?" in url:
            return None  # s3fs alone, or a name only s3fs's own reading of the URL keeps whole (a '#' in a key)
        parts = urlsplit(url)
        return f"{parts.netloc}{parts.path}".rstrip("/"), "s3"

    def _fs_options(self, options: dict[str, Any]) -> dict[str, Any]:
        options = super()._fs_options(options)
        # One retry policy (blobstate's): no botocore or s3fs retries underneath, a bounded connect time.
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"total_max_attempts": 1})
        config.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        options["config_kwargs"] = config
        return options

    def _obstore_transport(self, options: dict[str, Any]) -> Callable[[], ObstoreTransport] | None:
        config = _obstore_config(options)
        if config is None:
            return None
        return lambda: _obstore_transport(self.bucket, config, self.budget, pool=2 * self.max_concurrency,
                                          limits=self.limits)

    # -- writes ----------------------------------------------------------------------------------------------
    def _ttl_tags(self, ttl_ms: int) -> dict[str, str]:
        return {TTL_TAG: str(ttl_days(ttl_ms)), EXPIRES_TAG: str(int(time.time() * 1000) + ttl_ms)}

    def _recorded_metadata(self, request: PutRequest) -> dict[str, str] | None:
        """The metadata recording a data blob's expiry (native mode, a blob under ``blobs/`` put with a TTL), None
        for anything else; the blob is remembered as one with no tag to remove."""
        if not (self.native and request.ttl_ms is not None and kind_of(request.blob_id) is ObjectKind.BLOB):
            return None
        self._recorded.add(request.blob_id)
        return {EXPIRES_META: str(int(time.time() * 1000) + request.ttl_ms)}

    def _native_marks(self, request: PutRequest) -> tuple[dict[str, str] | None, dict[str, str] | None]:
        metadata = self._recorded_metadata(request)
        return (None, metadata) if metadata is not None else super()._native_marks(request)

    def _put_kwargs(self, request: PutRequest) -> dict[str, Any]:
        metadata = self._recorded_metadata(request)
        return {"Metadata": metadata} if metadata is not None else super()._put_kwargs(request)

    def _native_ttl_kwargs(self, ttl_ms: int) -> dict[str, Any]:
        return {"Tagging": urlencode(self._ttl_tags(ttl_ms))}

    def _put_with_fsspec(self, request: PutRequest) -> None:
        source = request.source
        if isinstance(source, bytes) or source.offset != 0 or os.path.getsize(source.path) != source.length:
            super()._put_with_fsspec(request)
            return
        if request.ttl_ms is not None:
            self._set_ttl_before_put(request.blob_id, request.ttl_ms)
        try:  # parts of one file one at a time: the batch already runs max_concurrency files at once
            with self.budget.reserve(min(request.size, 2 * FSSPEC_PART)):
                self.fs.put_file(source.path, self.path(request.blob_id), chunksize=FSSPEC_PART,
                                 max_concurrency=1, **self._put_kwargs(request))
        except FileNotFoundError as exc:
            raise StorageError(f"cannot write blob {request.blob_id}: {exc}") from exc

    # -- the Rewrite door through s3fs (no obstore transport) -----------------------------------------------
    def _get_versioned_with_fsspec(self, blob_id: str, sink: BoundedSink) -> tuple[bytes, str]:
        """``HeadObject``, the bytes, ``HeadObject`` again: the ETag the bytes were read at (a write in between is a
        transient fault: read again)."""
        bucket, key = self.bucket_key(blob_id)
        try:
            before = self.fs.call_s3("head_object", Bucket=bucket, Key=key)["ETag"]
            data = self.get_bounded(blob_id, sink)
            after = self.fs.call_s3("head_object", Bucket=bucket, Key=key)["ETag"]
        except FileNotFoundError:
            raise BlobNotFound(blob_id) from None
        if before != after:
            raise TransientStorageError(f"{blob_id} was written while it was read")
        return data, str(before)

    def _rewrite_with_fsspec(self, blob_id: str, data: bytes, expected: str) -> None:
        """``PutObject`` with ``If-Match``; S3 answers 412 (``FileExistsError`` here) when the ETag moved on."""
        bucket, key = self.bucket_key(blob_id)
        throttle(self.limits.upload, len(data))
        try:
            self.fs.call_s3("put_object", Bucket=bucket, Key=key, Body=data, IfMatch=expected)
        except OSError as exc:
            if _precondition_failed(exc):
                raise FileExistsError(blob_id) from None
            raise

    # -- TTL -------------------------------------------------------------------------------------------------
    def _tags(self, blob_id: str) -> dict[str, str] | None:
        """The object's tags, or None when the object does not exist."""
        bucket, key = self.bucket_key(blob_id)
        try:
            out = self.fs.call_s3("get_object_tagging", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        return {t["Key"]: t["Value"] for t in out.get("TagSet", [])}

    def _remove_native_ttl(self, blob_id: str) -> None:
        tags = self._tags(blob_id)
        if not tags or not ({TTL_TAG, EXPIRES_TAG} & tags.keys()):
            return
        bucket, key = self.bucket_key(blob_id)
        rest = {k: v for k, v in tags.items() if k not in (TTL_TAG, EXPIRES_TAG)}
        try:
            if rest:
                self.fs.call_s3("put_object_tagging", Bucket=bucket, Key=key,
                                Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in rest.items()]})
            else:
                self.fs.call_s3("delete_object_tagging", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return  # deleted meanwhile: nothing left to expire

    def remove_own_ttl_many(self, blob_ids: Iterable[str]) -> None:
        """As the base class, less the data blobs this instance wrote with a recorded expiry: they carry no tag
        (one ``DeleteObjectTagging`` per object saved on every commit). A commit's uploads another process made
        (a recovery, a group's parts) are untagged blob by blob as before: they may come from a writer that tagged
        them."""
        ids = list(blob_ids)
        tagged = [b for b in ids if b not in self._recorded]
        self._recorded.difference_update(ids)
        super().remove_own_ttl_many(tagged)

    def recorded_expiry(self, blob_ids: Sequence[str]) -> dict[str, int | None] | None:
        """The expiry (ms) each blob's writer recorded in its metadata, None for a blob with none or missing
        (``capabilities.recorded_expiry``; one ``HeadObject`` each, concurrently), in either mode: a lease-mode gc
        of a repository written in native mode still honours what the writers recorded."""

        def one(blob_id: str) -> int | None:
            bucket, key = self.bucket_key(blob_id)
            try:
                head = self.fs.call_s3("head_object", Bucket=bucket, Key=key)
            except FileNotFoundError:
                return None
            value = str((head.get("Metadata") or {}).get(EXPIRES_META, ""))
            return int(value) if value.isdigit() else None

        ids = list(blob_ids)
        return dict(zip(ids, self.map_concurrent(one, ids), strict=True))

    def _drop_native_ttl(self, blob_id: str) -> None:
        """One ``DeleteObjectTagging``: the object carries blobstate's two tags and nothing else."""
        bucket, key = self.bucket_key(blob_id)
        try:
            self.fs.call_s3("delete_object_tagging", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return  # deleted meanwhile: nothing left to expire
        except OSError:
            # S3 answers a missing key with 404 (above); the moto server with 500: a fault only if the object is
            # there (a gc may have deleted a late commit's upload: its heal check, next, puts it back)
            if self._exists(self.path(blob_id)):
                raise

    def _expired_native(self, prefix: str, now_ms: int) -> list[str]:
        """Objects whose ``blobstate-expires`` tag is <= ``now_ms`` (one tagging call per object, run
        concurrently; S3's lifecycle rule deletes them anyway, at day grain)."""
        candidates = [info.blob_id for info in self.list(prefix)]

        def is_expired(blob_id: str) -> bool:
            value = (self._tags(blob_id) or {}).get(EXPIRES_TAG)
            return value is not None and value.isdigit() and int(value) <= now_ms

        flags = self.map_concurrent(is_expired, candidates)
        return [b for b, flag in zip(candidates, flags, strict=True) if flag]

    # -- lifecycle -------------------------------------------------------------------------------------------
    def _rule(self, ttl_ms: int) -> dict[str, Any]:
        days = ttl_days(ttl_ms)
        tag = {"Key": TTL_TAG, "Value": str(days)}
        prefix = self.rule_prefix()
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
    def _delete_paths(self, paths: list[str]) -> None:
        """Bulk ``DeleteObjects`` (1000 keys per request), through obstore when mapped, else s3fs."""
        if self._meta is not None:
            super()._delete_paths(paths)
            return
        try:
            self.fs.rm(paths)
        except FileNotFoundError:
            pass


def _precondition_failed(exc: BaseException) -> bool:
    """Whether s3fs's error (it maps S3's ``PreconditionFailed`` of an ``If-Match`` to a plain ``OSError``) is S3
    refusing a conditional write."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict) and (response.get("Error") or {}).get("Code") == "PreconditionFailed":
            return True
        seen = seen.__cause__ or seen.__context__
    return "PreconditionFailed" in str(exc) or "precondition" in str(exc).lower()


def _obstore_config(options: dict[str, Any]) -> dict[str, Any] | None:
    """obstore ``S3Store`` keyword arguments equivalent to the s3fs ``options``, or None when they cannot be
    mapped exactly (then s3fs carries the blob bytes too)."""
    try:
        import obstore  # noqa: F401
    except ImportError:
        return None
    if set(options) - OBSTORE_OPTIONS:
        return None
    client = dict(options.get("client_kwargs") or {})
    endpoint = options.get("endpoint_url") or client.pop("endpoint_url", None)
    region = client.pop("region_name", None) or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if client or (region is None and not endpoint):
        return None  # real AWS with no region given: botocore finds the bucket's region, obstore would not
    config: dict[str, Any] = {"region": region or "us-east-1"}
    if options.get("anon"):
        config["skip_signature"] = True
    elif options.get("key") and options.get("secret"):
        config.update(access_key_id=options["key"], secret_access_key=options["secret"])
        if options.get("token"):
            config["token"] = options["token"]
    elif not (os.environ.get("AWS_ACCESS_KEY_ID") and os.environ.get("AWS_SECRET_ACCESS_KEY")):
        return None  # profiles, instance roles, SSO...: leave credential discovery to botocore
    if endpoint:
        config.update(endpoint=endpoint, virtual_hosted_style_request=False)
    return config


def _obstore_transport(bucket: str, config: dict[str, Any], budget: ByteBudget, *, pool: int,
                       limits: Limits) -> ObstoreTransport:
    from datetime import timedelta

    from obstore.store import S3Store

    endpoint = str(config.get("endpoint", ""))
    client = {"connect_timeout": timedelta(seconds=CONNECT_TIMEOUT_S), "allow_http": endpoint.startswith("http://")}
    store = S3Store(bucket, client_options=client, retry_config={"max_retries": 0}, **config)
    return ObstoreTransport(store, budget, pool_size=pool, limits=limits)
