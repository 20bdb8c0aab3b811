"""``blobstate.spark.committed.location``, its pure parts: which session is a Connect one, Hadoop glob characters
escaped, Spark's "path not found" told from other errors, and what ``CheckpointLocation`` makes of what a Connect
session's file sources list and read (batch ids from ``commits/`` and ``offsets/``, the query id in ``metadata``). The
session here is a stand-in for Spark Connect's reader API (``spark.read.format("binaryFile").load(glob)`` and
``spark.read.text(glob)``) over a real checkpoint folder under ``tmp_path``; the JVM path is covered by
``tests/e2e``."""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import pytest

from blobstate.errors import StorageError
from blobstate.spark.committed.location import CheckpointLocation, _escape_glob, _missing, is_connect


class PathNotFound(Exception):
    """Shaped as Spark's classified errors: ``getCondition`` (Spark 4) or ``getErrorClass`` (3.x)."""

    def __init__(self, condition: str = "PATH_NOT_FOUND", *, old: bool = False) -> None:
        super().__init__(condition)
        setattr(self, "getErrorClass" if old else "getCondition", lambda: condition)


class Reader:
    """What ``spark.read`` answers, over the real files: hidden and empty files skipped, as ``binaryFile`` does."""

    def __init__(self, fail: Exception | None) -> None:
        self.fail = fail

    def format(self, name: str) -> Reader:
        assert name == "binaryFile"
        return self

    def _path(self, glob: str) -> str:
        return re.sub(r"\\(.)", r"\1", glob)  # the glob's escapes undone: this stand-in takes it literally

    def load(self, glob: str) -> SimpleNamespace:
        if self.fail:
            raise self.fail
        folder = self._path(glob)
        if not os.path.isdir(folder):
            raise PathNotFound()
        rows = [SimpleNamespace(path=f"file:{folder}/{n}") for n in sorted(os.listdir(folder))
                if not n.startswith((".", "_")) and os.path.getsize(os.path.join(folder, n))]
        return SimpleNamespace(select=lambda col: SimpleNamespace(collect=lambda: rows))

    def text(self, glob: str) -> SimpleNamespace:
        path = self._path(glob)
        if not os.path.exists(path):
            raise PathNotFound(old=True)
        lines = open(path).read().splitlines()
        return SimpleNamespace(collect=lambda: [SimpleNamespace(value=line) for line in lines])


def connect_session(fail: Exception | None = None) -> object:
    session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    session.read = Reader(fail)
    return session


@pytest.fixture
def location(tmp_path):
    root = tmp_path / "ck [q*1]"  # a name full of glob characters
    for sub, names in {"commits": ["0", "1", "10", "2", ".1.crc", "9.tmp"], "offsets": ["0", "1", "10", "11"]}.items():
        (root / sub).mkdir(parents=True)
        for n in names:
            (root / sub / n).write_text("v1\n{}")
    (root / "metadata").write_text('{"id":"5b1f-q"}\n')
    return root


def test_a_connect_session_is_told_by_its_module():
    assert is_connect(connect_session())
    assert not is_connect(type("SparkSession", (), {"__module__": "pyspark.sql.session"})())
    assert not is_connect(object())


def test_every_hadoop_glob_character_is_escaped_and_nothing_else():
    assert _escape_glob("/ck/a*b?c[d]e{f}g\\h") == "/ck/a\\*b\\?c\\[d\\]e\\{f\\}g\\\\h"
    assert _escape_glob("/plain/path-1_x.y é") == "/plain/path-1_x.y é"


def test_path_not_found_is_told_from_other_errors():
    assert _missing(PathNotFound()) and _missing(PathNotFound(old=True))
    assert not _missing(PathNotFound("PERMISSION_DENIED")) and not _missing(ValueError("PATH_NOT_FOUND"))
    broken = Exception("x")
    broken.getCondition = lambda: (_ for _ in ()).throw(RuntimeError("not classified"))
    assert not _missing(broken)


def test_the_batches_are_the_numbered_entries_in_numeric_order(location):
    ck = CheckpointLocation(connect_session(), f"{location}/")
    assert ck.location == str(location) and ck.connect and ck.qualified == str(location)
    assert ck.committed() == [0, 1, 2, 10] and ck.last_committed() == 10
    assert ck.batches("offsets") == [0, 1, 10, 11] and ck.last_planned() == 11
    assert ck.query_id() == "5b1f-q"


def test_a_location_spark_never_wrote_reads_as_empty(tmp_path):
    ck = CheckpointLocation(connect_session(), str(tmp_path / "new"))
    assert ck.committed() == [] and ck.last_committed() is None and ck.last_planned() is None
    assert ck.query_id() is None
    assert CheckpointLocation(connect_session(), "/").location == "/"


def test_a_location_that_cannot_be_listed_is_a_storage_error_naming_it(location):
    ck = CheckpointLocation(connect_session(fail=PathNotFound("PERMISSION_DENIED")), str(location))
    with pytest.raises(StorageError, match=rf"cannot list Spark's commits/ in {re.escape(str(location))}: "
                                           r"PERMISSION_DENIED"):
        ck.committed()


@pytest.mark.parametrize("text", ["", "not json\n", '{"name": "q"}\n', "[1]\n"])
def test_metadata_without_a_query_id_is_a_storage_error(location, text):
    (location / "metadata").write_text(text)
    with pytest.raises(StorageError, match=r"Spark's metadata in .* holds no query id"):
        CheckpointLocation(connect_session(), str(location)).query_id()


@pytest.mark.parametrize("name", ["²", "٣", "３", "1²", "-1", "+2", " 3", "4.crc", ".5.crc", "6.tmp"])
def test_a_stray_name_that_is_not_an_ascii_batch_number_is_not_a_batch(location, name):
    """Spark writes batch files named by ASCII digits only: '²' (str.isdigit, not int) raised a bare ValueError, and
    '٣' or '３' (str.isdecimal, read by int as 3) would have been taken for a batch Spark never committed."""
    (location / "commits" / name).write_text("stray")
    assert CheckpointLocation(connect_session(), str(location)).committed() == [0, 1, 2, 10]
