"""The registration table of blobstate's built-in backends: names, schemes and dotted paths, nothing else.

Like fsspec's ``registry.known_implementations`` (a protocol name and a class path), ``KNOWN_IMPLEMENTATIONS``
maps each built-in plugin's name to the registration records it gives; importing this module imports no backend:
a factory is a dotted path, resolved only when its backend is opened (``blobstate.plugin.records.resolve_factory``),
so a missing optional dependency fails only then, and always the same way: ``MissingDependencyError`` carrying the
record's ``install_hint``.

Each entry is registered by the plugin manager as a ``TablePlugin`` under its name, with the same ``register()`` a
third party's entry point goes through, so ``BLOBSTATE_DISABLE_PLUGINS=s3`` blocks a built-in like any plugin.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.records import (
    BlobStoreSpec,
    CheckpointLogSpec,
    KeyProviderSpec,
    LocalStoreSpec,
    Spec,
    extra_install_hint,
)

PKG = "blobstate.plugins"

#: plugin name -> the registration records that plugin gives (blob stores, checkpoint logs, local stores).
KNOWN_IMPLEMENTATIONS: dict[str, tuple[Spec, ...]] = {
    "fsspec": (
        BlobStoreSpec(name="fsspec", schemes=("file", "local", "memory"), factory=f"{PKG}.fsspec_store:FsspecBlobStore",
                      priority=0, description="any fsspec filesystem; TTL as lease objects"),
        BlobStoreSpec(name="fsspec-generic", schemes=("*",), factory=f"{PKG}.fsspec_store:FsspecBlobStore",
                      priority=-100, description="fallback for every other fsspec protocol (lease-mode TTL)"),
    ),
    "s3": (BlobStoreSpec(name="s3", schemes=("s3", "s3a"), factory=f"{PKG}.s3_store:S3BlobStore", priority=10,
                         install_hint=partial(extra_install_hint, "s3"),
                         description="Amazon S3 and S3-compatible stores (s3fs); native TTL: object tag + "
                                     "lifecycle rule"),),
    "gcs": (BlobStoreSpec(name="gcs", schemes=("gs", "gcs"), factory=f"{PKG}.gcs_store:GcsBlobStore", priority=10,
                          install_hint=partial(extra_install_hint, "gcs"),
                          description="Google Cloud Storage (gcsfs); native TTL: customTime + daysSinceCustomTime "
                                      "rule"),),
    "azure": (BlobStoreSpec(name="azure", schemes=("az", "abfs", "abfss"), factory=f"{PKG}.azure_store:AzureBlobStore",
                            priority=10, install_hint=partial(extra_install_hint, "azure"),
                            description="Azure Blob Storage (adlfs); native TTL: blob index tag + lifecycle policy"),),
    "file_log": (CheckpointLogSpec(name="file", schemes=("*",), factory=f"{PKG}.file_log:open_file_log",
                                   priority=-100,
                                   description="one object per generation on any blob store, exclusive create"),),
    "sql_log": (CheckpointLogSpec(name="sql", schemes=("sqlite", "postgresql", "postgres"),
                                  factory=f"{PKG}.sql_log:open_sql_log", priority=10,
                                  install_hint=partial(extra_install_hint, "sql"),
                                  description="SQL table keyed by (job, task, store, generation): SQLite, "
                                              "PostgreSQL"),),
    "kafka_log": (CheckpointLogSpec(name="kafka", schemes=("kafka",), factory=f"{PKG}.kafka.log:open_kafka_log",
                                    priority=10, install_hint=partial(extra_install_hint, "kafka"),
                                    description="compacted Kafka topic keyed by store key; first record per "
                                                "generation wins"),),
    "rocksdb": (LocalStoreSpec(name="rocksdb", store_type="rocksdb", factory=f"{PKG}.rocksdb_store:RocksDBStore",
                               priority=10, detect=f"{PKG}.rocksdb_store:looks_like_rocksdb",
                               description="RocksDB via rocksdict; hard-linked checkpoints"),),
    "dir_store": (LocalStoreSpec(name="dir", store_type="dir", factory=f"{PKG}.dir_store:DirStore", priority=0,
                                 detect=f"{PKG}.dir_store:looks_like_dir", description="any directory, copied"),),
    "key_file": (KeyProviderSpec(name="file", factory=f"{PKG}.key_file:FileKeyProvider",
                                 install_hint=partial(extra_install_hint, "encrypt"),
                                 description="wraps an encrypted repository's data key with a key file "
                                             "(--key-file, BLOBSTATE_KEY_FILE)"),),
}


class TablePlugin:
    """A plugin giving a fixed set of registration records through the backend hooks."""

    def __init__(self, records: Iterable[Spec]) -> None:
        self.records = tuple(records)

    def _of(self, kind: type) -> list:
        return [r for r in self.records if isinstance(r, kind)]

    @hookimpl
    def blobstate_blob_stores(self) -> list[BlobStoreSpec]:
        return self._of(BlobStoreSpec)

    @hookimpl
    def blobstate_checkpoint_logs(self) -> list[CheckpointLogSpec]:
        return self._of(CheckpointLogSpec)

    @hookimpl
    def blobstate_local_stores(self) -> list[LocalStoreSpec]:
        return self._of(LocalStoreSpec)

    @hookimpl
    def blobstate_key_providers(self) -> list[KeyProviderSpec]:
        return self._of(KeyProviderSpec)

    def __repr__(self) -> str:
        return f"TablePlugin({', '.join(r.name for r in self.records)})"


def builtin_plugins() -> dict[str, object]:
    """Every built-in plugin by name: one ``TablePlugin`` per table entry, then the ``steplog`` observer."""
    from blobstate.plugins import steplog

    return {**{name: TablePlugin(records) for name, records in KNOWN_IMPLEMENTATIONS.items()}, "steplog": steplog}
