"""The registration records of blobstate's built-in backends: names, schemes and dotted paths, nothing else.

Like fsspec's ``registry`` (``known_implementations``: a protocol name and a class path), importing this module
imports no backend: a factory is a dotted path, resolved only when its backend is opened
(``blobstate.plugin.records.resolve_factory``), so a missing optional dependency fails only then, and always the same
way: ``MissingDependencyError`` carrying the record's ``install_hint``.

Each built-in is a plugin object here, registered through ``blobstate.plugins.BUILTIN_PLUGINS`` with the same
``register()`` a third party's entry point goes through (an entry point may name a module or, as here, an object:
``"blobstate.plugins.registry:s3"``).
"""

from __future__ import annotations

from blobstate.plugin.hookspecs import hookimpl
from blobstate.plugin.records import BlobStoreSpec, CheckpointLogSpec, LocalStoreSpec, extra_install_hint

PKG = "blobstate.plugins"


class FsspecPlugin:
    """``file://``, plain paths and ``memory://``, plus every other fsspec protocol as the fallback."""

    @hookimpl
    def blobstate_blob_stores(self) -> list[BlobStoreSpec]:
        return [
            BlobStoreSpec(name="fsspec", schemes=("file", "local", "memory"),
                          factory=f"{PKG}.fsspec_store:FsspecBlobStore", priority=0,
                          description="any fsspec filesystem; TTL as lease objects"),
            BlobStoreSpec(name="fsspec-generic", schemes=("*",), factory=f"{PKG}.fsspec_store:FsspecBlobStore",
                          priority=-100, description="fallback for every other fsspec protocol (lease-mode TTL)"),
        ]


class S3Plugin:
    """``s3://`` and ``s3a://`` through s3fs, above the generic fsspec store."""

    @hookimpl
    def blobstate_blob_stores(self) -> list[BlobStoreSpec]:
        return [BlobStoreSpec(name="s3", schemes=("s3", "s3a"), factory=f"{PKG}.s3_store:S3BlobStore", priority=10,
                              install_hint=extra_install_hint("s3"),
                              description="Amazon S3 and S3-compatible stores (s3fs); native TTL: object tag + "
                                          "lifecycle rule")]


class GcsPlugin:
    """``gs://`` and ``gcs://`` through gcsfs, above the generic fsspec store."""

    @hookimpl
    def blobstate_blob_stores(self) -> list[BlobStoreSpec]:
        return [BlobStoreSpec(name="gcs", schemes=("gs", "gcs"), factory=f"{PKG}.gcs_store:GcsBlobStore",
                              priority=10, install_hint=extra_install_hint("gcs"),
                              description="Google Cloud Storage (gcsfs); native TTL: customTime + "
                                          "daysSinceCustomTime rule")]


class AzurePlugin:
    """``az://``, ``abfs://`` and ``abfss://`` through adlfs, above the generic fsspec store."""

    @hookimpl
    def blobstate_blob_stores(self) -> list[BlobStoreSpec]:
        return [BlobStoreSpec(name="azure", schemes=("az", "abfs", "abfss"),
                              factory=f"{PKG}.azure_store:AzureBlobStore", priority=10,
                              install_hint=extra_install_hint("azure"),
                              description="Azure Blob Storage (adlfs); native TTL: blob index tag + lifecycle "
                                          "policy")]


class FileLogPlugin:
    """The default checkpoint log: one object per generation on whichever blob store serves the URL."""

    @hookimpl
    def blobstate_checkpoint_logs(self) -> list[CheckpointLogSpec]:
        return [CheckpointLogSpec(name="file", schemes=("*",), factory=f"{PKG}.file_log:open_file_log",
                                  priority=-100,
                                  description="one object per generation on any blob store, exclusive create")]


class SqlLogPlugin:
    """``sqlite:///`` and ``postgresql://`` checkpoint logs through SQLAlchemy."""

    @hookimpl
    def blobstate_checkpoint_logs(self) -> list[CheckpointLogSpec]:
        return [CheckpointLogSpec(name="sql", schemes=("sqlite", "postgresql", "postgres"),
                                  factory=f"{PKG}.sql_log:open_sql_log", priority=10,
                                  install_hint=extra_install_hint("sql"),
                                  description="SQL table keyed by (job, task, store, generation): SQLite, "
                                              "PostgreSQL")]


class KafkaLogPlugin:
    """``kafka://`` checkpoint logs: a compacted topic keyed by store key."""

    @hookimpl
    def blobstate_checkpoint_logs(self) -> list[CheckpointLogSpec]:
        return [CheckpointLogSpec(name="kafka", schemes=("kafka",), factory=f"{PKG}.kafka:open_kafka_log",
                                  priority=10, install_hint=extra_install_hint("kafka"),
                                  description="compacted Kafka topic keyed by store key; first record per "
                                              "generation wins")]


class RocksDBPlugin:
    """The ``rocksdb`` local store (rocksdict): RocksDB's own hard-linked checkpoints."""

    @hookimpl
    def blobstate_local_stores(self) -> list[LocalStoreSpec]:
        return [LocalStoreSpec(name="rocksdb", store_type="rocksdb", factory=f"{PKG}.rocksdb_store:RocksDBStore",
                               priority=10, detect=f"{PKG}.rocksdb_store:looks_like_rocksdb",
                               description="RocksDB via rocksdict; hard-linked checkpoints")]


class DirPlugin:
    """The ``dir`` local store: any directory, copied."""

    @hookimpl
    def blobstate_local_stores(self) -> list[LocalStoreSpec]:
        return [LocalStoreSpec(name="dir", store_type="dir", factory=f"{PKG}.dir_store:DirStore", priority=0,
                               detect=f"{PKG}.dir_store:looks_like_dir", description="any directory, copied")]


fsspec = FsspecPlugin()
s3 = S3Plugin()
gcs = GcsPlugin()
azure = AzurePlugin()
file_log = FileLogPlugin()
sql_log = SqlLogPlugin()
kafka_log = KafkaLogPlugin()
rocksdb = RocksDBPlugin()
dir_store = DirPlugin()
