"""Key rotation (issue 33, made crash- and race-safe by issue 39): the encrypted repository's data key is re-wrapped
with a new key and only the marker's ``encryption`` changes.

In order (``rotate_data_key``):

1. the marker is read and the data key unwrapped with the old key and wrapped with the new one (``keys.rewrap``
   checks the new wrapping unwraps);
2. a copy of the marker as read (the previous wrapping) is kept beside it (``layout.marker_copy_id``, created
   exclusively): from here until step 4 there are two good copies of the key;
3. the marker is rewritten through the Rewrite door (``marker.update_marker``): all or nothing, and only if it still
   holds the wrapping step 1 unwrapped. Another rotation that got there first makes this one fail
   (``ObjectChangedError``, exit 4: run it again with the key it rotated to) instead of both "succeeding" with one
   key lost; a change of the log meanwhile is kept (the door reads the marker again and re-applies the new wrapping);
4. the marker is read back and the new key must unwrap it; only then are the kept copies removed.

A SIGKILL at any point leaves a marker the old or the new key opens, and until step 4 a copy the old key opens
(``marker.read_marker`` reads the newest copy when the marker itself is missing or damaged). Running the rotation
again finishes an interrupted one: from the old key while the marker still holds the old wrapping, from the new key
to itself once it holds the new one (which removes the copies left behind).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from blobstate.errors import ConfigurationError, EncryptionKeyError, ObjectChangedError, RepositoryNotFound
from blobstate.model import layout
from blobstate.plugin.capabilities import folder_removal
from blobstate.plugin.interfaces import BlobStore
from blobstate.repository.marker import RepositoryInfo, keep_copy, read_marker, update_marker

if TYPE_CHECKING:
    from blobstate.codec.keys import KeyConfig

log = logging.getLogger(__name__)


def rotate_data_key(store: BlobStore, url: str, old: KeyConfig, new: KeyConfig) -> RepositoryInfo:
    """Re-wrap the data key of the encrypted repository in ``store`` (at ``url``): unwrapped by ``old``, wrapped by
    ``new`` (``blobstate.codec.keys.rewrap``), the steps of the module docstring; nothing but the marker changes.
    Raises ``ConfigurationError`` (exit 2) without a new key or for a repository that is not encrypted,
    ``RepositoryNotFound`` (exit 6), ``EncryptionKeyError`` (exit 3) when ``old`` does not unwrap the data key or
    ``new`` does not open the marker read back, ``ObjectChangedError`` (exit 4) when another rotation changed the
    key since it was read."""
    from blobstate.codec.keys import open_cipher, rewrap
    from blobstate.config.options import redact

    if not new.given:
        raise ConfigurationError("name the new key (--new-key-file FILE, or --new-key-provider NAME --new-key-id ID)")
    info = read_marker(store)
    if info is None:
        raise RepositoryNotFound(f"no blobstate repository at {redact(url)}")
    if info.encryption is None:
        raise ConfigurationError(f"the repository at {redact(url)} is not encrypted: it has no key to rotate")
    wrapped = rewrap(info.encryption, info.repository_id, old, new).to_json()
    keep_copy(store, info)
    record_encryption(store, info, wrapped)
    again = read_marker(store)
    if again is None or again.encryption != wrapped:
        raise ObjectChangedError("the repository marker changed right after the key was rotated: run the rotation "
                                 "again")
    try:
        open_cipher(again.encryption, again.repository_id, new, url=url, writing=False)
    except EncryptionKeyError as exc:  # the copy of the previous wrapping stays: the old key still opens it
        raise EncryptionKeyError(f"the new key does not open the rotated marker ({exc}); the previous wrapping is "
                                 "kept beside it") from None
    drop_copies(store)
    return again


def record_encryption(store: BlobStore, info: RepositoryInfo, encryption: dict[str, Any]) -> RepositoryInfo:
    """Rewrite the marker with ``encryption`` (a re-wrapped data key) through the Rewrite door, only while it still
    holds the wrapping ``info`` was read with (or already holds ``encryption``). Raises ``ObjectChangedError`` (exit
    4) when another rotation changed it, ``StorageError`` when it cannot be written."""

    def rotated(current: RepositoryInfo) -> RepositoryInfo | None:
        if current.repository_id != info.repository_id:
            raise ObjectChangedError("the repository marker now names another repository: nothing rotated")
        if current.encryption == encryption:
            return None  # written already (an earlier attempt whose answer was lost)
        if current.encryption != info.encryption:
            raise ObjectChangedError("the repository's key was changed by another key rotation since this one read "
                                     f"it (key {(current.encryption or {}).get('keyId')} now): nothing rotated; run "
                                     "the rotation again from that key if it is still wanted")
        return replace(current, encryption=encryption)

    return update_marker(store, rotated)


def drop_copies(store: BlobStore) -> list[str]:
    """Remove every kept copy of the marker (older wrappings; the key they hold no longer needs to open anything), the
    leftovers of copies a kill cut off, and, where the store has folders, their folder. Returns the ids removed."""
    ids = [info.blob_id for info in store.list(layout.MARKER_COPIES)]
    # and the temporary files of copies whose exclusive create a kill cut off (only rotations write there)
    ids += [info.blob_id for info in store.temporaries(layout.MARKER_COPIES)]
    store.delete_many(ids)
    remove = folder_removal(store)
    if remove is not None:
        remove(layout.MARKER_COPIES)
    if ids:
        log.info("removed %d kept copies of the repository marker", len(ids))
    return ids
