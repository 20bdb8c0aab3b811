"""A checkpoint record as a journal keeps it (``CheckpointAppending.record``): an encrypted repository's journal holds
the record sealed under the repository's data key, never its plaintext (a delta's record carries the batch's keys
and values when its changelog goes inline), bound to its store key and commit; recovery opens it to re-append the
same record. An unencrypted repository's journal keeps the record's JSON as it is (the repository holds it so).

Sealed form: ``sealed:v1:<base64 of nonce | ciphertext | tag>`` (``blobstate.codec.cipher``); a record's JSON text
starts with ``{``, so the two never mix up.
"""

from __future__ import annotations

import base64
import binascii

from blobstate.codec.cipher import ObjectCipher
from blobstate.errors import ConfigurationError, CorruptJournalError

SEALED = "sealed:v1:"
KIND = "journal record"


def seal_record(cipher: ObjectCipher | None, name: str, text: str) -> str:
    """``text`` (a record's JSON) as the journal keeps it: sealed under ``cipher`` and bound to ``name`` (the store
    key and commit id), or as it is without a cipher."""
    if cipher is None:
        return text
    return SEALED + base64.b64encode(cipher.seal(KIND, name, text.encode())).decode()


def open_record(cipher: ObjectCipher | None, name: str, kept: str) -> str:
    """The record's JSON ``kept`` holds (``seal_record``'s output for ``name``). Raises ``ConfigurationError`` for a
    sealed record without a cipher (the repository was opened without its key) and ``CorruptJournalError`` (exit 3)
    for one that does not open (damaged, another commit's, another repository's)."""
    if not kept.startswith(SEALED):
        return kept
    if cipher is None:
        raise ConfigurationError(f"the journal holds the record of {name} sealed: open the repository with its key")
    try:
        sealed = base64.b64decode(kept[len(SEALED):], validate=True)
    except (binascii.Error, ValueError):
        raise CorruptJournalError(f"the journal's sealed record of {name} is damaged") from None
    try:
        return cipher.unseal(KIND, name, sealed).decode()
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptJournalError(f"the journal's sealed record of {name} does not open: {exc}") from None
