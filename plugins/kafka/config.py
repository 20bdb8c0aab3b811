"""The ``kafka://`` URL and its options, parsed into a ``KafkaLogConfig`` (no I/O, no kafka-python).

``kafka://[user:password@]HOST:PORT[,HOST:PORT...]/TOPIC?option=value``; ``storage_options`` win over the query.
Options of the log itself: ``api_version`` (``0.9``, ``2.8``...; ``auto`` probes the broker), ``transactional``
(``auto``/``true``/``false``), ``timeout_ms`` (every blocking call, default 10000), ``transaction_timeout_ms``
(the producer's ``transaction.timeout.ms``, default 60000), ``partitions`` and ``replication_factor`` (topic
creation) and ``topic_admin``. Every other option is a kafka-python client setting (``security_protocol``,
``sasl_mechanism``, ``ssl_cafile``...) passed to every client. ``user:password@`` sets SASL PLAIN credentials;
the password never appears in ``display_url``, ``repr`` or errors.

``topic_admin`` is ``auto`` (the admin API where the broker has it, >= 0.10.1; else the topic must exist),
``none`` (the topic must exist), or, through the Python API's ``storage_options`` only, an object with
``ensure_topic(topic, *, partitions, replication_factor)``. No option names code to import: any other string is
refused with ``ConfigurationError`` (a URL that could import and call a function is a way in for whoever can set
the URL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from blobstate.errors import ConfigurationError

DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
TOPIC_ADMIN_CHOICES = ("auto", "none")
_OWN_OPTIONS = {"api_version", "transactional", "timeout_ms", "transaction_timeout_ms", "partitions",
                "replication_factor", "topic_admin"}


@dataclass(frozen=True)
class KafkaLogConfig:
    """A parsed ``kafka://`` URL plus options.

    ``api_version`` None means "probe the broker"; ``transactional`` None means "where the broker supports it";
    ``timeout_ms`` bounds every blocking call (ms); ``topic_admin`` is ``"auto"``, ``"none"`` or an object with
    ``ensure_topic``; ``client_options`` go to every kafka-python client (credentials included, never printed).
    """

    bootstrap_servers: tuple[str, ...]
    topic: str
    api_version: tuple[int, ...] | None = None
    transactional: bool | None = None
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS
    partitions: int = 1
    replication_factor: int = 1
    topic_admin: Any = "auto"
    client_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def display_url(self) -> str:
        """The URL without credentials or options."""
        return f"kafka://{','.join(self.bootstrap_servers)}/{self.topic}"

    @property
    def secrets(self) -> list[str]:
        """Client option values that must never be printed (passwords, secrets, tokens)."""
        return [str(v) for k, v in self.client_options.items()
                if v and any(s in k for s in ("password", "secret", "token"))]


def parse_api_version(value: Any) -> tuple[int, ...] | None:
    """``"0.9"`` -> ``(0, 9)``; ``None``/``"auto"`` -> None (probe). Raises ``ConfigurationError``."""
    if value is None or value == "auto" or value == "":
        return None
    try:
        if isinstance(value, (tuple, list)):
            return tuple(int(v) for v in value)
        return tuple(int(p) for p in str(value).split("."))
    except ValueError:
        raise ConfigurationError(f"kafka api_version must look like 0.9 or 2.8, got {value!r}") from None


def parse_tristate(name: str, value: Any) -> bool | None:
    """``auto``/None -> None; true/false spelled any usual way -> bool. Raises ``ConfigurationError``."""
    if value is None or isinstance(value, bool):
        return value
    from blobstate.config.settings import parse_bool

    text = str(value).strip().lower()
    if text == "auto":
        return None
    if text:
        try:
            return parse_bool(name, text, False)  # booleans are read one way
        except ConfigurationError:
            pass
    raise ConfigurationError(f"kafka option {name} must be auto, true or false, got {value!r}")


def check_topic_admin(value: Any) -> Any:
    """``auto``/``none``/None or an object with ``ensure_topic``; a string naming code is refused.

    Raises ``ConfigurationError`` for every other value: no option of a ``kafka://`` URL imports code.
    """
    if value is None:
        return "none"
    if isinstance(value, str):
        if value.lower() in TOPIC_ADMIN_CHOICES:
            return value.lower()
        raise ConfigurationError(
            f"kafka topic_admin must be auto or none, got {value[:80]!r}: no URL option imports code; pass a "
            "TopicAdmin object through storage_options from Python instead")
    if callable(getattr(value, "ensure_topic", None)):
        return value
    raise ConfigurationError(f"kafka topic_admin must be auto, none or an object with ensure_topic(), got "
                             f"{type(value).__name__}")


def _positive_int(name: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"kafka option {name} must be a whole number, got {value!r}") from None
    if number <= 0:
        raise ConfigurationError(f"kafka option {name} must be positive, got {number}")
    return number


def parse_kafka_url(url: str, storage_options: dict[str, Any] | None = None) -> KafkaLogConfig:
    """Parse ``kafka://[user:password@]host:port[,host:port]/topic?opt=value`` (options as in the module doc).

    Raises ``ConfigurationError`` for another scheme, a missing host or topic, or a bad option value.
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "kafka":
        raise ConfigurationError(f"not a kafka:// URL: {parts.scheme}://...")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    servers = tuple(h for h in hosts.split(",") if h)
    topic = unquote(parts.path.lstrip("/"))
    if not servers or not topic or "/" in topic:
        raise ConfigurationError("a Kafka checkpoint log URL is kafka://HOST:PORT[,HOST:PORT]/TOPIC")
    opts: dict[str, Any] = dict(parse_qsl(parts.query))
    opts.update(storage_options or {})
    client = {k: v for k, v in opts.items() if k not in _OWN_OPTIONS}
    if userinfo:
        user, _, password = userinfo.partition(":")
        client.setdefault("sasl_plain_username", unquote(user))
        client.setdefault("sasl_plain_password", unquote(password))
        client.setdefault("sasl_mechanism", "PLAIN")
        client.setdefault("security_protocol", "SASL_PLAINTEXT")
    return KafkaLogConfig(
        bootstrap_servers=servers, topic=topic, api_version=parse_api_version(opts.get("api_version")),
        transactional=parse_tristate("transactional", opts.get("transactional")),
        timeout_ms=_positive_int("timeout_ms", opts.get("timeout_ms", DEFAULT_TIMEOUT_MS)),
        transaction_timeout_ms=_positive_int("transaction_timeout_ms",
                                             opts.get("transaction_timeout_ms", DEFAULT_TRANSACTION_TIMEOUT_MS)),
        partitions=_positive_int("partitions", opts.get("partitions", 1)),
        replication_factor=_positive_int("replication_factor", opts.get("replication_factor", 1)),
        topic_admin=check_topic_admin(opts.get("topic_admin", "auto")), client_options=client,
    )
