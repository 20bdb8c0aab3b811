"""Registration records that backend hooks return (conda-style), and lazy resolution of their factories.

A factory is a callable or a dotted path ``"package.module:attr"`` imported only when the backend is used
(fsspec's registry works the same way), so a missing optional dependency fails only then, with ``install_hint``.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blobstate.errors import MissingDependencyError, PluginError

Factory = Callable[..., Any] | str
#: how to install a missing dependency: the text, or a callable giving it when it is shown (the built-ins' hints
#: read pip's install record, ``extra_install_hint``, which costs ``importlib.metadata``: not on every start-up)
InstallHint = str | Callable[[], str]


def hint_text(hint: InstallHint) -> str:
    """The text of an install hint (a callable one is called now)."""
    return hint() if callable(hint) else hint


def resolve_factory(factory: Factory, *, what: str, install_hint: InstallHint = "") -> Callable[..., Any]:
    """Import a dotted-path factory (``"pkg.mod:attr"`` or ``"pkg.mod.attr"``) or return a callable as is.

    Raises ``MissingDependencyError`` (with ``install_hint``) when the module's dependency is not installed and
    ``PluginError`` when the path is wrong.
    """
    if callable(factory):
        return factory
    module_name, _, attr = factory.partition(":") if ":" in factory else factory.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise missing_dependency(what, exc, install_hint) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise PluginError(f"{what}: {module_name} has no attribute {attr!r}") from None


def moved_to(target: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's ``__getattr__`` and ``__dir__`` (PEP 562) making it an alias of the module ``target``, imported on
    first use: a module that moved keeps its old name for third-party code that imports it."""

    def getattr_(name: str) -> Any:
        return getattr(importlib.import_module(target), name)

    def dir_() -> list[str]:
        return dir(importlib.import_module(target))

    return getattr_, dir_


@functools.cache
def _install_source() -> dict[str, Any]:
    """pip's record of where this blobstate was installed from (PEP 610 ``direct_url.json``), read once."""
    import json
    from importlib import metadata

    for dist in metadata.distributions(name="blobstate"):  # a source tree's egg-info may come first on sys.path
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "{}")
        except ValueError:
            continue
        if direct:
            return direct
    return {}


def extra_install_hint(extra: str) -> str:
    """How to add blobstate's optional ``extra`` (``s3``, ``gcs``, ``demo``, ...) to this installation.

    blobstate is not published on a package index: it is installed from a clone (``pip install -e ".[s3]"`` in
    the clone) or from a built wheel (``pip install "blobstate[s3] @ file:///path/blobstate-VERSION.whl"``). The
    hint names this installation's own source where pip recorded it (PEP 610 ``direct_url.json``): the clone's
    directory for an editable install, the wheel's path for a wheel.
    """
    direct = _install_source()
    url = str(direct.get("url", ""))
    if url.startswith("file://") and direct.get("dir_info", {}).get("editable"):
        return f'pip install -e "{url[len("file://"):]}[{extra}]" (blobstate is installed from that clone)'
    if url.startswith("file://"):
        return f'pip install "blobstate[{extra}] @ {url}"'
    return (f'pip install -e ".[{extra}]" in a clone of blobstate, or pip install "blobstate[{extra}] @ '
            'file:///path/to/blobstate-VERSION-py3-none-any.whl" from a built wheel (blobstate is not on PyPI)')


def missing_dependency(what: str, exc: ImportError, install_hint: InstallHint) -> MissingDependencyError:
    """The one way a missing optional dependency is reported: what needs it, and the record's install hint."""
    text = hint_text(install_hint)
    hint = f"; install it with: {text}" if text else ""
    return MissingDependencyError(f"{what} needs {exc.name or 'a module'!s}, which is not installed{hint}")


def takes_settings(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` declares a ``settings`` keyword (a ``blobstate.config.settings.Settings`` is then handed
    to it); a factory that does not (a third party's written before) is called as before."""
    try:
        return _takes_settings(factory)
    except TypeError:  # unhashable: look each time
        return _declares(factory, "settings")


@functools.cache
def _takes_settings(factory: Callable[..., Any]) -> bool:
    return _declares(factory, "settings")


def _declares(factory: Callable[..., Any], name: str) -> bool:
    import inspect

    try:
        parameter = inspect.signature(factory).parameters.get(name)
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD)


def instantiate(spec: Spec, what: str, *args: Any, settings: Any = None, **kwargs: Any) -> Any:
    """Resolve ``spec.factory`` and call it, with ``settings`` (the call's ``Settings``) when the factory declares
    that keyword (``takes_settings``). An ``ImportError`` while importing *or* constructing the backend (a
    database driver chosen by URL, say) becomes ``MissingDependencyError`` with ``spec.install_hint``."""
    factory = resolve_factory(spec.factory, what=what, install_hint=spec.install_hint)
    if settings is not None and takes_settings(factory):
        kwargs["settings"] = settings
    try:
        return factory(*args, **kwargs)
    except ImportError as exc:
        raise missing_dependency(what, exc, spec.install_hint) from exc


@dataclass(frozen=True)
class _UrlBackendSpec:
    """A backend selected by URL scheme: ``schemes`` it serves (``"*"`` for any), ``priority`` among rivals."""

    name: str
    schemes: tuple[str, ...]
    factory: Factory
    priority: int = 0
    install_hint: InstallHint = ""
    description: str = ""


@dataclass(frozen=True)
class BlobStoreSpec(_UrlBackendSpec):
    """A blob store backend: serves URLs whose scheme is in ``schemes``.

    ``factory(url: str, *, storage_options: dict, ttl_mode: str | None, max_concurrency: int[, settings]) ->
    BlobStore``: ``url`` without its query and ``storage_options`` already resolved (environment < query <
    explicit); ``settings`` (``blobstate.config.settings.Settings``: transfer budget, rate limits, fsync) only
    when the factory declares it. Of two specs for one scheme the higher ``priority`` wins; equal priorities are an
    ambiguity error unless the configuration names one (``BLOBSTATE_BACKEND_<SCHEME>=name``).
    """


@dataclass(frozen=True)
class CheckpointLogSpec(_UrlBackendSpec):
    """A checkpoint log backend for URLs whose scheme is in ``schemes``.

    ``factory(url: str, *, storage_options: dict[, blob_store][, settings]) -> CheckpointLog``: ``settings`` only
    when the factory declares it.
    """


@dataclass(frozen=True)
class LocalStoreSpec:
    """A local store type (``rocksdb``, ``dir``, ...).

    ``factory(**options) -> LocalStore``; ``detect`` (callable or dotted path, ``(directory: str) -> bool``) lets
    ``--store-type`` be guessed: the highest-priority spec whose ``detect`` says yes is used.
    """

    name: str
    store_type: str
    factory: Factory
    priority: int = 0
    detect: Factory | None = None
    install_hint: InstallHint = ""
    description: str = ""


@dataclass(frozen=True)
class KeyProviderSpec:
    """A key provider (``file``, a KMS): wraps and unwraps the data key of encrypted repositories
    (``blobstate.plugin.interfaces.KeyProvider``), selected by ``name`` (recorded in the repository marker; the
    highest ``priority`` wins a tie, as for every backend).

    ``factory(key_id: str | None, options: Mapping[str, Any]) -> KeyProvider``: ``key_id`` is the key the marker
    records (or ``--key-id`` for a new repository), ``options`` what the operator configured (``key_file`` for the
    ``file`` provider: ``--key-file``, ``BLOBSTATE_KEY_FILE``).
    """

    name: str
    factory: Factory
    priority: int = 0
    install_hint: InstallHint = ""
    description: str = ""


Spec = BlobStoreSpec | CheckpointLogSpec | LocalStoreSpec | KeyProviderSpec
