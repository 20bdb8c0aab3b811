"""The verbs of a repository as a whole (re-exported by ``blobstate.api``): ``init`` (its marker and checkpoint
log), ``rotate_key`` (the wrapped data key of an encrypted repository) and ``lifecycle_rule`` (its bucket's rule
that expires TTL-tagged blobs). None of them touches a store's checkpoints. Each takes ``settings`` and its own
setting keywords as every verb does (``blobstate.api``) and opens the repository with them (``Repository.open``,
the entry room's own opening: these verbs name no store).
"""

from __future__ import annotations

from blobstate.codec.keys import KeyConfig
from blobstate.config.settings import Settings
from blobstate.config.units import Duration, Options, parse_duration_ms
from blobstate.errors import ConfigurationError
from blobstate.model.layout import DEFAULT_TTL_MS
from blobstate.repository.backends import open_blob_store
from blobstate.repository.marker import RepositoryInfo
from blobstate.repository.repo import Repository
from blobstate.repository.rotation import rotate_data_key

__all__ = ["init", "lifecycle_rule", "rotate_key"]


def init(*, repo: str, storage_options: Options = None, log: str | None = None, log_options: Options = None,
         change_log: bool = False, encrypt: bool = False, key_file: str | None = None,
         key_provider: str | None = None, key_id: str | None = None,
         settings: Settings | None = None) -> RepositoryInfo:
    """Make ``repo`` a blobstate repository (write its marker, recording its checkpoint log ``log``, default the
    file log inside it; optional: the first backup does it too).

    Idempotent on a repository with the same log. ``change_log``: move an existing repository to the log ``log`` on
    purpose (the checkpoints recorded in the old log are not carried over: back up each store again through the
    new one). A repository is created encrypted when a key is configured (``key_file`` or ``BLOBSTATE_KEY_FILE``;
    ``key_provider`` and ``key_id`` for a KMS plugin); ``encrypt`` makes a missing key an error instead of a
    plaintext repository. Raises ``RepositoryNotFound`` (exit 6) for a location that holds other objects,
    ``LogMismatchError`` (exit 2) for another log without ``change_log``, ``EncryptionKeyError`` (exit 3) for
    ``encrypt`` without a key, a wrong key, or a key for an existing repository that is not encrypted.
    """
    settings = Settings.for_call(settings, key_file=key_file)
    keys = KeyConfig.of(settings, provider=key_provider, key_id=key_id).required(encrypt)
    with Repository.open(repo, log=log, storage_options=storage_options, log_options=log_options, create=True,
                         change_log=change_log, key_config=keys, settings=settings) as repository:
        assert repository.info is not None
        return repository.info


def rotate_key(*, repo: str, storage_options: Options = None, key_file: str | None = None,
               new_key_file: str | None = None, new_key_provider: str | None = None,
               new_key_id: str | None = None, settings: Settings | None = None) -> RepositoryInfo:
    """Re-wrap an encrypted repository's data key with a new key (``new_key_file``, or ``new_key_provider`` and
    ``new_key_id`` for a KMS plugin): only the marker is rewritten, no data; the old key (``key_file`` or
    ``BLOBSTATE_KEY_FILE``) must unwrap it first. The data key itself stays: whoever kept it (or the old key and
    an old copy of the marker) can still read the repository. Raises ``EncryptionKeyError`` (exit 3) when the old
    key does not unwrap it, ``RepositoryNotFound`` (exit 6), ``ConfigurationError`` (exit 2) for a repository that
    is not encrypted or no new key.
    """
    settings = Settings.for_call(settings, key_file=key_file)
    store = open_blob_store(repo, settings=settings, storage_options=storage_options)
    try:
        return rotate_data_key(store, repo, KeyConfig.of(settings),
                               KeyConfig(new_key_file, new_key_provider, new_key_id))
    finally:
        store.close()


def lifecycle_rule(*, repo: str, ttl: Duration = DEFAULT_TTL_MS, storage_options: Options = None,
                   install: bool = False, settings: Settings | None = None) -> tuple[str | None, bool]:
    """The cloud lifecycle rule that expires TTL-tagged blobs (native TTL), and whether it was installed.

    Returns ``(None, False)`` for a store without native TTL (leases, swept by ``gc``), ``(rule, False)`` when the
    rule must be installed by hand (or ``install`` is false), ``(rule, True)`` once installed. A bucket-level setting:
    it needs no repository marker (it may come before the first backup).
    """
    settings = Settings.for_call(settings)
    try:
        blob_store = open_blob_store(repo, settings=settings, storage_options=storage_options, ttl_mode="native")
    except ConfigurationError:
        return None, False  # no native TTL here
    try:
        ttl_value = parse_duration_ms(ttl)
        rule = blob_store.lifecycle_rule(ttl_value)
        return rule, bool(rule is not None and install and blob_store.install_lifecycle(ttl_value))
    finally:
        blob_store.close()
