"""Spark's checkpoint location, read the way Spark reads it: through the session's own Hadoop FileSystem.

A query's checkpoint location holds ``metadata`` (``{"id": "<query id>"}``, written when the query first starts and
kept across restarts), ``offsets/<batchId>`` (written when a micro-batch is planned) and ``commits/<batchId>``
(written once it completed); ``.<batchId>.crc`` and ``.<name>.tmp`` are Hadoop's side and temp files. blobstate only
ever reads it, never writes it.

The path is resolved as Spark resolves ``checkpointLocation``: a Hadoop ``Path`` qualified by the file system the
session's Hadoop configuration gives it (an unqualified ``/ck/q1`` lands on ``fs.defaultFS``: HDFS on YARN, DBFS,
...), with that configuration's credentials, and listed fresh on every call (Hadoop keeps no listing cache).
Classic PySpark reaches the JVM directly (``FileSystem.listStatus``); under Spark Connect there is no JVM on the
client, so the same file system is read through Spark's own file sources (``binaryFile`` for the listing, which
skips hidden and empty files: Spark's commit files are never empty; ``text`` for ``metadata``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from blobstate.errors import StorageError
from blobstate.model.align import EngineLog, spark_done

_GLOB = re.compile(r"([\\*?\[\]{}])")


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no JVM on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _escape_glob(path: str) -> str:
    """``path`` with Hadoop glob characters escaped: Spark's file sources treat a path as a glob pattern."""
    return _GLOB.sub(r"\\\1", path)


def _missing(exc: Exception) -> bool:
    condition = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
    try:
        return condition is not None and condition() == "PATH_NOT_FOUND"
    except Exception:  # noqa: BLE001 - not one of Spark's classified errors
        return False


class CheckpointLocation:
    """The checkpoint location ``location`` of a query, as ``spark`` (classic or Connect) sees it.

    Raises ``StorageError`` when the file system cannot be read (a missing location reads as empty).
    """

    def __init__(self, spark: Any, location: str) -> None:
        self.spark = spark
        self.location = location.rstrip("/") or location
        self.connect = is_connect(spark)

    def _jvm_fs(self, sub: str) -> tuple[Any, Any]:
        jvm = self.spark._jvm
        conf = self.spark._jsparkSession.sessionState().newHadoopConf()
        path = jvm.org.apache.hadoop.fs.Path(self.location)
        fs = path.getFileSystem(conf)
        target = fs.makeQualified(path) if not sub else fs.makeQualified(jvm.org.apache.hadoop.fs.Path(path, sub))
        return fs, target

    @property
    def qualified(self) -> str:
        """The location as Spark qualifies it (``file:/ck/q1``, ``hdfs://nn:8020/ck/q1``); Connect: as given."""
        if self.connect:
            return self.location
        return str(self._jvm_fs("")[1].toString())

    def batches(self, sub: str) -> list[int]:
        """Batch ids in ``commits`` or ``offsets``, ascending; ``[]`` when the folder does not exist."""
        try:
            if self.connect:
                names = self._names_via_reader(sub)
            else:
                fs, path = self._jvm_fs(sub)
                if not fs.exists(path):
                    return []
                names = [str(status.getPath().getName()) for status in fs.listStatus(path)]
        except Exception as exc:  # noqa: BLE001 - py4j and Connect errors alike
            raise StorageError(f"cannot list Spark's {sub}/ in {self.location}: {exc}") from exc
        return sorted(int(n) for n in names if n.isascii() and n.isdigit())  # never "²" or "٣": not batches

    def _names_via_reader(self, sub: str) -> list[str]:
        reader = self.spark.read.format("binaryFile")
        try:
            rows = reader.load(_escape_glob(f"{self.location}/{sub}")).select("path").collect()
        except Exception as exc:
            if _missing(exc):
                return []
            raise
        return [str(row.path).rstrip("/").rsplit("/", 1)[-1] for row in rows]

    def committed(self) -> list[int]:
        """Batch ids Spark committed (``commits/``), ascending."""
        return self.batches("commits")

    def last_committed(self) -> int | None:
        """The newest batch id in ``commits/``, or None."""
        committed = self.committed()
        return committed[-1] if committed else None

    def last_planned(self) -> int | None:
        """The newest batch id in ``offsets/`` (planned by Spark), or None."""
        planned = self.batches("offsets")
        return planned[-1] if planned else None

    def query_id(self) -> str | None:
        """The query id in ``metadata``, or None when the query never started here. Raises ``StorageError`` for a
        ``metadata`` that does not hold one."""
        try:
            if self.connect:
                try:
                    rows = self.spark.read.text(_escape_glob(f"{self.location}/metadata")).collect()
                except Exception as exc:
                    if _missing(exc):
                        return None
                    raise
                text = "\n".join(str(r.value) for r in rows)
            else:
                fs, path = self._jvm_fs("metadata")
                if not fs.exists(path):
                    return None
                stream = fs.open(path)
                try:
                    text = str(self.spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
                finally:
                    stream.close()
        except Exception as exc:  # noqa: BLE001
            raise StorageError(f"cannot read Spark's metadata in {self.location}: {exc}") from exc
        try:
            query_id = json.loads(text.strip().splitlines()[0])["id"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise StorageError(f"Spark's metadata in {self.location} holds no query id: {text[:200]!r}") from None
        return str(query_id)

    def engine_log(self) -> EngineLog:
        """What this location says for the Align door (``blobstate.model.align``): the batch Spark's restart takes
        as done (``commits/``, and ``offsets/`` when it is ahead) and the query id. Raises ``StorageError``."""
        return EngineLog(spark_done(self.last_committed(), self.last_planned()),
                         f"Spark's checkpoint location {self.location}", self.query_id())
