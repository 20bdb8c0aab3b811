"""``blobstate.repository.engine_log``: a Spark checkpoint location on local files read without Spark: the batch a
restart takes as done (``commits/``, else the one before ``offsets/``'s newest), the query id from ``metadata``,
Hadoop's side files ignored, and ``StorageError`` for a ``metadata`` without a query id."""

from __future__ import annotations

import json

import pytest

from blobstate.errors import StorageError
from blobstate.repository.engine_log import read_spark_location


def _location(root, *, commits=(), offsets=(), metadata=None):  # noqa: ANN001, ANN202
    for folder, batches in (("commits", commits), ("offsets", offsets)):
        (root / folder).mkdir(parents=True)
        for batch in batches:
            (root / folder / str(batch)).write_text("v1\n{}")
            (root / folder / f".{batch}.crc").write_bytes(b"crc")  # Hadoop's side files
        (root / folder / "17.tmp").write_text("torn")
    if metadata is not None:
        (root / "metadata").write_text(metadata)
    return root


def test_the_newest_commit_is_done_and_the_query_id_is_read(tmp_path):
    _location(tmp_path / "ck", commits=(0, 1, 2, 10), offsets=(0, 1, 2, 10),
              metadata=json.dumps({"id": "q-1"}) + "\n")
    log = read_spark_location(str(tmp_path / "ck"))
    assert (log.done, log.query_id) == (10, "q-1")  # 10 sorts after 2 as a number
    assert str(tmp_path / "ck") in log.where


def test_a_planned_batch_not_committed_is_run_again(tmp_path):
    _location(tmp_path / "ck", commits=(0, 1), offsets=(0, 1, 2, 3))
    log = read_spark_location(f"file://{tmp_path}/ck")
    assert (log.done, log.query_id) == (2, None)


def test_a_location_that_does_not_exist_yet_has_nothing_done(tmp_path):
    assert read_spark_location(str(tmp_path / "nowhere")).done is None
    _location(tmp_path / "ck", offsets=(0,))
    assert read_spark_location(str(tmp_path / "ck")).done is None  # batch 0 planned, not committed: re-run


@pytest.mark.parametrize("metadata", ["", "{}", "not json", json.dumps(["id"])])
def test_metadata_without_a_query_id_is_a_storage_error(tmp_path, metadata):
    _location(tmp_path / "ck", commits=(0,), metadata=metadata)
    with pytest.raises(StorageError, match="holds no query id"):
        read_spark_location(str(tmp_path / "ck"))


def test_a_location_that_cannot_be_read_is_a_storage_error(tmp_path):
    (tmp_path / "ck" / "metadata").mkdir(parents=True)  # a folder where the file should be: reading it fails
    with pytest.raises(StorageError, match="cannot read Spark's checkpoint location"):
        read_spark_location(str(tmp_path / "ck"))
