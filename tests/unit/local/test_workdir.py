"""``blobstate.local.workdir``: a store's work directory is named by its repository's id (never a URL), the layout
round-trips through ``base_of``, and what it remembers (restored destinations, the last completed checkpoint, the
restore lock) behaves as documented."""

from __future__ import annotations

import json
import os

import pytest

from blobstate.errors import LocalStoreError
from blobstate.local import workdir
from blobstate.model.records import StoreKey

KEY = StoreKey("job", "0", "counts")
ID = "0123456789abcdef0123456789abcdef"


def test_a_marker_id_names_the_directories_and_another_shape_is_hashed_to_32_hex():
    assert workdir.host_key(ID, "s3://bucket/a") == ID
    hashed = workdir.host_key("Not-An-Id", "s3://bucket/a")
    assert len(hashed) == 32 and set(hashed) <= set("0123456789abcdef") and hashed != ID
    assert hashed == workdir.host_key("Not-An-Id", "s3://other/b")  # the id decides, never the URL


def test_a_repository_without_an_id_keeps_the_hash_of_its_url_without_the_query():
    key = workdir.host_key("", "s3://bucket/a?token=one")
    assert key == workdir.repository_hash("s3://bucket/a?token=two") == workdir.repository_hash("s3://bucket/a")
    assert len(key) == 12 and key != workdir.repository_hash("s3://bucket/b")


def test_a_work_directory_is_refused_for_anything_but_a_host_key(tmp_path):
    assert workdir.store_work_dir(ID, KEY, str(tmp_path)) == str(tmp_path / ID / "job" / "0" / "counts")
    with pytest.raises(ValueError, match="host key"):
        workdir.store_work_dir("s3://bucket/a", KEY, str(tmp_path))


def test_base_of_finds_the_base_of_a_work_directory_laid_out_by_store_work_dir_and_none_elsewhere(tmp_path):
    path = workdir.store_work_dir(ID, KEY, str(tmp_path))
    assert workdir.base_of(path, ID, KEY) == str(tmp_path)
    assert workdir.base_of(str(tmp_path / "somewhere" / "else" / "x" / "y"), ID, KEY) is None
    assert workdir.base_of(path, "f" * 32, KEY) is None
    legacy = workdir.url_keyed_work_dir("s3://bucket/a", KEY, str(tmp_path))
    assert legacy == str(tmp_path / workdir.repository_hash("s3://bucket/a") / "job" / "0" / "counts")


def test_last_completed_reads_the_mark_and_none_when_missing_or_damaged(tmp_path):
    assert workdir.last_completed(str(tmp_path)) is None
    (tmp_path / workdir.LAST_COMPLETED).write_text(json.dumps({"checkpointId": "ck-7"}))
    assert workdir.last_completed(str(tmp_path)) == "ck-7"
    (tmp_path / workdir.LAST_COMPLETED).write_text("{not json")
    assert workdir.last_completed(str(tmp_path)) is None
    (tmp_path / workdir.LAST_COMPLETED).write_text(json.dumps({"other": 1}))
    assert workdir.last_completed(str(tmp_path)) is None


def test_local_checkpoint_dirs_are_directories_oldest_first_without_hidden_ones(tmp_path):
    assert workdir.local_checkpoint_dirs(str(tmp_path)) == []
    base = tmp_path / workdir.CHECKPOINTS
    for name in ("0002", "0001", ".tmp-0003"):
        (base / name).mkdir(parents=True)
    (base / "0000").write_text("a file, not a checkpoint")
    assert workdir.local_checkpoint_dirs(str(tmp_path)) == [str(base / "0001"), str(base / "0002")]


def test_a_destination_counts_as_restored_here_only_while_it_is_the_same_directory(tmp_path):
    work = str(tmp_path / "work")
    dest = tmp_path / "dest"
    dest.mkdir()
    assert not workdir.restored_here(work, str(dest))
    workdir.remember_restored(work, str(dest))
    assert workdir.restored_here(work, str(dest))
    assert not workdir.restored_here(None, str(dest))
    assert os.listdir(dest) == []  # nothing is kept inside the destination
    dest.rename(tmp_path / "moved")  # kept alive, so the new directory cannot reuse its inode
    dest.mkdir()
    assert not workdir.restored_here(work, str(dest))


def test_an_unreadable_record_of_restores_forgets_them(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    workdir.remember_restored(str(tmp_path), str(dest))
    (tmp_path / workdir.RESTORED).write_text("[1, 2")
    assert not workdir.restored_here(str(tmp_path), str(dest))
    workdir.remember_restored(None, str(dest))  # no work directory: nothing to write
    assert (tmp_path / workdir.RESTORED).read_text() == "[1, 2"


def test_one_restore_per_work_directory_at_a_time(tmp_path):
    work = str(tmp_path / "work")
    with workdir.restore_lock(work):
        with pytest.raises(LocalStoreError, match="another restore"):
            with workdir.restore_lock(work):
                pass
    with workdir.restore_lock(work):  # released at the end of the first
        pass
    with workdir.restore_lock(None), workdir.restore_lock(None):
        pass
