"""Built-in plugins of blobstate, each registered exactly like a third-party plugin.

``BUILTIN_PLUGINS`` lists them explicitly (no auto-discovery), as entry-point style references
(``module:object``); the plugin manager loads and registers each through the same ``register()`` that entry
points go through. The records live in ``blobstate.plugins.registry`` (names and dotted paths only); the
implementations in the other modules here are imported only when their backend is opened.
"""

BUILTIN_PLUGINS: tuple[str, ...] = tuple(
    f"blobstate.plugins.registry:{name}"
    for name in ("fsspec", "s3", "gcs", "azure", "file_log", "sql_log", "kafka_log", "rocksdb", "dir_store")
)
