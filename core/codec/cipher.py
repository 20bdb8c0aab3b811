"""Authenticated encryption of repository objects: AES-256-GCM under the repository's data key (``cryptography``).

Every object gets a fresh random 96-bit nonce (NIST SP 800-38D, 8.2.2: random nonces are safe up to 2^32
encryptions under one key, a collision chance below 2^-32; a repository writes a few objects per commit, so at
1,000 objects a second it takes 136 years to get there) and is bound to its name by the associated data
(``associated_data``: the repository id, the kind of body and the object's name), so an object copied under
another name, into another repository, or a record moved to another generation fails authentication instead of
being read. The data key never changes (rotation re-wraps it, ``blobstate.codec.keys``), so the nonce count runs
over the repository's whole life.

``cryptography`` is the ``encrypt`` extra: it is imported only when an encrypted repository is opened.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from blobstate.errors import ChecksumMismatch, IntegrityError
from blobstate.plugin.records import extra_install_hint, missing_dependency

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's 96-bit nonce
TAG_BYTES = 16
ALGORITHM = "AES-256-GCM"
_AD_PREFIX = b"blobstate/v1\x00"


def _gcm() -> Any:
    """The ``cryptography`` modules (``Cipher``, ``algorithms``, ``modes``, ``AESGCM``, ``InvalidTag``)."""
    try:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:
        raise missing_dependency("an encrypted repository", exc, extra_install_hint("encrypt")) from exc
    return Cipher, algorithms, modes, AESGCM, InvalidTag


def new_key() -> bytes:
    """A fresh 256-bit key from the operating system's CSPRNG."""
    return os.urandom(KEY_BYTES)


def associated_data(repository_id: str, kind: str, name: str, header: bytes = b"") -> bytes:
    """What a ciphertext is bound to: the repository, the kind of body (``object``, ``record``, ``lease``), the
    object's name and the frame header (its flags)."""
    return b"\x00".join([_AD_PREFIX, repository_id.encode(), kind.encode(), name.encode("utf-8", "surrogatepass"),
                         header])


def seal(key: bytes, data: bytes, ad: bytes) -> bytes:
    """``nonce | ciphertext | tag`` of ``data`` under ``key`` (one shot: small bodies and wrapped keys)."""
    _, _, _, aesgcm, _ = _gcm()
    nonce = os.urandom(NONCE_BYTES)
    return nonce + aesgcm(key).encrypt(nonce, data, ad)


def unseal(key: bytes, sealed: bytes, ad: bytes, what: str) -> bytes:
    """The plaintext of ``seal``'s output; ``ChecksumMismatch`` naming ``what`` when it does not authenticate."""
    _, _, _, aesgcm, invalid_tag = _gcm()
    if len(sealed) < NONCE_BYTES + TAG_BYTES:
        raise ChecksumMismatch(f"{what} is too short to be an encrypted body ({len(sealed)} bytes)")
    try:
        return aesgcm(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], ad)
    except invalid_tag:
        raise not_authentic(what) from None


def not_authentic(what: str) -> IntegrityError:
    return ChecksumMismatch(f"{what} does not authenticate under the repository's data key (damaged, written "
                            "without the key, or another object's bytes under its name)")


def keystream_at(key: bytes, iv: bytes, offset: int) -> Any:
    """An AES-256-CTR encryptor (CTR is its own inverse: it decrypts too) of ``key`` and the 16-byte initial
    counter ``iv``, positioned at byte ``offset`` of the stream: for bytes that never leave this host and whose key
    is never stored (a copy's staged chunks, ``blobstate.commit.copy_staging``), where a retried write starts again
    at an earlier offset. Unauthenticated: what it protects is checked by its CRC32C on the way back."""
    cipher, algorithms, modes, _, _ = _gcm()
    block, skip = divmod(offset, 16)
    counter = ((int.from_bytes(iv, "big") + block) % (1 << 128)).to_bytes(16, "big")
    stream = cipher(algorithms.AES(key), modes.CTR(counter)).encryptor()
    stream.update(bytes(skip))
    return stream


class ObjectCipher:
    """AES-256-GCM under one repository's data key (``key``, 32 bytes) and id (``repository_id``, bound into every
    ciphertext). Never logged: ``repr`` shows the repository id only."""

    def __init__(self, key: bytes, repository_id: str) -> None:
        if len(key) != KEY_BYTES:
            raise ValueError("a data key is 32 bytes")
        self._key = key
        self.repository_id = repository_id

    def __repr__(self) -> str:
        return f"ObjectCipher(repository {self.repository_id}, {ALGORITHM})"

    def seal(self, kind: str, name: str, data: bytes) -> bytes:
        """A small body (a record, a lease) sealed as ``nonce | ciphertext | tag``."""
        return seal(self._key, data, associated_data(self.repository_id, kind, name))

    def unseal(self, kind: str, name: str, sealed: bytes) -> bytes:
        """``seal``'s plaintext; ``ChecksumMismatch`` when it does not authenticate."""
        return unseal(self._key, sealed, associated_data(self.repository_id, kind, name), f"the {kind} {name}")

    def encryptor(self, name: str, header: bytes) -> tuple[bytes, Any]:
        """``(nonce, streaming encryptor)`` for the object ``name`` whose frame header is ``header``: feed it with
        ``update``, end with ``finalize()`` and append its ``tag``."""
        cipher, algorithms, modes, _, _ = _gcm()
        nonce = os.urandom(NONCE_BYTES)
        enc = cipher(algorithms.AES(self._key), modes.GCM(nonce)).encryptor()
        enc.authenticate_additional_data(associated_data(self.repository_id, "object", name, header))
        return nonce, enc

    def decryptor(self, name: str, header: bytes, nonce: bytes) -> tuple[Any, Callable[[bytes], None]]:
        """``(streaming decryptor, finish)`` for the object ``name``: ``finish(tag)`` checks the tag at the end
        (``ChecksumMismatch`` when it does not authenticate). Plaintext comes out before the tag is checked: a
        caller uses none of it before ``finish`` returned."""
        cipher, algorithms, modes, _, invalid_tag = _gcm()
        dec = cipher(algorithms.AES(self._key), modes.GCM(nonce)).decryptor()
        dec.authenticate_additional_data(associated_data(self.repository_id, "object", name, header))

        def finish(tag: bytes) -> None:
            try:
                dec.finalize_with_tag(tag)
            except (invalid_tag, ValueError):
                raise not_authentic(f"the object {name}") from None

        return dec, finish
