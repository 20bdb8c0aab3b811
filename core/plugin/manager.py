"""The plugin manager: pluggy's ``PluginManager`` subclassed (as conda's ``CondaPluginManager`` is); built-ins and
third-party plugins registered the same way, backends selected by scheme.

Built-ins come from the registration table ``blobstate.plugins.registry.KNOWN_IMPLEMENTATIONS`` through the
``register()`` a third party's entry point goes through. Entry points (group ``blobstate``) load tolerantly: a
plugin that fails to import or to register, implements a hook that does not exist (a misspelled name), or whose
``blobstate_configure`` raises is recorded as broken, unregistered and reported by ``blobstate plugins``, never a
crash of anything else. Two plugins giving one backend name make only the selection of that backend fail.
``BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD=1`` turns entry points off (they are read once per process);
``BLOBSTATE_PLUGINS=mod1,mod2`` registers extra plugin modules (like ``PYTEST_PLUGINS``);
``BLOBSTATE_DISABLE_PLUGINS=name1,name2`` blocks plugins by name, built-ins too; ``BLOBSTATE_TRACE_PLUGINS=1``
traces every hook call on stderr. Every hook is called through ``pm.hook``.

The manager is process-wide, built once per set of plugin settings (``get_plugin_manager``: the fields of
``blobstate.config.settings.Settings`` that say which plugins to add, block and trace), with the settings of the
command or call that first asks for it; a call asking for other plugins gets its own, never one built without them.
``blobstate_configure`` receives those settings and the effective configuration
(``blobstate.config.settings.effective_configuration``) derived from them: the CLI's options named as the API names
them (secrets redacted), resolved defaults, and the ``BLOBSTATE_*`` variables as they are; delivered with
``call_historic``, so a plugin registered later gets it too. A backend is selected with the settings of the call
that opens it (``select``: ``BLOBSTATE_BACKEND_<SCHEME>``).
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import pluggy

from blobstate.config.settings import Settings, effective_configuration
from blobstate.errors import ConfigurationError, PluginError
from blobstate.plugin import entry_points as installed
from blobstate.plugin import hookspecs
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, KeyProviderSpec, LocalStoreSpec, Spec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "blobstate"
#: The built-in plugins, loaded by reference as an entry point is (``load_reference``): the registration table of
#: ``blobstate.plugins`` (names and dotted paths, no backend imported).
BUILTIN_PLUGINS = "blobstate.plugins.registry:builtin_plugins"
#: This distribution's name and version, as ``blobstate plugins`` shows the built-ins'.
DISTRIBUTION = "blobstate"


# msgspec Structs, not dataclasses: each created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class PluginInfo(msgspec.Struct, frozen=True):
    """A plugin as ``blobstate plugins`` shows it: name, distribution and version, backends, or its error."""

    name: str
    distribution: str
    version: str
    builtin: bool
    specs: tuple[Spec, ...] = ()
    error: str | None = None


class Registered(msgspec.Struct, frozen=True):
    """A backend spec with the plugin and distribution that provided it."""

    spec: Spec
    plugin: str
    distribution: str


def _trace_before(hook_name: str, hook_impls: list[Any], kwargs: dict[str, Any]) -> None:
    plugins = ", ".join(impl.plugin_name for impl in reversed(hook_impls))
    sys.stderr.write(f"blobstate: plugin trace: {hook_name}({', '.join(kwargs)}) -> [{plugins}]\n")


def _trace_after(outcome: Any, hook_name: str, hook_impls: list[Any], kwargs: dict[str, Any]) -> None:
    exc = outcome.exception
    what = f"raised {type(exc).__name__}" if exc is not None else f"returned {_count(outcome.get_result())}"
    sys.stderr.write(f"blobstate: plugin trace: {hook_name} {what}\n")


def _count(result: Any) -> str:
    return f"{len(result)} result(s)" if isinstance(result, list) else repr(type(result).__name__)


class BlobstatePluginManager(pluggy.PluginManager):
    """pluggy's ``PluginManager`` (project ``blobstate``) plus blobstate's backend registry. Use
    ``get_plugin_manager()``; after conda's ``CondaPluginManager``.

    Hooks are called through ``self.hook``; ``blobstate_configure`` is historic (``call_historic``), so a plugin
    registered at any time gets the configuration when it registers. ``settings.disabled_plugins``
    (``BLOBSTATE_DISABLE_PLUGINS``) are blocked by name (pluggy's ``set_blocked``: their registration is ignored);
    ``settings.trace_plugins`` (``BLOBSTATE_TRACE_PLUGINS=1``) writes every hook call and its outcome to stderr
    (``add_hookcall_monitoring``).
    """

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        #: the settings the manager was built with (``Settings()``, the defaults, when none are given)
        self.settings = settings if settings is not None else Settings()
        self._dists: dict[str, tuple[str, str, bool]] = {}
        self.broken: list[PluginInfo] = []
        #: (spec class, backend name) -> why it cannot be selected (two plugins give that name)
        self.conflicts: dict[tuple[type, str], str] = {}
        #: the configuration delivered to ``blobstate_configure`` (None until it is delivered)
        self.config: dict[str, Any] | None = None
        self._specs_cache: list[Registered] | None = None
        for name in self.settings.disabled_plugins:
            self.set_blocked(name)
        if self.settings.trace_plugins:
            self.add_hookcall_monitoring(_trace_before, _trace_after)

    def register(self, plugin: object, name: str | None = None, *, distribution: str = "", version: str = "",
                 builtin: bool = False) -> str | None:
        """Register a plugin object or module under ``name`` (the path built-ins and third parties share); None
        when ``name`` is blocked. A plugin whose ``blobstate_configure`` raises is dropped as broken."""
        name = name or self.get_canonical_name(plugin)
        if self.has_plugin(name):
            raise PluginError(f"a plugin named {name!r} is registered already")
        if self.is_blocked(name):
            log.info("plugin %r is disabled (BLOBSTATE_DISABLE_PLUGINS)", name)
            return None
        self._dists[name] = (distribution, version, builtin)
        self._specs_cache = None
        try:
            return super().register(plugin, name=name)
        except Exception as exc:
            if self.get_plugin(name) is not plugin:  # refused before it was registered: the caller's error
                raise
            if isinstance(exc, pluggy.PluginValidationError):  # a hook with wrong arguments: not registered
                super().unregister(name=name)
                raise
            # registered, then the historic configuration raised in its blobstate_configure
            self.drop_broken(name, f"blobstate_configure raised {type(exc).__name__}: {exc}")
            return None

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        """pluggy's, without looking at dunder names (``__init__``, ``__repr__``, ...), which are never hooks: pluggy
        inspects every attribute of a plugin (``inspect.getattr_static``), and those are most of them (half the
        time it takes to register the built-ins). A decorated hook with any other name, misspelled ones included,
        is still found and checked."""
        if name.startswith("__") and name.endswith("__"):
            return None
        return super().parse_hookimpl_opts(plugin, name)  # type: ignore[arg-type]

    def configure(self, config: dict[str, Any]) -> None:
        """Deliver ``config`` and the settings to every plugin's ``blobstate_configure``, now and at every later
        registration (pluggy's ``call_historic``). Call it once, before registering plugins, so that a hook that
        raises is attributed to its plugin (and the plugin dropped as broken)."""
        self.config = config
        self.hook.blobstate_configure.call_historic(kwargs={"config": config, "settings": self.settings})

    def drop_broken(self, name: str, error: str) -> None:
        """Record plugin ``name`` as broken and unregister it (its hooks are never called again)."""
        self._mark_broken(name, error)
        if self.has_plugin(name):
            super().unregister(name=name)
        self._specs_cache = None

    def drop_invalid(self) -> None:
        """Drop every plugin implementing a hook that has no specification (a misspelled hook name)."""
        for _ in range(len(self.get_plugins()) + 1):
            try:
                super().check_pending()
                return
            except pluggy.PluginValidationError as exc:
                name = self.get_name(exc.plugin) or str(exc.plugin)
                self.drop_broken(name, f"unknown hook: {exc}")

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any:
        self._specs_cache = None
        out = super().unregister(plugin, name)
        self._dists.pop(name or "", None)
        return out

    def check_pending(self) -> None:
        """Raise ``PluginError`` for a hook implementation with no matching spec (a misspelled hook name)."""
        try:
            super().check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc)) from exc

    # -- backends ------------------------------------------------------------------------------------------
    def _results_by_plugin(self, hook_name: str) -> Iterator[tuple[str, list[Spec]]]:
        """Each plugin's records from ``hook_name``, called through ``self.hook`` one plugin at a time (pluggy's
        ``subset_hook_caller``) so that a plugin whose hook raises is dropped alone."""
        caller = getattr(self.hook, hook_name)
        plugins = [(name, plugin) for name, plugin in self.list_name_plugin() if plugin is not None]
        for name, plugin in plugins:
            if caller not in (self.get_hookcallers(plugin) or ()):
                continue
            only = self.subset_hook_caller(hook_name, [p for _, p in plugins if p is not plugin])
            try:
                yield name, [spec for batch in only() for spec in (batch or ())]
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the others
                self._mark_broken(name, f"{hook_name} raised {exc!r}")

    def registered_specs(self) -> list[Registered]:
        """Every backend spec from every plugin; duplicate backend names are recorded in ``conflicts`` (a
        ``PluginError`` naming both when that name is selected)."""
        if self._specs_cache is not None:
            return self._specs_cache
        out: list[Registered] = []
        seen: dict[tuple[type, str], Registered] = {}
        for hook_name in ("blobstate_blob_stores", "blobstate_checkpoint_logs", "blobstate_local_stores",
                          "blobstate_key_providers"):
            for plugin_name, specs in self._results_by_plugin(hook_name):
                for spec in specs:
                    reg = Registered(spec, plugin_name, self._dists.get(plugin_name, ("", "", False))[0])
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

    def warn_backend_names_blocked(self) -> None:
        """Warn (``UserWarning``) for each name in ``settings.disabled_plugins`` that is no plugin's but a backend's
        (``sql`` is the checkpoint log of plugin ``sql_log``): blocking it blocks nothing, so the warning names the
        plugin to block instead. Called once the built-ins and entry points are registered."""
        for name in self.settings.disabled_plugins:
            if self.has_plugin(name) or name in self._dists:
                continue
            owners = sorted({r.plugin for r in self.registered_specs() if r.spec.name == name})
            if owners:
                warnings.warn(f"BLOBSTATE_DISABLE_PLUGINS: {name!r} is no plugin, nothing is disabled by it; it is a "
                              f"backend of plugin {owners[0]!r}: set BLOBSTATE_DISABLE_PLUGINS={owners[0]} to "
                              "disable that plugin (`blobstate plugins` lists plugins and their backends)",
                              UserWarning, stacklevel=3)

    def _mark_broken(self, name: str, error: str) -> None:
        dist, version, builtin = self._dists.get(name, ("", "", False))
        self.broken = [b for b in self.broken if b.name != name]
        self.broken.append(PluginInfo(name, dist, version, builtin, error=error))
        warnings.warn(f"blobstate plugin {name!r} is broken: {error}", stacklevel=2)

    def select(self, kind: type, key: str, settings: Settings | None = None, *, exact: bool = False) -> Registered:
        """Pick the backend of ``kind`` (a spec class) serving ``key`` (a URL scheme or a store type).

        The highest priority wins; ``BLOBSTATE_BACKEND_<KEY>=<backend name>`` in ``settings`` (default: the
        manager's) overrides. With ``exact`` only a backend naming ``key`` itself serves it, never a catch-all
        (``*``): a plugin's own scheme (``delayed+file://``) that no plugin registered is an error, not another
        backend. Raises ``ConfigurationError`` when none serves ``key`` and ``PluginError`` on a tie (naming both
        distributions).
        """
        candidates = [
            r for r in self.registered_specs() if isinstance(r.spec, kind) and _serves(r.spec, key, exact=exact)
        ]
        names = [(type(r.spec), r.spec.name) for r in candidates]
        for name in names:
            if names.count(name) > 1 and name in self.conflicts:  # one name, two plugins, both for this key
                raise PluginError(self.conflicts[name])
        variable, wanted = (settings if settings is not None else self.settings).backend_override(key)
        if wanted:
            chosen = [r for r in candidates if r.spec.name == wanted]
            if chosen:
                return chosen[0]
            # The variable is per scheme, shared by the backend kinds: naming another kind's backend for this
            # scheme (a blob store, when the checkpoint log is being chosen) leaves this kind to its priorities.
            if not any(r.spec.name == wanted and not isinstance(r.spec, kind) and _serves(r.spec, key, exact=exact)
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
        for name, plugin in self.list_name_plugin():
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
            getattr(self.hook, hook_name)(**kwargs)
        except Exception:  # noqa: BLE001
            log.warning("a %s observer raised; ignored", hook_name, exc_info=True)


#: The name of each kind of backend, as messages and ``blobstate plugins`` show it.
KIND_NAMES: dict[type, str] = {BlobStoreSpec: "blob store", CheckpointLogSpec: "checkpoint log",
                               LocalStoreSpec: "local store", KeyProviderSpec: "key provider"}


def spec_keys(spec: Spec) -> tuple[str, ...]:
    """What a backend is selected by: its URL schemes, its store type, or (a key provider) its name."""
    if isinstance(spec, KeyProviderSpec):
        return (spec.name,)
    return (spec.store_type,) if isinstance(spec, LocalStoreSpec) else tuple(spec.schemes)


def _serves(spec: Spec, key: str, *, exact: bool = False) -> bool:
    """Whether ``spec`` serves ``key``: it names it, or (unless ``exact``) it is a catch-all (``*``)."""
    keys = spec_keys(spec)
    return key in keys or (not exact and "*" in keys)


def _own_version() -> str:
    """blobstate's version (the package's ``__version__``, already imported: this module is part of it)."""
    return str(getattr(sys.modules.get(DISTRIBUTION), "__version__", ""))


def _load_entry_points(mgr: BlobstatePluginManager, cache_dir: str | None) -> None:
    for ep in installed.entry_points(cache_dir):  # once per process, from a cache while nothing installed changed
        dist, version = ep.distribution, ep.version
        if mgr.has_plugin(ep.name) or mgr.is_blocked(ep.name):
            continue
        try:
            plugin = load_reference(ep.value)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is a warning, not a crash
            mgr._dists[ep.name] = (dist, version, False)
            mgr._mark_broken(ep.name, f"import failed: {type(exc).__name__}: {exc}")
            continue
        try:
            mgr.register(plugin, ep.name, distribution=dist, version=version)
        except Exception as exc:  # noqa: BLE001
            mgr._dists[ep.name] = (dist, version, False)
            mgr._mark_broken(ep.name, f"registration failed: {exc}")


def build_plugin_manager(settings: Settings | None = None, *, autoload: bool | None = None,
                         extra: Iterable[str] = ()) -> BlobstatePluginManager:
    """A fresh manager built with ``settings`` (default: the environment's, ``Settings.from_environ``): the
    configuration delivered (historic), then the built-ins, entry points (unless disabled) and ``extra`` /
    ``BLOBSTATE_PLUGINS``; plugins named in ``BLOBSTATE_DISABLE_PLUGINS`` are blocked."""
    mgr = BlobstatePluginManager(settings if settings is not None else Settings.from_environ())
    mgr.configure(effective_configuration(mgr.settings))
    builtin_plugins = load_reference(BUILTIN_PLUGINS)
    assert callable(builtin_plugins)
    for name, plugin in builtin_plugins().items():
        mgr.register(plugin, name, distribution=DISTRIBUTION, version=_own_version(), builtin=True)
    if autoload is None:
        autoload = mgr.settings.plugins_autoload
    if autoload:
        _load_entry_points(mgr, mgr.settings.cache_dir)
    for module_name in [*extra, *mgr.settings.plugins]:
        module_name = module_name.strip()
        if not module_name or mgr.has_plugin(module_name) or mgr.is_blocked(module_name):
            continue
        try:
            mgr.register(load_reference(module_name), module_name)
        except Exception as exc:  # noqa: BLE001
            mgr._mark_broken(module_name, f"import failed: {type(exc).__name__}: {exc}")
    mgr.drop_invalid()
    mgr.warn_backend_names_blocked()
    return mgr


def load_reference(reference: str) -> object:
    """The plugin an entry-point style reference names: ``"pkg.module"`` (the module) or ``"pkg.module:obj.attr"``
    (an entry point's extras, ``[extra]``, are ignored, as ``EntryPoint.load`` does)."""
    module_name, _, attr = reference.split("[", 1)[0].strip().partition(":")
    value: object = importlib.import_module(module_name.strip())
    for part in filter(None, attr.strip().split(".")):
        value = getattr(value, part)
    return value


def plugin_settings(settings: Settings) -> tuple[Any, ...]:
    """The fields of ``settings`` a manager is built from (plugins added, blocked, entry points read or not,
    traced, the entry-point cache): two settings that agree on them get the same process-wide manager."""
    return (settings.plugins, settings.disabled_plugins, settings.plugins_autoload, settings.trace_plugins,
            settings.cache_dir)


_lock = threading.Lock()
#: The process-wide managers, one per ``plugin_settings`` asked for.
_managers: dict[tuple[Any, ...], BlobstatePluginManager] = {}


def get_plugin_manager(settings: Settings | None = None) -> BlobstatePluginManager:
    """The process-wide plugin manager for ``settings`` (default: the environment's, ``Settings.from_environ``):
    built on first use for their ``plugin_settings`` and kept, so every call whose settings name the same plugins
    gets the same manager (its observers, its registrations), and a call whose settings name other plugins
    (``BLOBSTATE_PLUGINS``, ``BLOBSTATE_DISABLE_PLUGINS``, ...) never gets a manager built for someone else's.
    ``blobstate_configure`` receives the settings of the first call of each. Raises ``ConfigurationError`` for a
    malformed environment."""
    settings = settings if settings is not None else Settings.from_environ()
    key = plugin_settings(settings)
    with _lock:
        manager = _managers.get(key)
        if manager is None:
            manager = _managers[key] = build_plugin_manager(settings)
        return manager


def reset_plugin_manager(manager: BlobstatePluginManager | None = None) -> None:
    """Drop every process-wide manager (each is rebuilt lazily), and install ``manager``, if given, as the one its
    own settings get; for tests and embedding. The entry points are read again by the next manager built (a
    distribution installed since is seen)."""
    with _lock:
        _managers.clear()
        if manager is not None:
            _managers[plugin_settings(manager.settings)] = manager
        installed.entry_points.cache_clear()
