"""Storage options for a repository URL: ``KEY=VALUE`` options, URL query parameters, the environment, and
``redact()`` so that no credential reaches a message, a log line, an index or the journal.

Precedence, lowest first: ``BLOBSTATE_STORAGE_OPTIONS`` (a JSON object in the environment), query parameters of
the URL (``s3://bucket/repo?endpoint_url=http://127.0.0.1:9000&anon=false``), explicit options (the CLI's
``--storage-option KEY=VALUE`` or the API's ``storage_options=``). fsspec's own configuration (``fsspec.config``:
``~/.config/fsspec/*.json``, ``FSSPEC_<PROTOCOL>_<KEY>`` variables) is applied by fsspec itself underneath all of
these, and the clouds' native variables (``AWS_*``, ``AZURE_STORAGE_*``, ``GOOGLE_*``) by their SDKs.

A dotted key builds a nested dict: ``client_kwargs.region_name=eu-west-1`` -> ``{"client_kwargs": {"region_name":
"eu-west-1"}}``. Values are coerced: ``true``/``false`` -> bool, ``none``/``null`` -> None, integers, floats,
JSON objects and arrays; anything else stays a string (quote it in JSON, ``'"123"'``, to keep digits a string).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from blobstate.errors import ConfigurationError

ENV_VAR = "BLOBSTATE_STORAGE_OPTIONS"
REDACTED = "***"
#: Schemes whose URLs never carry storage options in a query (a ``?`` there is part of a file name).
LOCAL_SCHEMES = ("file", "local", "memory")

_SECRET_KEY = re.compile(
    r"(secret|password|passwd|token|credential|sas|signature|sig$|^sig|account_key|accountkey|"
    r"connection_string|connectionstring|session|private|^key$|_key$|apikey|api_key)",
    re.IGNORECASE,
)
# KEY=VALUE pairs inside connection strings and queries (``AccountKey=...;``, ``sig=...&``, ``token: ...``).
# The key may be quoted and the value a bytes literal, as in a logged header dict: ``'X-Amz-Security-Token': b'...'``.
_SECRET_PAIR = re.compile(
    r"(?P<key>\b[\w.-]*?(?:secret|password|passwd|token|signature|accountkey|account_key|"
    r"sharedaccesssignature|credential|sig|key))(?P<sep>[\"']?\s*[=:]\s*(?:(?-i:b)(?=[\"']))?)(?P<q>[\"']?)"
    r"(?P<value>[^;&\s\"',}]+)",
    re.IGNORECASE,
)
# Authorization headers (``'Authorization': b'AWS4-HMAC-SHA256 Credential=..., Signature=...'``, ``Bearer ...``):
# the whole quoted value, spaces included.
_AUTH_HEADER = re.compile(r"(?P<key>\b(?:proxy-)?authorization)(?P<sep>[\"']?\s*[=:]\s*(?:(?-i:b)(?=[\"']))?)"
                          r"(?:(?P<q>[\"'])(?P<quoted>.*?)(?P=q)|(?P<bare>\S+(?: \S+)?))", re.IGNORECASE)
# AWS access key ids (long-term ``AKIA``, temporary ``ASIA``), wherever they appear.
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[A-Z0-9]{12,}\b")
#: Environment variables whose values are credentials: never printed or logged, whatever logs them.
SECRET_ENV_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                   "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_CONNECTION_STRING",
                   "AZURE_STORAGE_SAS_TOKEN", "AZURE_CLIENT_SECRET", "GOOGLE_OAUTH_ACCESS_TOKEN")
# URL user info: ``user@`` or ``user:password@``, the password with '/' too (AWS secret keys hold them, and users
# paste them unescaped), but never ``host:port/path@``: a ':' followed by digits and the path is a port.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)"
                       r"(?P<userinfo>[^/@\s]+|[^/@\s:\[\]]+:(?!\d*(?:[/?#\s]|$))[^@\s]+)@")


def coerce(value: str) -> Any:
    """The typed value of a ``KEY=VALUE`` option's text: bool, None, int, float, JSON, or the string itself."""
    text = value.strip()
    lowered = text.lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", text):
        return float(text)
    if text[:1] in ("{", "[", '"'):
        try:
            return json.loads(text)
        except ValueError:
            return value
    return value


def _set_dotted(target: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigurationError(f"invalid storage option name {key!r}")
    node = target
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigurationError(f"storage option {key!r} conflicts with a plain value of {part!r}")
        node = child
    node[parts[-1]] = value


def parse_option(text: str) -> tuple[str, Any]:
    """Split one ``KEY=VALUE`` option; raises ``ConfigurationError`` without ``=`` or with an empty key.

    The error message never repeats the value (it may be a secret).
    """
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep:
        raise ConfigurationError("a storage option must be name=value, got one without '=' (not shown: it may be a "
                                 "secret)")
    if not key:
        raise ConfigurationError("a storage option must be name=value, got one with an empty name")
    return key, coerce(value)


def parse_options(items: Iterable[str]) -> dict[str, Any]:
    """``["anon=false", "client_kwargs.region_name=eu-west-1"]`` -> a (nested) dict of typed values."""
    out: dict[str, Any] = {}
    for item in items:
        key, value = parse_option(item)
        _set_dotted(out, key, value)
    return out


def merge(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """Merge option dicts, later layers winning; nested dicts (``client_kwargs``) are merged key by key."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in (layer or {}).items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def split_url(url: str) -> tuple[str, dict[str, Any]]:
    """Remove the query from a remote URL and return ``(url_without_query, options_from_query)``.

    Local URLs (``file``, ``local``, ``memory``, plain paths) are returned unchanged with no options.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    if scheme in LOCAL_SCHEMES or "?" not in url:
        return url, {}
    parts = urlsplit(url)
    options: dict[str, Any] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        _set_dotted(options, key, coerce(value))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", parts.fragment)), options


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    """The options in ``BLOBSTATE_STORAGE_OPTIONS`` (a JSON object) of ``environ`` (a ``Settings.environ``, or the
    process's environment); {} when unset.

    Raises ``ConfigurationError`` when it is not a JSON object (the message does not echo its content).
    """
    text = environ.get(ENV_VAR, "").strip()
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise ConfigurationError(f"{ENV_VAR} is not valid JSON") from None
    if not isinstance(value, dict):
        raise ConfigurationError(f"{ENV_VAR} must be a JSON object")
    return value


def resolve(url: str, options: Mapping[str, Any] | Iterable[str] | None = None, *,
            environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """The URL to open and its effective storage options (``environ``'s ``BLOBSTATE_STORAGE_OPTIONS`` < URL query
    < ``options``): done once, by the entry room (``blobstate.repository.backends.open_blob_store``), before a
    blob store's factory is called. ``environ``: a ``Settings.environ`` (None: no environment layer).

    ``options`` is a dict, or ``KEY=VALUE`` strings as the CLI collects them.
    """
    clean, from_query = split_url(url)
    if options is None:
        explicit: Mapping[str, Any] = {}
    elif isinstance(options, Mapping):
        explicit = options
    else:
        explicit = parse_options(options)
    return clean, merge(from_env(environ or {}), from_query, explicit)


def is_secret_key(key: str) -> bool:
    """True for option names that hold credentials (``secret``, ``key``, ``token``, ``account_key``, ...)."""
    return bool(_SECRET_KEY.search(key))


def redact(value: Any, *, secrets: Iterable[str] = ()) -> Any:
    """A copy of ``value`` safe for messages and logs.

    - dicts: values under secret-looking keys become ``"***"`` (recursively);
    - strings: URL userinfo, ``AccountKey=...``/``sig=...``/``token: ...`` pairs and every literal in ``secrets``
      are replaced by ``"***"``;
    - lists and tuples element-wise; anything else as is.
    """
    literals = [s for s in (str(x) for x in secrets) if len(s) >= 4]
    if isinstance(value, Mapping):
        return {k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, False, "")
                    else redact(v, secrets=literals)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v, secrets=literals) for v in value)
    if isinstance(value, str):
        text = _USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
        text = _AUTH_HEADER.sub(lambda m: f"{m['key']}{m['sep']}{m['q'] or ''}{REDACTED}{m['q'] or ''}", text)
        text = _AWS_KEY_ID.sub(REDACTED, text)
        text = _SECRET_PAIR.sub(lambda m: f"{m['key']}{m['sep']}{m['q']}{REDACTED}", text)
        for literal in sorted(literals, key=len, reverse=True):
            text = text.replace(literal, REDACTED)
        return text
    return value


#: Where each cloud's SDK takes its credentials from (messages name them; a URL's user info is not one of them).
CREDENTIAL_SOURCES = {
    **dict.fromkeys(("s3", "s3a"), "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, or the key "
                                   "and secret storage options"),
    **dict.fromkeys(("gs", "gcs"), "GOOGLE_APPLICATION_CREDENTIALS or the token storage option"),
    **dict.fromkeys(("az", "abfs", "abfss"), "AZURE_STORAGE_CONNECTION_STRING, or the account_name and account_key "
                                             "storage options"),
}


def credential_sources(scheme: str) -> str:
    """Where the SDK of ``scheme`` (``s3``, ``gs``, ``az``...) takes credentials from, for a message."""
    return CREDENTIAL_SOURCES.get(scheme.lower(), "the storage options (--storage-option, BLOBSTATE_STORAGE_OPTIONS)")


def split_userinfo(url: str) -> tuple[str, str]:
    """``(user info, url without it)``: ``s3://KEY:SECRET@bucket/r`` -> ``("KEY:SECRET", "s3://bucket/r")``, the
    same user info ``redact`` hides (a password holding '/' included); ``("", url)`` when there is none."""
    match = _USERINFO.match(url)
    if match is None:
        return "", url
    return match["userinfo"], match["scheme"] + url[match.end():]


def secret_values(options: Mapping[str, Any]) -> list[str]:
    """Every string value stored under a secret-looking key of ``options`` (recursively), for ``redact``."""
    out: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            out.extend(secret_values(value))
        elif isinstance(value, str) and is_secret_key(str(key)):
            out.append(value)
    return out


def display_url(url: str) -> str:
    """``url`` as journals and messages record it: no query (storage options, tokens) and no credentials."""
    return str(redact(split_url(url)[0]))


#: Key material this process holds (``register_secret``): never printed or logged, in any of its text forms.
_REGISTERED: list[str] = []


def register_secret(*values: bytes | str) -> None:
    """Remember key material (a key file's content, a derived or data key) so that ``redact``, and so every
    message and log line, hides it: as text, and bytes in hex and base64 (standard and URL-safe) too."""
    import base64

    for value in values:
        forms = [value] if isinstance(value, str) else [value.hex(), base64.b64encode(value).decode().rstrip("="),
                                                        base64.urlsafe_b64encode(value).decode().rstrip("=")]
        if isinstance(value, bytes):
            try:
                forms.append(value.decode("ascii"))
            except UnicodeDecodeError:
                pass
        _REGISTERED.extend(f for f in forms if len(f) >= 8 and f not in _REGISTERED)


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The credentials the environment holds (``SECRET_ENV_VARS``, and secret values of
    ``BLOBSTATE_STORAGE_OPTIONS``), and the key material this process registered (``register_secret``), for
    ``redact``; a malformed ``BLOBSTATE_STORAGE_OPTIONS`` adds nothing."""
    env = os.environ if environ is None else environ
    out = [env[name] for name in SECRET_ENV_VARS if env.get(name)] + _REGISTERED
    try:
        out += secret_values(from_env(env))
    except ConfigurationError:
        pass
    return out
