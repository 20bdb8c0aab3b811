"""Logging for the CLI: ``-v`` (blobstate's own steps), ``-vv`` (debug, with fsspec's lines), ``-vvv`` (every
library's debug lines), all on stderr, and never a credential at any verbosity.

Credentials: every handler on the root logger gets ``RedactingFilter``, which rewrites each record (message,
arguments, traceback) through ``blobstate.config.options.redact`` with the secrets of this command line and of the
environment, the key material of an encrypted repository this process read (a key file's content, the keys derived
from it, the data key: ``blobstate.config.options.register_secret``, in text, hex and base64), plus the patterns
of credentials SDKs log (``Authorization`` headers, session tokens, AWS access key ids). The SDKs' own debug
loggers (botocore, urllib3, azure, google, ...) are capped at INFO below ``-vvv`` as well.
"""

from __future__ import annotations

import logging
import sys

#: Loggers of the cloud SDKs and HTTP clients: DEBUG only at -vvv (they dump request headers).
SDK_LOGGERS = ("botocore", "boto3", "aiobotocore", "s3transfer", "urllib3", "azure", "google", "kafka",
               "sqlalchemy", "psycopg", "aiohttp")
#: Filesystem layers whose debug lines say which calls blobstate makes (shown from -vv).
FS_LOGGERS = ("fsspec", "s3fs", "gcsfs", "adlfs")


class RedactingFilter(logging.Filter):
    """Rewrites a record so that no credential reaches a handler: the formatted message, the traceback text and
    the stack are passed through ``redact``; always lets the record through."""

    def filter(self, record: logging.LogRecord) -> bool:
        from blobstate.cli.output import redact

        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string must not lose the record
            message = f"{record.msg} {record.args}"
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of the record (click's test runner swaps it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


_HANDLER_NAME = "blobstate-cli"
_verbosity = 0


def configure(add: int) -> int:
    """Raise the verbosity by ``add`` (the group's ``-v`` and the subcommand's add up) and (re)install the stderr
    handler; returns the verbosity now in force."""
    global _verbosity
    _verbosity += add
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(handler)
    handler = _StderrHandler()
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    for existing in root.handlers:
        if not any(isinstance(f, RedactingFilter) for f in existing.filters):
            existing.addFilter(RedactingFilter())
    level = logging.WARNING if _verbosity == 0 else logging.INFO if _verbosity == 1 else logging.DEBUG
    root.setLevel(logging.WARNING)
    logging.getLogger("blobstate").setLevel(level)
    for name in FS_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if _verbosity >= 2 else logging.WARNING)
    for name in SDK_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if _verbosity >= 3 else
                                         logging.INFO if _verbosity == 2 else logging.WARNING)
    if _verbosity >= 3:
        root.setLevel(logging.DEBUG)
    return _verbosity


def reset() -> None:
    """Back to no extra verbosity (a new command in the same process, e.g. a test)."""
    global _verbosity
    _verbosity = 0
