"""Built-in plugins of blobstate, each a module registered exactly like a third-party plugin.

``BUILTIN_PLUGINS`` lists them explicitly (no auto-discovery); the plugin manager registers each through the same
``register()`` that entry points go through.
"""

BUILTIN_PLUGINS: tuple[str, ...] = (
    "blobstate.plugins.fsspec_store",
    "blobstate.plugins.file_log",
    "blobstate.plugins.kafka_log", "blobstate.plugins.sql_log",
    "blobstate.plugins.rocksdb_store",
    "blobstate.plugins.dir_store",
    "blobstate.plugins.s3_store", "blobstate.plugins.gcs_store", "blobstate.plugins.azure_store",
)
