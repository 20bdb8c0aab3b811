"""An engine's own commit log read without the engine: a Spark checkpoint location, for the readers that run without
Spark (``blobstate restore``, ``blobstate state``, ``blobstate.read_state`` / ``read_changes``).

A Spark checkpoint location holds ``metadata`` (``{"id": "<query id>"}``), ``offsets/<batch>`` (a batch planned) and
``commits/<batch>`` (a batch completed); ``.<batch>.crc`` and ``*.tmp`` are Hadoop's side files. The batch a restart
takes as done (``blobstate.model.align.spark_done``) is what these readers read by default. The location is read
through fsspec (a local path, ``file://``, ``s3://``, ``gs://``, ``abfs://``, ``hdfs://`` with its fsspec
implementation installed), read only. The Spark API's readers read it through Spark's own Hadoop file system
instead (``blobstate.spark.committed.location``).
"""

from __future__ import annotations

import json
from typing import Any

from blobstate.config.options import redact
from blobstate.errors import StorageError
from blobstate.model.align import EngineLog, spark_done


def _batches(fs: Any, path: str) -> list[int]:
    if not fs.exists(path):
        return []
    names = [str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]
    return sorted(int(n) for n in names if n.isdigit())


def read_spark_location(location: str, storage_options: dict[str, Any] | None = None) -> EngineLog:
    """What the Spark checkpoint location ``location`` says (``EngineLog``: the batch a restart takes as done, the
    query id). Raises ``StorageError`` when it cannot be read, or holds a ``metadata`` without a query id."""
    import fsspec

    try:
        fs, root = fsspec.core.url_to_fs(location, **(storage_options or {}))
        root = root.rstrip("/") or root
        committed, planned = _batches(fs, f"{root}/commits"), _batches(fs, f"{root}/offsets")
        metadata = fs.cat_file(f"{root}/metadata").decode("utf-8") if fs.exists(f"{root}/metadata") else None
    except (OSError, ValueError, ImportError) as exc:
        raise StorageError(f"cannot read Spark's checkpoint location {redact(location)}: {exc}") from exc
    query_id = None
    if metadata is not None:
        try:
            query_id = str(json.loads(metadata.strip().splitlines()[0])["id"])
        except (ValueError, KeyError, IndexError, TypeError):
            raise StorageError(f"Spark's metadata in {redact(location)} holds no query id: {metadata[:200]!r}") \
                from None
    done = spark_done(committed[-1] if committed else None, planned[-1] if planned else None)
    return EngineLog(done, f"Spark's checkpoint location {redact(location)}", query_id)


__all__ = ["read_spark_location"]
