"""The settings a command or an API call runs with: one frozen ``Settings``, built once and handed down.

Where they come from. The ``BLOBSTATE_*`` environment is read here and nowhere else (``Settings.from_environ``).
The CLI builds a command's settings once, from the environment and the command's options (``with_options``), and
hands them to the API verb it calls; an API verb called from a program builds them from the environment and its own
keywords (``Settings.for_call``: the call's keywords win over the settings handed in, which win over the
environment).

Where they go. Nothing reads a setting from the air (no process-wide or thread-local "current" settings): the
verb hands them to the entry room (``blobstate.entry``), which opens the repository with them
(``Repository.open(settings=...)``, kept as ``Repository.settings``); from there they reach the blob store, log
and plugin factories (a factory that declares a ``settings`` keyword is given them), the committers, restore and
maintenance, each as an argument, the way kopia hands its ``repo.Options`` and ``maintenance.SafetyParameters``
down. Spark executors get the driver's (a picklable struct) inside what each task is sent (``on_executor``).
Plugins get the settings the plugin manager was built with through ``blobstate_configure(config, settings)``
(historic: once per process; ``effective_configuration`` is its ``config``).

Sizes accept human units (``96MiB``, ``1GB``, ``4096``), durations too (``30s``, ``1500ms``; a plain number of
seconds where the variable's name ends in ``_S``), through ``blobstate.config.units``; booleans are read one way
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
- ``BLOBSTATE_BACKEND_<SCHEME>``: the backend to use for a URL scheme (``backend_override``).
- ``BLOBSTATE_DEBUG``: tracebacks instead of one-line errors.
- ``BLOBSTATE_STORAGE_OPTIONS``: storage options (JSON), read by ``blobstate.config.options``.
- ``BLOBSTATE_APPEND_ONLY``: a writer that never deletes (restic's append-only mode): post-commit retention,
  aborts and restore's init cleanup leave deletes to ``blobstate gc`` (``--append-only``).
- ``BLOBSTATE_LIMIT_UPLOAD``, ``BLOBSTATE_LIMIT_DOWNLOAD``: bytes per second this process sends to and reads
  from blob stores, all transfers together (a size: ``10MiB``; ``--limit-upload``/``--limit-download``).
- ``BLOBSTATE_COMPRESSION``: ``auto`` (default: indexes and changelogs always, data blobs where a sample says it
  pays) or ``off`` (nothing is compressed from now on; what is compressed stays readable).
- ``BLOBSTATE_KEY_FILE``: the key file of an encrypted repository (``--key-file``); ``BLOBSTATE_KEY_PROVIDER``: the
  key provider a new encrypted repository uses (default ``file``; ``blobstate.codec.keys``).
- ``BLOBSTATE_OBJECT_CACHE``: ``off`` turns this host's object cache off (``blobstate.local.object_cache``).
- ``BLOBSTATE_CACHE_DIR``: where the installed plugins' entry points are cached (default: the user cache dir).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
from msgspec.structs import replace

from blobstate.config.units import parse_duration_ms, parse_size
from blobstate.errors import ConfigurationError

PREFIX = "BLOBSTATE_"
MiB = 1 << 20
DEFAULT_RETRY_ATTEMPTS = 5
DEFAULT_TRANSFER_BUDGET = 128 * MiB
DEFAULT_APPEND_RESOLVE_S = 30.0
#: The API keywords (and the CLI options under the API's names) that are settings, with the field each sets.
KEYWORDS = {"work_base": "work_dir", "append_only": "append_only", "limit_upload": "limit_upload",
            "limit_download": "limit_download", "key_file": "key_file"}
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


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping that pickles (a ``MappingProxyType`` does not): the settings travel to Spark's
    executors inside what each task is sent."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __reduce__(self) -> tuple[Any, ...]:
        return FrozenMap, (self._items,)

    def __repr__(self) -> str:
        return f"FrozenMap({sorted(self._items)})"  # names only: a value may be a credential


# A msgspec Struct, not a dataclass: created in ~0.1 ms instead of ~1.1 ms at start-up (issue 31).
class Settings(msgspec.Struct, frozen=True):
    """What a command or an API call runs with. Sizes in bytes, durations in seconds (``append_resolve_s``).

    ``work_dir`` is the work directory base (``work_base`` resolves the platform's default); ``environ`` holds every
    ``BLOBSTATE_*`` variable as it was read (the storage options one included; ``blobstate.config.options.from_env``
    reads that one), ``command`` the CLI command (``None`` for the API) and ``options`` its options or the API
    call's setting keywords under the API's names. ``Settings()`` is the defaults, without any environment.
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
    object_cache: bool = True
    cache_dir: str | None = None
    command: str | None = None
    options: Mapping[str, Any] = msgspec.field(default_factory=FrozenMap)
    environ: Mapping[str, str] = msgspec.field(default_factory=FrozenMap)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every ``BLOBSTATE_*`` variable of ``environ`` (default ``os.environ``: the one place blobstate reads
        its own variables); raises ``ConfigurationError`` naming the first malformed one."""
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
            object_cache=(get("BLOBSTATE_OBJECT_CACHE") or "").strip().lower() not in ("off", "0", "false", "no"),
            cache_dir=get("BLOBSTATE_CACHE_DIR") or None,
            environ=FrozenMap(env),
        )

    @classmethod
    def for_call(cls, settings: Settings | None = None, **keywords: Any) -> Settings:
        """The settings an API call runs with: ``settings`` (the CLI hands its command's in), else the
        environment's, with the call's setting keywords (``KEYWORDS``: ``work_base``, ``append_only``,
        ``limit_upload``, ``limit_download``, ``key_file``) that are not None. Raises ``ConfigurationError``."""
        base = settings if settings is not None else cls.from_environ()
        given = {name: value for name, value in keywords.items() if value is not None}
        return base.with_options(**given) if given else base

    def with_options(self, command: str | None = None, **options: Any) -> Settings:
        """These settings with a command's options (or an API call's keywords) under the API's names, recorded in
        ``options`` (``blobstate_configure``'s ``config`` shows them); those that are settings (``KEYWORDS``) set
        their field: ``work_base`` the work directory base, ``append_only``, the rate limits (sizes: bytes per
        second), ``key_file`` (made absolute). None leaves a field as it is. Raises ``ConfigurationError``."""
        given: dict[str, Any] = {}
        for name, field in KEYWORDS.items():
            value = options.get(name)
            if value is None:
                continue
            if field == "append_only":
                value = parse_bool(name, value, False)
            elif field in ("limit_upload", "limit_download"):
                value = _rate(name, value)
            elif field == "key_file":
                value = os.path.abspath(os.path.expanduser(str(value)))
            else:
                value = os.fspath(value)
            given[field] = value
        return replace(self, command=command if command is not None else self.command,
                       options=FrozenMap({**self.options, **options}), **given)

    @property
    def work_base(self) -> str:
        """The work directory base: ``work_dir`` (``BLOBSTATE_WORK_DIR``, ``--work-dir``, ``work_base=``), else
        platformdirs' user state dir."""
        if self.work_dir:
            return self.work_dir
        import platformdirs  # deliberately here: only without a configured base (~2 ms, issue 31)

        return platformdirs.user_state_dir("blobstate", appauthor=False)

    def backend_override(self, key: str) -> tuple[str, str | None]:
        """``(variable, backend name or None)`` for ``BLOBSTATE_BACKEND_<KEY>`` (``-`` and ``+`` as ``_``)."""
        variable = f"{PREFIX}BACKEND_{key.upper().replace('-', '_').replace('+', '_')}"
        return variable, self.environ.get(variable) or None

    def on_executor(self) -> Settings:
        """These settings (a Spark driver's, sent with a task) as an executor runs with them: the driver's, but for
        the key file, which an executor's own ``BLOBSTATE_KEY_FILE`` names where it is set (docs/operations.md:
        ``spark.executorEnv.BLOBSTATE_KEY_FILE``, a path on the executors' hosts)."""
        own = type(self).from_environ().key_file
        return self if not own or own == self.key_file else replace(self, key_file=own)


def effective_configuration(settings: Settings) -> dict[str, Any]:
    """What ``blobstate_configure`` receives as ``config``, from ``settings``: ``command`` (e.g. ``"backup"``;
    ``None`` outside the CLI) and its options under the API's names (``repo``, ``log``, ``job``, ``task``,
    ``store``, ``ttl`` in ms, ``chunk_size`` in bytes, ``retain``, ...), ``storage_options`` and ``log_options``
    (merged with ``BLOBSTATE_STORAGE_OPTIONS``; credentials redacted), the resolved ``work_base``,
    ``retry_attempts``, ``max_concurrency``, ``plugins_autoload``, and every ``BLOBSTATE_*`` variable under its own
    name (but the storage options one)."""
    from blobstate.config.options import ENV_VAR, from_env, merge, parse_options, redact

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
    config["work_base"] = config.get("work_base") or settings.work_base
    return config
