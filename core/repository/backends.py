"""Opening backends by URL or store type through the plugin manager, with the settings of the call that opens them.

A blob store's storage options are resolved here, once (``blobstate.config.options.resolve``: the settings'
``BLOBSTATE_STORAGE_OPTIONS`` < the URL's query < the explicit options), and its factory is given the URL without
its query and the resolved options; every factory that declares a ``settings`` keyword is given the settings
(``blobstate.plugin.records.instantiate``)."""

from __future__ import annotations

import os
from typing import Any

from blobstate.config.options import resolve
from blobstate.config.settings import Settings
from blobstate.errors import ConfigurationError
from blobstate.plugin.interfaces import BlobStore, CheckpointLog, LocalStore
from blobstate.plugin.manager import get_plugin_manager
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec, instantiate, resolve_factory
from blobstate.repository.retry import RetryingBlobStore

DEFAULT_MAX_CONCURRENCY = 8


def normalize_url(url: str) -> str:
    """Plain paths become absolute ``file://`` URLs; other URLs are returned as they are.

    A URL is what ``fsspec.core.split_protocol`` finds a protocol in (``<two or more chars>://...``, or ``data:``),
    tested here without importing fsspec (a local repository never needs it: ``plugins.fsspec_info.local_root``).
    """
    if not url:
        raise ConfigurationError("an empty URL")
    scheme, sep, _ = url.partition("://")
    if not (sep and len(scheme) > 1) and not url.startswith("data:"):
        return "file://" + os.path.abspath(os.path.expanduser(url))
    return url


def url_scheme(url: str) -> str:
    """The scheme a backend is selected by: ``s3``, ``file``, ``kafka``, ``postgresql+psycopg`` -> ``postgresql``."""
    scheme = url.split("://", 1)[0] if "://" in url else "file"
    return scheme.split("+", 1)[0].lower()


def _select(kind: type, url: str, settings: Settings) -> Any:
    """The spec of the backend of ``kind`` for ``url``, chosen by the plugin manager ``settings`` ask for. A compound
    scheme (``delayed+file``, ``postgresql+psycopg``) names a plugin's own scheme (its first part): only a backend
    naming it serves it, never a catch-all (``*``), so a plugin missing from ``settings`` is a
    ``ConfigurationError``, not another backend silently used in its place."""
    compound = "+" in (url.split("://", 1)[0] if "://" in url else "")
    return get_plugin_manager(settings).select(kind, url_scheme(url), settings, exact=compound).spec


def open_blob_store(url: str, *, settings: Settings | None = None, storage_options: dict[str, Any] | None = None,
                    ttl_mode: str | None = None, max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
                    retry: bool = True) -> BlobStore:
    """The blob store for ``url`` from the plugin with the highest priority for its scheme, opened with
    ``settings`` (default ``Settings()``: the defaults, no environment).

    With ``retry`` (default) every call retries transient faults (``settings.retry_attempts`` attempts). Raises
    ``ConfigurationError`` for an unknown scheme (a compound one, ``delayed+file``, whose plugin is not registered)
    and ``MissingDependencyError`` (with the ``pip install`` hint) for a
    missing extra.
    """
    settings = settings if settings is not None else Settings()
    url, storage_options = resolve(normalize_url(url), storage_options, environ=settings.environ)
    spec = _select(BlobStoreSpec, url, settings)
    store = instantiate(spec, f"blob store {spec.name!r}", url, storage_options=storage_options, ttl_mode=ttl_mode,
                        max_concurrency=max_concurrency, settings=settings)
    return RetryingBlobStore(store, attempts=settings.retry_attempts) if retry else store


def open_checkpoint_log(url: str, *, settings: Settings | None = None, storage_options: dict[str, Any] | None = None,
                        blob_store: BlobStore | None = None) -> CheckpointLog:
    """The checkpoint log for ``url`` (``file://``/any blob store URL, ``kafka://``, ``sqlite:///``, ...), opened
    with ``settings`` (default ``Settings()``).

    ``blob_store``: the repository's store, already open, when ``url`` is the repository's own URL; it is passed
    to the factory (``factory(url, storage_options=..., blob_store=...)``) so that a log living on a blob store
    (the file log) shares it instead of opening the repository a second time. The log does not close it. A
    relative SQLite URL (``sqlite:///log.db``) is made absolute against the current directory first.
    """
    from blobstate.repository.log_identity import absolute_log_url

    settings = settings if settings is not None else Settings()
    url = normalize_url(url) if "://" not in url else absolute_log_url(url)
    spec = _select(CheckpointLogSpec, url, settings)
    extra = {"blob_store": blob_store} if blob_store is not None else {}
    return instantiate(spec, f"checkpoint log {spec.name!r}", url, storage_options=dict(storage_options or {}),
                       settings=settings, **extra)


def open_repository_log(url: str, log: str | None, store: BlobStore, storage_options: dict[str, Any] | None,
                        log_options: dict[str, Any] | None, settings: Settings) -> CheckpointLog:
    """The checkpoint log of the repository at ``url`` (open on ``store``): ``log``, default the file log inside it
    (sharing ``store``); a log on another URL of the repository's scheme gets ``storage_options`` unless
    ``log_options`` are given (same cloud, same credentials), any other log ``log_options``."""
    if log is None or normalize_url(log) == url:
        return open_checkpoint_log(url, settings=settings, storage_options=storage_options, blob_store=store)
    same_cloud = log_options is None and url_scheme(normalize_url(log)) == url_scheme(url)
    return open_checkpoint_log(log, settings=settings, storage_options=storage_options if same_cloud else log_options)


def open_local_store(store_type: str, *, settings: Settings | None = None, **options: Any) -> LocalStore:
    """The local store plugin for ``store_type`` (``rocksdb``, ``dir``, or a third party's), selected with
    ``settings`` (default ``Settings()``)."""
    settings = settings if settings is not None else Settings()
    spec = get_plugin_manager(settings).select(LocalStoreSpec, store_type, settings).spec
    return instantiate(spec, f"local store {spec.name!r}", settings=settings, **options)


def detect_store_type(directory: str, *, settings: Settings | None = None) -> str:
    """The store type of ``directory``: the highest-priority local store plugin whose ``detect`` says yes."""
    for reg in get_plugin_manager(settings).local_store_types():
        spec = reg.spec
        assert isinstance(spec, LocalStoreSpec)
        if spec.detect is None:
            continue
        try:
            detect = resolve_factory(spec.detect, what=f"local store {spec.name!r}")
            if detect(directory):
                return spec.store_type
        except Exception:  # noqa: BLE001 - a broken detector must not hide the others
            continue
    raise ConfigurationError(f"cannot tell the store type of {directory}; pass --store-type")
