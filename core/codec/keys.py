"""The data key of an encrypted repository: made once when the repository is created, wrapped by the operator's
key through a key provider plugin (``file`` built in, a KMS as a third party's ``blobstate_key_providers``),
recorded in the repository marker, unwrapped by every command that opens the repository, re-wrapped (never
changed) by ``blobstate key rotate``. Envelope encryption as a KMS does it, and as restic keeps its master key.

The marker's ``encryption`` object (marker format version 2; a blobstate that reads up to 1 refuses it)::

    {"algorithm": "AES-256-GCM", "keyProvider": "file", "keyId": "file:0123456789abcdef",
     "wrappedKey": "<base64 of the wrapped data key>"}

It never holds the key. Opening fails before anything is written: a wrong key or none at all is an
``EncryptionKeyError`` (exit 3). A key configured for a repository that is not encrypted is refused to writers
too, so a mix-up (or a marker whose ``encryption`` was stripped by someone with write access) never makes
blobstate write plaintext where the operator meant ciphertext.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from blobstate.codec.cipher import ALGORITHM, ObjectCipher, new_key
from blobstate.errors import ConfigurationError, CorruptIndexError, EncryptionKeyError
from blobstate.plugin.interfaces import KeyProvider

if TYPE_CHECKING:
    from blobstate.config.settings import Settings

DEFAULT_PROVIDER = "file"


# msgspec Structs, not dataclasses: each created in ~0.05 ms instead of ~0.5 ms at start-up (issue 31).
class EncryptionInfo(msgspec.Struct, frozen=True):
    """The marker's ``encryption`` object: the algorithm, the key provider's name, the id of the key that wraps the
    data key, and the wrapped data key (bytes)."""

    algorithm: str
    key_provider: str
    key_id: str
    wrapped_key: bytes

    def to_json(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "keyProvider": self.key_provider, "keyId": self.key_id,
                "wrappedKey": base64.b64encode(self.wrapped_key).decode()}

    def summary(self) -> dict[str, Any]:
        """What commands print: everything but the wrapped key."""
        return {"algorithm": self.algorithm, "keyProvider": self.key_provider, "keyId": self.key_id}

    @classmethod
    def from_json(cls, doc: Any) -> EncryptionInfo:
        """Parse the marker's object; ``CorruptIndexError`` (exit 3) on a wrong shape, ``ConfigurationError`` for
        an algorithm this blobstate does not know."""
        try:
            info = cls(str(doc["algorithm"]), str(doc["keyProvider"]), str(doc["keyId"]),
                       base64.b64decode(str(doc["wrappedKey"]), validate=True))
        except (KeyError, TypeError, binascii.Error) as exc:
            raise CorruptIndexError(f"the repository marker's encryption is damaged: {exc!r}") from None
        if info.algorithm != ALGORITHM:
            raise ConfigurationError(f"the repository is encrypted with {info.algorithm[:40]!r}, which this blobstate "
                                     f"does not read (it reads {ALGORITHM})")
        return info


class KeyConfig(msgspec.Struct, frozen=True):
    """The key the operator configured: a key provider's name (default ``file``), its key file (``--key-file``,
    ``BLOBSTATE_KEY_FILE``) and, for a new repository on a KMS, the key id (``--key-id``)."""

    key_file: str | None = None
    provider: str | None = None
    key_id: str | None = None

    @classmethod
    def of(cls, settings: Settings, *, key_file: str | None = None, provider: str | None = None,
           key_id: str | None = None) -> KeyConfig:
        """The given values, else ``settings``' (``key_file``: ``--key-file``, ``BLOBSTATE_KEY_FILE``;
        ``key_provider``: ``BLOBSTATE_KEY_PROVIDER``)."""
        return cls(key_file or settings.key_file, provider or settings.key_provider, key_id)

    @property
    def given(self) -> bool:
        """True when the operator configured a key (so a new repository is encrypted)."""
        return bool(self.key_file or self.provider or self.key_id)

    def required(self, encrypt: bool) -> KeyConfig:
        """This configuration; ``EncryptionKeyError`` (exit 3) when ``encrypt`` asks for an encrypted repository and
        no key is configured."""
        if encrypt and not self.given:
            raise EncryptionKeyError("--encrypt needs a key (--key-file FILE or BLOBSTATE_KEY_FILE=FILE, or a key "
                                     "provider plugin's --key-provider NAME --key-id ID)")
        return self

    def provider_for(self, name: str | None = None, key_id: str | None = None) -> KeyProvider:
        """The key provider ``name`` (default: this configuration's, else ``file``) for ``key_id``, through the
        plugin manager. Raises ``EncryptionKeyError`` when it has no key (the file provider without a file)."""
        from blobstate.plugin.manager import get_plugin_manager
        from blobstate.plugin.records import KeyProviderSpec, instantiate

        name = name or self.provider or DEFAULT_PROVIDER
        spec = get_plugin_manager().select(KeyProviderSpec, name).spec
        options = {"key_file": self.key_file} if self.key_file else {}
        provider = instantiate(spec, f"key provider {name!r}", key_id or self.key_id, options)
        provider.name = provider.name or name
        return provider


def new_encryption(config: KeyConfig) -> Callable[[str], dict[str, Any]]:
    """What writes a new repository's ``encryption`` object for its repository id: a fresh data key, wrapped by
    ``config``'s key (the provider is asked when the marker is written, not before)."""
    def block(repository_id: str) -> dict[str, Any]:
        provider = config.provider_for()
        wrapped = provider.wrap(new_key(), repository_id.encode())
        return EncryptionInfo(ALGORITHM, provider.name, provider.key_id(), wrapped).to_json()

    return block


def open_cipher(block: dict[str, Any] | None, repository_id: str, config: KeyConfig, *, url: str,
                writing: bool) -> ObjectCipher | None:
    """The cipher of the repository whose marker holds ``block`` (None: not encrypted, and None is returned).

    Raises ``EncryptionKeyError`` (exit 3) when the configured key cannot unwrap the data key (a wrong key, or no
    key), and, for a writer (``writing``), when a key is configured but the repository is not encrypted.
    """
    from blobstate.config.options import redact, register_secret

    if block is None:
        if writing and config.given:
            raise EncryptionKeyError(
                f"a key is configured (--key-file, BLOBSTATE_KEY_FILE or BLOBSTATE_KEY_PROVIDER), but the repository "
                f"at {redact(url)} is not encrypted: refusing to write plaintext where a key says ciphertext was "
                "meant. Unset the key for this repository, or back up into a new location (it is created "
                "encrypted)")
        return None
    info = EncryptionInfo.from_json(block)
    try:
        provider = config.provider_for(info.key_provider, info.key_id)
    except EncryptionKeyError as exc:
        raise EncryptionKeyError(f"the repository at {redact(url)} is encrypted (key {info.key_id} of provider "
                                 f"{info.key_provider!r}): {exc}") from None
    data_key = provider.unwrap(info.wrapped_key, info.key_id, repository_id.encode())
    register_secret(data_key)
    return ObjectCipher(data_key, repository_id)


def rewrap(block: dict[str, Any], repository_id: str, old: KeyConfig, new: KeyConfig) -> EncryptionInfo:
    """The ``encryption`` object with the data key unwrapped by ``old`` and wrapped again by ``new`` (its provider
    defaults to the recorded one), checked by unwrapping it back. The data key does not change, so nothing but the
    marker is rewritten. Raises ``EncryptionKeyError`` when ``old`` cannot unwrap it."""
    info = EncryptionInfo.from_json(block)
    context = repository_id.encode()
    data_key = old.provider_for(info.key_provider, info.key_id).unwrap(info.wrapped_key, info.key_id, context)
    provider = new.provider_for(new.provider or info.key_provider)
    rotated = EncryptionInfo(ALGORITHM, provider.name, provider.key_id(), provider.wrap(data_key, context))
    if provider.unwrap(rotated.wrapped_key, rotated.key_id, context) != data_key:
        raise EncryptionKeyError(f"key provider {provider.name!r} does not give back the data key it wrapped")
    return rotated
