"""The identity of a checkpoint log: what the repository marker records so that a repository has exactly one log.

A log is named by its URL, and the same log can be written many ways: ``sqlite:///log.db`` is relative to each
process's working directory (SQLAlchemy's form), a database URL carries credentials and a driver, a Kafka URL lists
its bootstrap servers in any order. ``log_identity`` reduces a log URL to one normalised string without
credentials: an absolute SQLite path, the SQL URL's host, port, database and table (``postgres://`` spelled
``postgresql://``, no driver), Kafka's sorted bootstrap servers and topic, a file log's URL; the file log inside
the repository itself is ``REPOSITORY_LOG`` (whatever URL the repository is opened by). ``absolute_log_url`` makes
a relative SQLite URL absolute at its first use; ``same_log`` compares an identity a marker recorded with one
computed now.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

#: The identity of the default log: the file log inside the repository.
REPOSITORY_LOG = "repository"
_SQL_TABLE_DEFAULT = "blobstate_checkpoints"


def describe(identity: str) -> str:
    """``identity`` for a message: the repository's own file log is named in words."""
    return "the file log inside the repository" if identity == REPOSITORY_LOG else identity


def absolute_log_url(url: str) -> str:
    """``url`` with a relative SQLite path (``sqlite:///log.db``, ``sqlite+pysqlite:///log.db``) made absolute
    against the current directory; in-memory SQLite and every other URL unchanged."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.lower().startswith("sqlite") or not rest.startswith("/"):
        return url
    path, query_sep, query = rest[1:].partition("?")
    if not path or path == ":memory:" or path.startswith("/") or path.startswith("file:"):
        return url
    return f"{scheme}:///{os.path.abspath(os.path.expanduser(path))}{query_sep}{query}"


_LOG_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle", "kafka")
#: Spellings of one scheme that the SQL plugin serves as one database (``blobstate.plugins.sql_log.engine_url``:
#: ``postgres://`` and ``postgresql://`` both get ``postgresql+psycopg``); a driver suffix (``+psycopg``) is dropped
#: before this. The identity keeps the canonical spelling, so markers that recorded it are unchanged.
_SCHEME_ALIASES = {"postgres": "postgresql"}


def canonical_identity(identity: str) -> str:
    """``identity`` in the canonical spelling of its scheme: a marker that recorded ``postgres://h/db?table=t`` (before
    the spellings were one) names the log ``postgresql://h/db?table=t`` names."""
    scheme, sep, rest = identity.partition("://")
    return f"{_SCHEME_ALIASES.get(scheme, scheme)}{sep}{rest}" if sep else identity


def same_log(recorded: str, identity: str) -> bool:
    """Whether the identity ``recorded`` in a marker and ``identity`` (``log_identity``'s) name one log."""
    return recorded == identity or canonical_identity(recorded) == canonical_identity(identity)


def _same_location(log_url: str, repo_url: str) -> bool:
    """A file log at the repository's own location, named through another scheme of the same files (a journal
    records the file log by its store's ``file://`` URL when the repository was opened through a wrapping plugin's
    scheme)."""
    log_scheme, _, log_rest = log_url.partition("://")
    repo_scheme, _, repo_rest = repo_url.partition("://")
    if log_scheme.split("+", 1)[0].lower() in _LOG_SCHEMES or not log_rest or not repo_rest:
        return False
    if log_scheme != repo_scheme and "file" not in (log_scheme, repo_scheme):
        return False
    return log_rest.split("?", 1)[0].rstrip("/") == repo_rest.split("?", 1)[0].rstrip("/")


def log_identity(log_url: str | None, repo_url: str, log_options: Mapping[str, Any] | None = None) -> str:
    """The normalised identity of the checkpoint log ``log_url`` of the repository at ``repo_url`` (both already
    normalised, see ``blobstate.repository.backends.normalize_url``); ``None`` or the repository's own URL is
    ``REPOSITORY_LOG``. ``log_options``: the log plugin's options (an SQL log's ``table``). Never holds credentials.
    """
    if log_url is None or log_url.rstrip("/") == repo_url.rstrip("/") or _same_location(log_url, repo_url):
        return REPOSITORY_LOG
    url = absolute_log_url(log_url)
    scheme = url.split("://", 1)[0].lower() if "://" in url else "file"
    base = scheme.split("+", 1)[0]
    base = _SCHEME_ALIASES.get(base, base)
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if base == "sqlite":
        path = url.split("://", 1)[1].split("?", 1)[0]
        table = str((log_options or {}).get("table") or query.get("table") or _SQL_TABLE_DEFAULT)
        suffix = "" if table == _SQL_TABLE_DEFAULT else f"?table={table}"
        return f"sqlite://{path}{suffix}"
    host = (parts.hostname or "").lower()
    if base == "kafka":
        servers = sorted(s.strip().rsplit("@", 1)[-1].lower() for s in parts.netloc.split(",") if s.strip())
        return f"kafka://{','.join(servers)}/{parts.path.strip('/')}"
    port = f":{parts.port}" if parts.port else ""
    if base in ("postgresql", "postgres", "mysql", "mariadb", "mssql", "oracle"):
        table = str((log_options or {}).get("table") or query.get("table") or _SQL_TABLE_DEFAULT)
        return f"{base}://{host}{port}/{parts.path.strip('/')}?table={table}"
    return f"{scheme}://{host}{port}{parts.path.rstrip('/')}"
