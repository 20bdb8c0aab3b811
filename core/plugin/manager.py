"""The plugin manager: built-ins and third-party plugins registered the same way, backends selected by scheme.

Built-ins come from ``blobstate.plugins.BUILTIN_PLUGINS`` through the same ``register()`` a third party's entry
point goes through. Entry points (group ``blobstate``) load tolerantly: a plugin that fails to import or to
register, implements a hook that does not exist (a misspelled name), or whose ``blobstate_configure`` raises is
recorded as broken, unregistered and reported by ``blobstate plugins``, never a crash of anything else. Two
plugins giving one backend name make only the selection of that backend fail. ``BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD=1``
turns entry points off; ``BLOBSTATE_PLUGINS=mod1,mod2`` registers extra plugin modules (like ``PYTEST_PLUGINS``).

``blobstate_configure`` receives the effective configuration (``effective_configuration``): the settings a
command runs with (the CLI's options, named as the API names them, secrets redacted), resolved defaults, and the
``BLOBSTATE_*`` variables as they are.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pluggy

from blobstate.errors import ConfigurationError, PluginError
from blobstate.plugin import hookspecs
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec, Spec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "blobstate"


@dataclass(frozen=True)
class PluginInfo:
    """A plugin as ``blobstate plugins`` shows it: name, distribution and version, backends, or its error."""

    name: str
    distribution: str
    version: str
    builtin: bool
    specs: tuple[Spec, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Registered:
    """A backend spec with the plugin and distribution that provided it."""

    spec: Spec
    plugin: str
    distribution: str


@dataclass
class BlobstatePluginManager:
    """pluggy's ``PluginManager`` plus blobstate's backend registry. Use ``get_plugin_manager()``."""

    pm: pluggy.PluginManager
    _dists: dict[str, tuple[str, str, bool]] = field(default_factory=dict)
    broken: list[PluginInfo] = field(default_factory=list)
    #: (spec class, backend name) -> why it cannot be selected (two plugins give that name)
    conflicts: dict[tuple[type, str], str] = field(default_factory=dict)
    #: the configuration delivered to ``blobstate_configure`` (None until it is delivered)
    config: dict[str, Any] | None = None

    @property
    def hook(self) -> Any:
        return self.pm.hook

    def register(self, plugin: object, name: str, *, distribution: str = "", version: str = "",
                 builtin: bool = False) -> None:
        """Register a plugin object or module under ``name`` (the path built-ins and third parties share)."""
        if self.pm.has_plugin(name):
            raise PluginError(f"a plugin named {name!r} is registered already")
        self.pm.register(plugin, name=name)
        self._dists[name] = (distribution, version, builtin)
        self._specs_cache = None
        if self.config is not None:  # historic: a plugin registered later gets the configuration too
            self._configure_one(name, self.config)

    def _configure_one(self, name: str, config: dict[str, Any]) -> None:
        plugin = self.pm.get_plugin(name)
        for impl in self.pm.hook.blobstate_configure.get_hookimpls():
            if impl.plugin is not plugin:
                continue
            try:
                impl.function(config=config)
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                self.drop_broken(name, f"blobstate_configure raised {type(exc).__name__}: {exc}")

    def configure(self, config: dict[str, Any]) -> None:
        """Deliver ``config`` to every plugin's ``blobstate_configure`` (and to plugins registered later); a plugin
        whose hook raises is dropped as broken."""
        self.config = config
        for name, _ in list(self.pm.list_name_plugin()):
            if self.pm.has_plugin(name):
                self._configure_one(name, config)

    def drop_broken(self, name: str, error: str) -> None:
        """Record plugin ``name`` as broken and unregister it (its hooks are never called again)."""
        self._mark_broken(name, error)
        if self.pm.has_plugin(name):
            self.pm.unregister(name=name)
        self._specs_cache = None

    def drop_invalid(self) -> None:
        """Drop every plugin implementing a hook that has no specification (a misspelled hook name)."""
        for _ in range(len(self.pm.get_plugins()) + 1):
            try:
                self.pm.check_pending()
                return
            except pluggy.PluginValidationError as exc:
                name = self.pm.get_name(exc.plugin) or str(exc.plugin)
                self.drop_broken(name, f"unknown hook: {exc}")

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self._dists.pop(name, None)
        self._specs_cache = None

    def check_pending(self) -> None:
        """Raise ``PluginError`` for a hook implementation with no matching spec (a misspelled hook name)."""
        try:
            self.pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from exc

    # -- backends ------------------------------------------------------------------------------------------
    _specs_cache: list[Registered] | None = None

    def registered_specs(self) -> list[Registered]:
        """Every backend spec from every plugin; duplicate backend names are a ``PluginError`` naming both."""
        if self._specs_cache is not None:
            return self._specs_cache
        out: list[Registered] = []
        seen: dict[tuple[type, str], Registered] = {}
        for hook_name in ("blobstate_blob_stores", "blobstate_checkpoint_logs", "blobstate_local_stores"):
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                try:
                    specs = list(impl.function() or ())
                except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                    self._mark_broken(impl.plugin_name, f"{hook_name} raised {exc!r}")
                    continue
                for spec in specs:
                    reg = Registered(spec, impl.plugin_name, self._dists.get(impl.plugin_name, ("", "", False))[0])
                    other = seen.get((type(spec), spec.name))
                    if other is not None:
                        self.conflicts[(type(spec), spec.name)] = (
                            f"backend name {spec.name!r} is provided twice: by plugin {other.plugin!r} "
                            f"(distribution {other.distribution or '?'}) and by plugin {reg.plugin!r} "
                            f"(distribution {reg.distribution or '?'})"
                        )
                    seen[(type(spec), spec.name)] = reg
                    out.append(reg)
        self._specs_cache = out
        return out

    def _mark_broken(self, name: str, error: str) -> None:
        dist, version, builtin = self._dists.get(name, ("", "", False))
        self.broken = [b for b in self.broken if b.name != name]
        self.broken.append(PluginInfo(name, dist, version, builtin, error=error))
        warnings.warn(f"blobstate plugin {name!r} is broken: {error}", stacklevel=2)

    def select(self, kind: type, key: str) -> Registered:
        """Pick the backend of ``kind`` (a spec class) serving ``key`` (a URL scheme or a store type).

        The highest priority wins; ``BLOBSTATE_BACKEND_<KEY>=<backend name>`` overrides. Raises
        ``ConfigurationError`` when none serves ``key`` and ``PluginError`` on a tie (naming both distributions).
        """
        candidates = [
            r for r in self.registered_specs() if isinstance(r.spec, kind) and _serves(r.spec, key)
        ]
        names = [(type(r.spec), r.spec.name) for r in candidates]
        for name in names:
            if names.count(name) > 1 and name in self.conflicts:  # one name, two plugins, both for this key
                raise PluginError(self.conflicts[name])
        variable = f"BLOBSTATE_BACKEND_{key.upper().replace('-', '_').replace('+', '_')}"
        wanted = os.environ.get(variable)
        if wanted:
            chosen = [r for r in candidates if r.spec.name == wanted]
            if chosen:
                return chosen[0]
            # The variable is per scheme, shared by the backend kinds: naming another kind's backend for this
            # scheme (a blob store, when the checkpoint log is being chosen) leaves this kind to its priorities.
            if not any(r.spec.name == wanted and not isinstance(r.spec, kind) and _serves(r.spec, key)
                       for r in self.registered_specs()):
                raise ConfigurationError(f"{variable}={wanted}: no backend of that name serves {key!r}")
        if not candidates:
            known = sorted({k for r in self.registered_specs() if isinstance(r.spec, kind)
                            for k in spec_keys(r.spec)})
            raise ConfigurationError(
                f"no {KIND_NAMES.get(kind, kind.__name__)} for {key!r}; known: {', '.join(known) or 'none'}"
                " (is the plugin or extra installed? see `blobstate plugins`)"
            )
        candidates.sort(key=lambda r: r.spec.priority, reverse=True)
        if len(candidates) > 1 and candidates[0].spec.priority == candidates[1].spec.priority:
            a, b = candidates[0], candidates[1]
            raise PluginError(
                f"{KIND_NAMES.get(kind, kind.__name__)} for {key!r} is ambiguous: {a.spec.name!r} from "
                f"{a.distribution or a.plugin} "
                f"and {b.spec.name!r} from {b.distribution or b.plugin} have priority {a.spec.priority}; set "
                f"{variable}=<name> to choose"
            )
        return candidates[0]

    def selection(self) -> tuple[dict[tuple[type, str], str], list[str]]:
        """``{(spec class, scheme or store type): chosen backend name}`` for every key some backend names, and the
        selection errors (ambiguities) as text; the catch-all ``*`` is not a key."""
        chosen: dict[tuple[type, str], str] = {}
        problems: list[str] = []
        self.registered_specs()
        problems += [f"PluginError: {message}" for message in self.conflicts.values()]
        keys = sorted({(type(r.spec), key) for r in self.registered_specs() for key in spec_keys(r.spec)},
                      key=lambda k: (KIND_NAMES.get(k[0], ""), k[1]))
        for kind, key in keys:
            if key == "*":
                continue
            try:
                chosen[(kind, key)] = self.select(kind, key).spec.name
            except (ConfigurationError, PluginError) as exc:
                if f"{type(exc).__name__}: {exc}" not in problems:
                    problems.append(f"{type(exc).__name__}: {exc}")
        return chosen, problems

    def local_store_types(self) -> list[Registered]:
        regs = [r for r in self.registered_specs() if isinstance(r.spec, LocalStoreSpec)]
        return sorted(regs, key=lambda r: r.spec.priority, reverse=True)

    def plugin_infos(self) -> list[PluginInfo]:
        """Every plugin with its distribution, version and backends; broken ones with their error."""
        by_plugin: dict[str, list[Spec]] = {}
        for reg in self.registered_specs():
            by_plugin.setdefault(reg.plugin, []).append(reg.spec)
        infos = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            dist, version, builtin = self._dists.get(name, ("", "", False))
            infos.append(PluginInfo(name, dist, version, builtin, tuple(by_plugin.get(name, ()))))
        broken_names = {b.name for b in self.broken}
        infos = [i for i in infos if i.name not in broken_names]
        return sorted(infos + self.broken, key=lambda i: (not i.builtin, i.name))

    def emit(self, hook_name: str, **kwargs: Any) -> None:
        """Call an observer hook; an observer that raises is logged, never allowed to break a commit."""
        try:
            getattr(self.pm.hook, hook_name)(**kwargs)
        except Exception:  # noqa: BLE001
            log.warning("a %s observer raised; ignored", hook_name, exc_info=True)


#: The name of each kind of backend, as messages and ``blobstate plugins`` show it.
KIND_NAMES: dict[type, str] = {BlobStoreSpec: "blob store", CheckpointLogSpec: "checkpoint log",
                               LocalStoreSpec: "local store"}


def spec_keys(spec: Spec) -> tuple[str, ...]:
    """What a backend is selected by: its URL schemes, or its store type."""
    return (spec.store_type,) if isinstance(spec, LocalStoreSpec) else tuple(spec.schemes)


def _serves(spec: Spec, key: str) -> bool:
    keys = spec_keys(spec)
    return key in keys or "*" in keys


def _load_entry_points(mgr: BlobstatePluginManager) -> None:
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = ep.dist.name if ep.dist else ""
        version = ep.dist.version if ep.dist else ""
        if mgr.pm.has_plugin(ep.name) or mgr.pm.is_blocked(ep.name):
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken plugin is a warning, not a crash
            mgr._dists[ep.name] = (dist, version, False)
            mgr._mark_broken(ep.name, f"import failed: {type(exc).__name__}: {exc}")
            continue
        try:
            mgr.register(plugin, ep.name, distribution=dist, version=version)
        except Exception as exc:  # noqa: BLE001
            mgr._dists[ep.name] = (dist, version, False)
            mgr._mark_broken(ep.name, f"registration failed: {exc}")


def build_plugin_manager(*, autoload: bool | None = None, extra: Iterable[str] = ()) -> BlobstatePluginManager:
    """A fresh manager: built-ins, then entry points (unless disabled), then ``extra`` / ``BLOBSTATE_PLUGINS``."""
    from blobstate.plugins import BUILTIN_PLUGINS

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    mgr = BlobstatePluginManager(pm)
    own = metadata.version("blobstate") if _installed("blobstate") else "dev"
    for reference in BUILTIN_PLUGINS:
        mgr.register(load_reference(reference), reference.rpartition(":")[2] or reference.rsplit(".", 1)[-1],
                     distribution="blobstate", version=own, builtin=True)
    mgr.register(load_reference("blobstate.plugins.steplog"), "steplog", distribution="blobstate", version=own,
                 builtin=True)
    if autoload is None:
        autoload = os.environ.get("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "").lower() not in ("1", "true", "yes")
    if autoload:
        _load_entry_points(mgr)
    names = [*extra, *filter(None, os.environ.get("BLOBSTATE_PLUGINS", "").split(","))]
    for module_name in names:
        module_name = module_name.strip()
        if not module_name or mgr.pm.has_plugin(module_name):
            continue
        try:
            mgr.register(load_reference(module_name), module_name)
        except Exception as exc:  # noqa: BLE001
            mgr._mark_broken(module_name, f"import failed: {type(exc).__name__}: {exc}")
    mgr.drop_invalid()
    mgr.configure(effective_configuration())
    return mgr


_command: tuple[str, dict[str, Any]] | None = None
#: CLI parameter names that differ from the API's (the configuration uses the API's names).
_RENAMED = {"log_url": "log", "as_json": "json", "work_dir": "work_base"}


def set_configuration(command: str, options: dict[str, Any]) -> None:
    """Record the command being run and its options (the CLI calls this before the command runs), for
    ``effective_configuration``. Values of secret-looking options are never kept."""
    global _command
    _command = (command, dict(options))


def effective_configuration() -> dict[str, Any]:
    """What ``blobstate_configure`` receives: ``command`` (e.g. ``"backup"``; ``None`` outside the CLI) and its
    options under the API's names (``repo``, ``log``, ``job``, ``task``, ``store``, ``ttl`` in ms, ``chunk_size``
    in bytes, ``retain``, ...), ``storage_options`` and ``log_options`` (merged with ``BLOBSTATE_STORAGE_OPTIONS``;
    credentials redacted), the resolved ``work_base``, ``retry_attempts``, ``max_concurrency``,
    ``plugins_autoload``, and every ``BLOBSTATE_*`` variable under its own name (but the storage options one)."""
    from blobstate.local.workdir import default_base
    from blobstate.repository.options import ENV_VAR, from_env, merge, parse_options, redact
    from blobstate.repository.retry import retry_attempts

    config: dict[str, Any] = {k: v for k, v in os.environ.items() if k.startswith("BLOBSTATE_") and k != ENV_VAR}
    command, options = _command or (None, {})
    config.update({"command": command, "max_concurrency": 8, "retry_attempts": retry_attempts(),
                   "plugins_autoload": os.environ.get("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "").lower()
                   not in ("1", "true", "yes")})
    for name, value in options.items():
        if name in ("storage_option", "log_option"):
            continue
        config[_RENAMED.get(name, name)] = value
    try:
        env_options = from_env()
    except ConfigurationError:
        env_options = {}
    try:
        explicit = parse_options(options.get("storage_option", ()))
        log_options = parse_options(options.get("log_option", ()))
    except ConfigurationError:
        explicit, log_options = {}, {}
    config["storage_options"] = redact(merge(env_options, explicit))
    config["log_options"] = redact(log_options)
    config["work_base"] = config.get("work_base") or default_base()
    return config


def load_reference(reference: str) -> object:
    """The plugin an entry-point style reference names: ``"pkg.module"`` (the module) or ``"pkg.module:obj"``."""
    module_name, _, attr = reference.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr) if attr else module


def _installed(dist: str) -> bool:
    try:
        metadata.version(dist)
        return True
    except metadata.PackageNotFoundError:
        return False


_lock = threading.Lock()
_manager: BlobstatePluginManager | None = None


def get_plugin_manager() -> BlobstatePluginManager:
    """The process-wide plugin manager, built on first use."""
    global _manager
    with _lock:
        if _manager is None:
            _manager = build_plugin_manager()
        return _manager


def reset_plugin_manager(manager: BlobstatePluginManager | None = None) -> None:
    """Replace (or drop, to rebuild lazily) the process-wide manager; for tests and embedding."""
    global _manager
    with _lock:
        _manager = manager
