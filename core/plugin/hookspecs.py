"""The hook specifications of blobstate (pluggy project name ``blobstate``, entry-point group ``blobstate``).

A plugin is a module or object with functions named like the specs below, decorated with ``blobstate.hookimpl``.
Backend hooks return registration records; observer hooks are called for their side effects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from blobstate.config.settings import Settings
    from blobstate.journal.events import Event
    from blobstate.model.records import StoreKey
    from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, KeyProviderSpec, LocalStoreSpec

PROJECT = "blobstate"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def blobstate_blob_stores() -> Iterable[BlobStoreSpec]:
    """Return the blob store backends this plugin provides.

    Example::

        from blobstate import hookimpl, BlobStoreSpec

        @hookimpl
        def blobstate_blob_stores():
            return [BlobStoreSpec(name="mystore", schemes=("my",), factory="my_pkg.store:MyBlobStore")]
    """


@hookspec
def blobstate_checkpoint_logs() -> Iterable[CheckpointLogSpec]:
    """Return the checkpoint log backends this plugin provides.

    Example::

        from blobstate import hookimpl, CheckpointLogSpec

        @hookimpl
        def blobstate_checkpoint_logs():
            return [CheckpointLogSpec(name="etcd", schemes=("etcd",), factory="my_pkg.log:EtcdCheckpointLog")]
    """


@hookspec
def blobstate_local_stores() -> Iterable[LocalStoreSpec]:
    """Return the local store types this plugin provides.

    Example::

        from blobstate import hookimpl, LocalStoreSpec

        @hookimpl
        def blobstate_local_stores():
            return [LocalStoreSpec(name="sqlite", store_type="sqlite", factory="my_pkg.sqlite:SqliteStore",
                                   detect="my_pkg.sqlite:looks_like_sqlite")]
    """


@hookspec
def blobstate_key_providers() -> Iterable[KeyProviderSpec]:
    """Return the key providers this plugin provides: what wraps the data key of an encrypted repository (a KMS).

    Example::

        from blobstate import hookimpl, KeyProviderSpec

        @hookimpl
        def blobstate_key_providers():
            return [KeyProviderSpec(name="aws-kms", factory="my_pkg.kms:AwsKmsKeyProvider")]
    """


@hookspec
def blobstate_journal_event(event: Event, store_key: StoreKey) -> None:
    """Called for every journal event once it is durable (metrics, tests, a Spark UI). Must not raise.

    Example::

        from blobstate import hookimpl

        @hookimpl
        def blobstate_journal_event(event, store_key):
            print(store_key, event.type_name, event.commit_id)
    """


@hookspec(historic=True)
def blobstate_configure(config: dict[str, Any], settings: Settings) -> None:
    """Called once with the effective configuration and the settings object (historic: plugins registered later
    get them too, at their registration). Take only the arguments you use (pluggy passes those named).

    ``settings`` is the ``blobstate.config.settings.Settings`` the plugin manager was built with: those of the
    command or API call that first needed a backend in this process (sizes in bytes, durations in seconds,
    booleans parsed). A backend's factory is handed the settings of the call that opens it (``settings=``, when
    the factory declares that keyword).

    ``config`` holds ``command`` (``"backup"``, ...; ``None`` outside the CLI), the command's options under the
    API's names (``repo``, ``log``, ``job``, ``task``, ``store``, ``ttl`` in ms, ``chunk_size`` in bytes, ...),
    ``storage_options`` and ``log_options`` (credentials redacted), ``work_base``, ``retry_attempts``,
    ``max_concurrency``, ``plugins_autoload``, and every ``BLOBSTATE_*`` variable under its own name (see
    ``blobstate.config.settings.effective_configuration``). An implementation that raises marks its plugin broken.

    Example::

        from blobstate import hookimpl

        @hookimpl
        def blobstate_configure(config):
            config.setdefault("my_plugin.enabled", True)
    """
