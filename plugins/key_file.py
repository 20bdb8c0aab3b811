"""The ``file`` key provider: wraps an encrypted repository's data key with a key kept in a file
(``--key-file``, ``BLOBSTATE_KEY_FILE``), registered through ``blobstate_key_providers`` like any third party's.

The file holds at least 32 bytes of key material: raw bytes (``head -c 32 /dev/urandom > key``) or text
(``openssl rand -hex 32 > key``; surrounding whitespace is ignored in a text file). Two keys are derived from it
with HKDF-SHA256 (RFC 5869, distinct ``info`` labels): the key-encryption key, which wraps the data key with
AES-256-GCM bound to the repository id, and the key id recorded in the marker (``file:<16 hex>``), which tells
a wrong key file at once without revealing anything about the key. Neither the file's content nor a derived
key is ever logged or printed; a message names the file's path and key ids only.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Mapping
from typing import Any

from blobstate.errors import ConfigurationError, EncryptionKeyError
from blobstate.plugin.interfaces import KeyProvider

MIN_KEY_BYTES = 32
MAX_KEY_BYTES = 4096  # a key file larger than this is not a key file
_SALT = b"blobstate key file"
_WARNED: set[str] = set()  # key files whose permissions were warned about (once per process)


def read_key_file(path: str) -> bytes:
    """The key material of the file at ``path`` (text is stripped of surrounding whitespace). Raises
    ``EncryptionKeyError`` (exit 3) for a missing or unreadable file, ``ConfigurationError`` for one too short or
    too long to be a key; the message names the path, never the content."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KEY_BYTES + 1)
    except OSError as exc:
        raise EncryptionKeyError(f"cannot read the key file {path}: {exc.strerror or type(exc).__name__}") from None
    try:
        text: str | None = data.decode("ascii").strip(" \t\r\n")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.isprintable():  # a text key (hex, base64, a passphrase): whitespace around it
        data = text.encode("ascii")               # is the editor's, not the key's
    if not MIN_KEY_BYTES <= len(data) <= MAX_KEY_BYTES:
        raise ConfigurationError(f"the key file {path} holds {len(data)} bytes of key material: a key file holds "
                                 f"{MIN_KEY_BYTES} to {MAX_KEY_BYTES} (make one with: head -c 32 /dev/urandom > "
                                 "FILE, or openssl rand -hex 32 > FILE)")
    return data


def _derive(material: bytes, label: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=label).derive(material)


class FileKeyProvider(KeyProvider):
    """Wraps with the key in ``options["key_file"]`` (``key_id`` is ignored: the file's own id is derived from it
    and compared with the one the marker records). Raises ``EncryptionKeyError`` when no key file is given."""

    name = "file"

    def __init__(self, key_id: str | None = None, options: Mapping[str, Any] | None = None) -> None:
        path = (options or {}).get("key_file")
        if not path:
            raise EncryptionKeyError("no key file was given (an encrypted repository needs its key file: "
                                     "--key-file FILE, or BLOBSTATE_KEY_FILE=FILE)")
        self.path = os.path.abspath(os.path.expanduser(str(path)))
        material = read_key_file(self.path)
        self._kek = _derive(material, b"key-encryption key v1")
        self._id = "file:" + _derive(material, b"key id v1")[:8].hex()
        from blobstate.config.options import register_secret

        register_secret(material, self._kek)
        if os.stat(self.path).st_mode & (stat.S_IRWXG | stat.S_IRWXO) and self.path not in _WARNED:
            _WARNED.add(self.path)
            logging.getLogger(__name__).warning("the key file %s can be read by other users (chmod 600 it)",
                                                self.path)

    def key_id(self) -> str:
        return self._id

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        from blobstate.codec.cipher import seal

        return seal(self._kek, data_key, b"blobstate data key v1\x00" + context)

    def unwrap(self, wrapped: bytes, key_id: str, context: bytes) -> bytes:
        from blobstate.codec.cipher import unseal
        from blobstate.errors import ChecksumMismatch

        if key_id != self._id:
            raise EncryptionKeyError(f"the key file {self.path} holds key {self._id}, and the repository's data key "
                                     f"is wrapped by key {key_id}: wrong key file")
        try:
            return unseal(self._kek, wrapped, b"blobstate data key v1\x00" + context, "the wrapped data key")
        except ChecksumMismatch:
            raise EncryptionKeyError(f"the key file {self.path} (key {self._id}) cannot unwrap the repository's "
                                     "data key: the marker's wrapped key is damaged or was not made with this "
                                     "key") from None
