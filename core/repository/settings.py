"""One settings object: the ``BLOBSTATE_*`` environment, the CLI's options and the API's keywords, read once.

Every module that needs a setting asks ``current()`` (never ``os.environ``): the object is built from the
environment the first time, and again only when one of the variables it reads (``WATCHED``) has changed since (a
test's ``monkeypatch``, an embedding program), so a process reads its environment once. The CLI records the command and
its options with ``set_command`` before the command runs. Every verb of the public API runs with its keywords in the
settings (``api_verb``: while the call runs, in its thread, ``current()`` has them; they win over the environment,
and a running CLI command's own options, what its user typed, win over the keywords the CLI passes on to the
API). The plugin manager hands the object to every plugin with the
configuration hook (``blobstate_configure``) when it is built: inside the first CLI command or API call of a process
that needs a backend, with that command's options or that call's keywords; a plugin reads a later call's keywords
from ``current()``.

Sizes accept human units (``96MiB``, ``1GB``, ``4096``), durations too (``30s``, ``1500ms``; a plain number of
seconds where the variable's name ends in ``_S``), through ``blobstate.model.units``; booleans are read one way
(``parse_bool``). A malformed value raises ``ConfigurationError`` (exit code 2) naming the variable.

Variables (the CLI's ``--help`` lists those its options read, such as ``BLOBSTATE_REPO``):

- ``BLOBSTATE_WORK_DIR``: work directory base (journals, local checkpoints); default: the platform's state dir.
- ``BLOBSTATE_RETRY_ATTEMPTS``: attempts per storage operation (default 5).
- ``BLOBSTATE_TRANSFER_BUDGET``: bytes in flight per store (a size; default 128 MiB, at least 1 MiB).
- ``BLOBSTATE_FILE_FSYNC``: ``0`` skips fsync of local files (a benchmark switch; default on).
- ``BLOBSTATE_APPEND_RESOLVE_S``: how long an unknown append outcome is resolved (seconds, or ``30s``/``500ms``).
- ``BLOBSTATE_PLUGINS``, ``BLOBSTATE_DISABLE_PLUGINS``: plugin modules to add, plugin names to block (commas).
- ``BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD``: ignore installed plugins' entry points.
- ``BLOBSTATE_TRACE_PLUGINS``: trace every hook call on stderr.
- ``BLOBSTATE_BACKEND_<SCHEME>``: the backend to use for a URL scheme.
- ``BLOBSTATE_DEBUG``: tracebacks instead of one-line errors.
- ``BLOBSTATE_STORAGE_OPTIONS``: storage options (JSON), read by ``blobstate.repository.options``.
- ``BLOBSTATE_APPEND_ONLY``: a writer that never deletes (restic's append-only mode): post-commit retention,
  aborts and restore's init cleanup leave deletes to ``blobstate gc`` (``--append-only``).
- ``BLOBSTATE_LIMIT_UPLOAD``, ``BLOBSTATE_LIMIT_DOWNLOAD``: bytes per second this process sends to and reads
  from blob stores, all transfers together (a size: ``10MiB``; ``--limit-upload``/``--limit-download``).
- ``BLOBSTATE_COMPRESSION``: ``auto`` (default: indexes and changelogs always, data blobs where a sample says it
  pays) or ``off`` (nothing is compressed from now on; what is compressed stays readable).
- ``BLOBSTATE_KEY_FILE``: the key file of an encrypted repository (``--key-file``); ``BLOBSTATE_KEY_PROVIDER``: the
  key provider a new encrypted repository uses (default ``file``; ``blobstate.codec.keys``).

The API's keywords reach the same fields through ``api_verb`` for the length of one call, in every thread the
call's transfers run on (the blob stores' thread pools run each request in a copy of the caller's context).
"""

from __future__ import annotations

import contextvars
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from types import MappingProxyType
from typing import Any, ParamSpec, TypeVar

import msgspec
from msgspec.structs import replace

from blobstate.errors import ConfigurationError
from blobstate.model.units import parse_duration_ms, parse_size

PREFIX = "BLOBSTATE_"
MiB = 1 << 20
DEFAULT_RETRY_ATTEMPTS = 5
DEFAULT_TRANSFER_BUDGET = 128 * MiB
DEFAULT_APPEND_RESOLVE_S = 30.0
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def parse_bool(name: str, value: str | bool | None, default: bool) -> bool:
    """The one way a boolean setting is read: ``1/true/yes/on`` or ``0/false/no/off`` (any case); ``None`` or an
    empty value is ``default``. Raises ``ConfigurationError`` naming ``name`` for anything else."""
    if value is None or isinstance(value, bool):
        return default if value is None else value
    text = value.strip().lower()
    if not text:
        return default
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigurationError(f"{name}={value!r} is not a boolean (use 1/0, true/false, yes/no)")


def _size(name: str, value: str | int) -> int:
    try:
        return parse_size(value)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


def _seconds(name: str, value: str | float) -> float:
    """Seconds: a plain number is seconds (the variable's unit), anything else a duration (``30s``, ``500ms``)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    try:
        return parse_duration_ms(str(value)) / 1000
    except ConfigurationError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


def _rate(name: str, value: str | int | None) -> int | None:
    """A rate limit in bytes per second (a size: ``10MiB``), None when unset; ``ConfigurationError`` below 1 KiB/s
    (a limit that low is a typo, and a token bucket that small would move a 1 MiB piece once a quarter hour)."""
    if value is None or value == "":
        return None
    rate = _size(name, value)
    if rate < 1024:
        raise ConfigurationError(f"{name} must be at least 1KiB (bytes per second), not {value!r}")
    return rate


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (value or "").split(",") if n.strip())


def _compression(value: str | None) -> str:
    mode = (value or "auto").strip().lower()
    if mode not in ("auto", "off"):
        raise ConfigurationError(f"BLOBSTATE_COMPRESSION={value!r}: use auto or off")
    return mode


# A msgspec Struct, not a dataclass: created in ~0.1 ms instead of ~1.1 ms at start-up (issue 31).
class Settings(msgspec.Struct, frozen=True):
    """What a process runs with. Sizes in bytes, durations in seconds (``append_resolve_s``).

    ``environ`` holds every ``BLOBSTATE_*`` variable as it was read (the storage options one included; use
    ``blobstate.repository.options`` to read that one), ``command`` the CLI command (``None`` for the API) and
    ``options`` its options or the API's keywords under the API's names.
    """

    work_dir: str | None = None
    retry_attempts: int = DEFAULT_RETRY_ATTEMPTS
    transfer_budget: int = DEFAULT_TRANSFER_BUDGET
    file_fsync: bool = True
    append_resolve_s: float = DEFAULT_APPEND_RESOLVE_S
    plugins: tuple[str, ...] = ()
    disabled_plugins: tuple[str, ...] = ()
    plugins_autoload: bool = True
    trace_plugins: bool = False
    debug: bool = False
    append_only: bool = False
    limit_upload: int | None = None
    limit_download: int | None = None
    compression: str = "auto"
    key_file: str | None = None
    key_provider: str | None = None
    command: str | None = None
    options: Mapping[str, Any] = msgspec.field(default_factory=lambda: MappingProxyType({}))
    environ: Mapping[str, str] = msgspec.field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every ``BLOBSTATE_*`` variable of ``environ`` (default ``os.environ``); raises
        ``ConfigurationError`` naming the first malformed one."""
        env = {k: v for k, v in (os.environ if environ is None else environ).items() if k.startswith(PREFIX)}
        get = env.get
        budget = _size("BLOBSTATE_TRANSFER_BUDGET", get("BLOBSTATE_TRANSFER_BUDGET") or DEFAULT_TRANSFER_BUDGET)
        if budget < MiB:
            raise ConfigurationError(f"BLOBSTATE_TRANSFER_BUDGET must be at least 1 MiB, not {budget} bytes")
        try:
            attempts = max(1, int(get("BLOBSTATE_RETRY_ATTEMPTS") or DEFAULT_RETRY_ATTEMPTS))
        except ValueError:
            raise ConfigurationError(f"BLOBSTATE_RETRY_ATTEMPTS={get('BLOBSTATE_RETRY_ATTEMPTS')!r} is not a "
                                     "number") from None
        return cls(
            work_dir=get("BLOBSTATE_WORK_DIR") or None,
            retry_attempts=attempts,
            transfer_budget=budget,
            file_fsync=parse_bool("BLOBSTATE_FILE_FSYNC", get("BLOBSTATE_FILE_FSYNC"), True),
            append_resolve_s=_seconds("BLOBSTATE_APPEND_RESOLVE_S",
                                      get("BLOBSTATE_APPEND_RESOLVE_S") or DEFAULT_APPEND_RESOLVE_S),
            plugins=_names(get("BLOBSTATE_PLUGINS")),
            disabled_plugins=_names(get("BLOBSTATE_DISABLE_PLUGINS")),
            plugins_autoload=not parse_bool("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD",
                                            get("BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD"), False),
            trace_plugins=parse_bool("BLOBSTATE_TRACE_PLUGINS", get("BLOBSTATE_TRACE_PLUGINS"), False),
            debug=parse_bool("BLOBSTATE_DEBUG", get("BLOBSTATE_DEBUG"), False),
            append_only=parse_bool("BLOBSTATE_APPEND_ONLY", get("BLOBSTATE_APPEND_ONLY"), False),
            limit_upload=_rate("BLOBSTATE_LIMIT_UPLOAD", get("BLOBSTATE_LIMIT_UPLOAD")),
            limit_download=_rate("BLOBSTATE_LIMIT_DOWNLOAD", get("BLOBSTATE_LIMIT_DOWNLOAD")),
            compression=_compression(get("BLOBSTATE_COMPRESSION")),
            key_file=get("BLOBSTATE_KEY_FILE") or None,
            key_provider=get("BLOBSTATE_KEY_PROVIDER") or None,
            environ=MappingProxyType(env),
        )

    def with_options(self, command: str | None = None, **options: Any) -> Settings:
        """These settings with a command's options (or the API's keywords, which win over the environment); the work
        directory base is ``work_base`` when one is given (``work_dir`` is one store's own directory)."""
        merged = {**self.options, **options}
        work_dir = merged.get("work_base") or self.work_dir
        given = {name: options[name] for name in ("append_only", "limit_upload", "limit_download")
                 if options.get(name) is not None}
        if "append_only" in given:
            given["append_only"] = parse_bool("append_only", given["append_only"], False)
        for name in ("limit_upload", "limit_download"):
            if name in given:
                given[name] = _rate(name, given[name])
        return replace(self, command=command if command is not None else self.command,
                       options=MappingProxyType(merged), work_dir=work_dir, **given)

    def backend_override(self, key: str) -> tuple[str, str | None]:
        """``(variable, backend name or None)`` for ``BLOBSTATE_BACKEND_<KEY>`` (``-`` and ``+`` as ``_``), read
        when a backend is selected (one variable per scheme: not part of the cached object)."""
        variable = f"{PREFIX}BACKEND_{key.upper().replace('-', '_').replace('+', '_')}"
        return variable, os.environ.get(variable) or None


_lock = threading.Lock()
_cached: tuple[tuple[str | None, ...], Settings] | None = None
_command: tuple[str, dict[str, Any]] | None = None


#: The variables whose change rebuilds the settings (reading these few is cheap; scanning the whole environment
#: on every call is not: about 0.2 ms).
WATCHED = ("BLOBSTATE_WORK_DIR", "BLOBSTATE_RETRY_ATTEMPTS", "BLOBSTATE_TRANSFER_BUDGET", "BLOBSTATE_FILE_FSYNC",
           "BLOBSTATE_APPEND_RESOLVE_S", "BLOBSTATE_PLUGINS", "BLOBSTATE_DISABLE_PLUGINS",
           "BLOBSTATE_DISABLE_PLUGIN_AUTOLOAD", "BLOBSTATE_TRACE_PLUGINS", "BLOBSTATE_DEBUG",
           "BLOBSTATE_STORAGE_OPTIONS", "BLOBSTATE_APPEND_ONLY", "BLOBSTATE_LIMIT_UPLOAD", "BLOBSTATE_LIMIT_DOWNLOAD",
           "BLOBSTATE_COMPRESSION", "BLOBSTATE_KEY_FILE", "BLOBSTATE_KEY_PROVIDER")


def _fingerprint() -> tuple[str | None, ...]:
    get = os.environ.get
    return tuple(get(name) for name in WATCHED)


def current() -> Settings:
    """The process's settings: built from the environment on first use (and when a ``WATCHED`` variable
    changed since), with the CLI command's options when one is running, and inside an API call (``api_verb``) that
    call's keywords. Raises ``ConfigurationError`` for a malformed variable."""
    global _cached
    fingerprint = _fingerprint()
    with _lock:
        if _cached is None or _cached[0] != fingerprint:
            settings = Settings.from_environ()
            if _command is not None:
                settings = settings.with_options(_command[0], **_command[1])
            _cached = (fingerprint, settings)
        base = _cached[1]
    call = _call.get()
    return base if call is None else call.settings(base)


class _Call:
    """One API call's keywords, and the settings derived from them (once per base settings)."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._derived: tuple[Settings, Settings] | None = None

    def settings(self, base: Settings) -> Settings:
        """``base`` with these keywords, but for the options a CLI command recorded in it."""
        if self._derived is None or self._derived[0] is not base:
            keywords = {name: value for name, value in self.options.items() if name not in base.options}
            self._derived = (base, base.with_options(**keywords))
        return self._derived[1]


_call: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("blobstate_api_call", default=None)
#: Keyword values the settings hold (a live handle, a progress object or a callback is not a setting).
_PLAIN = (str, bytes, int, float, bool, type(None), os.PathLike, timedelta, Mapping, list, tuple)


@contextmanager
def api_call(keywords: Mapping[str, Any]) -> Iterator[Settings]:
    """Inside the block (one call of an API verb, in this thread or task: a ``contextvars`` context), ``current()``
    has ``keywords`` among its options, winning over the environment and an enclosing call's (a running CLI
    command's own options win over them); values that are not plain data (a live store handle, a callback) are
    left out. Yields the settings."""
    outer = _call.get()
    options = {**(outer.options if outer is not None else {}),
               **{name: value for name, value in keywords.items() if isinstance(value, _PLAIN)}}
    token = _call.set(_Call(options))
    try:
        yield current()
    finally:
        _call.reset(token)


P = ParamSpec("P")
R = TypeVar("R")


def api_verb(verb: Callable[P, R]) -> Callable[P, R]:
    """A verb of the public API that runs with its keywords in the settings (``api_call``); its signature is the
    verb's own."""

    @functools.wraps(verb)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with api_call(kwargs):
            return verb(*args, **kwargs)

    return call


def set_command(command: str, options: Mapping[str, Any]) -> None:
    """Record the CLI command being run and its options (under the API's names); the next ``current()`` has
    them."""
    global _command, _cached
    with _lock:
        _command = (command, dict(options))
        _cached = None


def reset() -> None:
    """Forget the command and the cached settings (tests, embedding)."""
    global _command, _cached
    with _lock:
        _command, _cached = None, None


#: CLI parameter names that differ from the API's (the configuration uses the API's names).
_RENAMED = {"log_url": "log", "as_json": "json", "work_dir": "work_base"}


def set_configuration(command: str, options: dict[str, Any]) -> None:
    """Record the command being run and its options under the API's names in the settings (the CLI calls this
    before the command runs), for ``effective_configuration``."""
    set_command(command, {_RENAMED.get(name, name): value for name, value in options.items()})


def effective_configuration(settings: Settings | None = None) -> dict[str, Any]:
    """What ``blobstate_configure`` receives as ``config``, from ``settings`` (default: the process's): ``command``
    (e.g. ``"backup"``; ``None`` outside the CLI) and its options under the API's names (``repo``, ``log``, ``job``,
    ``task``, ``store``, ``ttl`` in ms, ``chunk_size`` in bytes, ``retain``, ...), ``storage_options`` and
    ``log_options`` (merged with ``BLOBSTATE_STORAGE_OPTIONS``; credentials redacted), the resolved ``work_base``,
    ``retry_attempts``, ``max_concurrency``, ``plugins_autoload``, and every ``BLOBSTATE_*`` variable under its own
    name (but the storage options one)."""
    from blobstate.local.workdir import default_base
    from blobstate.repository.options import ENV_VAR, from_env, merge, parse_options, redact

    settings = settings or current()
    config: dict[str, Any] = {k: v for k, v in settings.environ.items() if k != ENV_VAR}
    options = dict(settings.options)
    config.update({"command": settings.command, "max_concurrency": 8, "retry_attempts": settings.retry_attempts,
                   "plugins_autoload": settings.plugins_autoload})
    for name, value in options.items():
        if name not in ("storage_option", "log_option"):
            config[name] = value
    try:
        env_options = from_env(settings.environ)
    except ConfigurationError:
        env_options = {}
    try:  # the CLI's ``-o key=value`` options, or the API's dicts
        explicit = merge(parse_options(options.get("storage_option", ())), dict(options.get("storage_options") or {}))
        log_options = merge(parse_options(options.get("log_option", ())), dict(options.get("log_options") or {}))
    except (ConfigurationError, TypeError, ValueError):
        explicit, log_options = {}, {}
    config["storage_options"] = redact(merge(env_options, explicit))
    config["log_options"] = redact(log_options)
    config["work_base"] = config.get("work_base") or default_base()
    return config
