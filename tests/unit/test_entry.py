"""``blobstate.entry``, the one way every verb reaches a repository: the store named once (the CLI names it the same
way), the repository opened with the call's settings (kept by it), a missing store named with the stores there are."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from blobstate.config.settings import Settings
from blobstate.entry import check_store, engine_log, name_store, open_repository, warn_unconfirmed
from blobstate.errors import NothingToRestore, RepositoryNotFound
from blobstate.model.records import Checkpoint, StoreKey


def test_a_store_is_named_by_its_parts_a_key_or_a_directory(tmp_path):
    assert name_store("j", "t", "s") == StoreKey("j", "t", "s")
    assert name_store(None, None, "s") == StoreKey("default", "0", "s")
    assert name_store("j", None, None, directory=str(tmp_path / "counts")) == StoreKey("j", "0", "counts")
    assert name_store("j", "t", "named", directory=str(tmp_path / "counts")) == StoreKey("j", "t", "named")
    key = StoreKey("a", "b", "c")
    assert name_store("x", "y", "z", key) is key
    with pytest.raises(TypeError, match="name the store"):
        name_store("j", "t", None)


def test_the_repository_keeps_the_settings_it_was_opened_with(tmp_path):
    settings = Settings.from_environ({"BLOBSTATE_RETRY_ATTEMPTS": "2", "BLOBSTATE_WORK_DIR": str(tmp_path / "w")})
    with pytest.raises(RepositoryNotFound):
        open_repository(str(tmp_path / "nothing"), None, None, settings=settings)
    with open_repository(str(tmp_path / "repo"), None, None, settings=settings, create=True) as repository:
        assert repository.settings is settings
        assert repository.codec.inner.attempts == 2  # the retrying wrapper of the blob store


def test_a_store_without_a_checkpoint_is_named_with_those_that_have_one(tmp_path):
    with open_repository(str(tmp_path / "repo"), None, None, settings=Settings(), create=True) as repository:
        with pytest.raises(NothingToRestore, match="the log holds no checkpoint of any store"):
            check_store(repository, StoreKey("j", "0", "s"))


def test_no_checkpoint_location_no_engine_log_and_a_querys_newest_state_is_unconfirmed(caplog):
    assert engine_log(None) is None
    plain = Checkpoint(StoreKey("j", "0", "s"), "c1", 1, "j/0/s/indexes/x.json", 0, 0, 0)
    with caplog.at_level(logging.WARNING, logger="blobstate.api"):
        warn_unconfirmed(plain.store_key, [plain])
        assert not caplog.records
        warn_unconfirmed(plain.store_key, [dataclasses.replace(plain, query_id="q-1")])
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["j/0/s"]
