"""``blobstate.plugins.file_log`` on a real ``file://`` blob store: generations created exclusively (fencing),
a re-append of the same checkpoint idempotent, a zombie that re-creates a pruned generation removes its record and
is fenced, a record under another generation's name is corrupt, retention's removals, and one listing for every
store's history."""

from __future__ import annotations

import pytest

from blobstate.errors import CorruptIndexError, FencedError
from blobstate.model import layout
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugins.file_log import FileCheckpointLog, open_file_log, record_id
from blobstate.repository.backends import open_blob_store

KEY, OTHER = StoreKey("job", "0", "counts"), StoreKey("job", "1", "counts")


def _cp(key: StoreKey = KEY, name: str = "a") -> Checkpoint:
    return Checkpoint(store_key=key, checkpoint_id=f"1700000000000-{name}", generation=0,
                      index_blob_id=layout.new_index_id(key), index_crc32c=1, index_size=10, created_time_ms=1)


@pytest.fixture
def store(tmp_path):
    blob_store = open_blob_store(f"file://{tmp_path}/repo")
    yield blob_store
    blob_store.close()


@pytest.fixture
def log(store):
    return FileCheckpointLog(store, owns_store=False)


def _ids(records: list[Checkpoint]) -> list[str]:
    return [cp.checkpoint_id.split("-")[1] for cp in records]


def test_generations_start_at_one_and_a_stale_writer_is_fenced(log):
    assert log.latest(KEY) is None and log.history(KEY) == []
    assert log.append(_cp(name="a"), 0).generation == 1
    assert log.append(_cp(name="b"), 1).generation == 2
    with pytest.raises(FencedError) as fenced:
        log.append(_cp(name="c"), 1)
    assert (fenced.value.expected, fenced.value.actual) == (1, 2)
    assert _ids(log.history(KEY)) == ["a", "b"] and log.latest(KEY).checkpoint_id.endswith("-b")


def test_two_instances_racing_for_one_generation_one_wins(store):
    first, second = FileCheckpointLog(store, owns_store=False), FileCheckpointLog(store, owns_store=False)
    first.append(_cp(name="a"), 0)
    with pytest.raises(FencedError):
        second.append(_cp(name="b"), 0)
    assert _ids(second.history(KEY)) == ["a"]


def test_a_re_append_of_the_same_checkpoint_returns_the_record_that_landed(store, log):
    landed = log.append(_cp(name="a"), 0)
    log.append(_cp(name="b"), 1)
    again = FileCheckpointLog(store, owns_store=False).append(_cp(name="a"), 0)
    assert again == landed and len(log.history(KEY)) == 2


def test_a_zombie_recreating_a_pruned_generation_removes_its_record_and_is_fenced(store):
    zombie, live = FileCheckpointLog(store, owns_store=False), FileCheckpointLog(store, owns_store=False)
    zombie.append(_cp(name="a"), 0)  # its own view: generation 1 is the newest it saw, so it lists no more first
    live.append(_cp(name="b"), 1)
    live.append(_cp(name="c"), 2)
    assert _ids(live.prune(KEY, 1)) == ["a", "b"]  # generation 2 is free again
    with pytest.raises(FencedError, match="already has generation 3"):
        zombie.append(_cp(name="z"), 1)
    assert _ids(live.history(KEY)) == ["c"]
    assert sorted(i.blob_id for i in store.list(layout.RECORDS)) == [record_id(KEY, 3)]


def test_a_record_under_another_generations_name_is_corrupt(store, log):
    log.append(_cp(name="a"), 0)
    store.put(PutRequest(record_id(KEY, 2), _cp(name="x").with_generation(5).to_bytes()))
    with pytest.raises(CorruptIndexError, match="holds generation 5"):
        FileCheckpointLog(store, owns_store=False).history(KEY)


def test_prune_below_a_generation_and_forget_never_the_newest(log):
    for n, name in enumerate("abcd"):
        log.append(_cp(name=name), n)
    assert _ids(log.prune(KEY, 1, below=2)) == ["a"]
    history = log.history(KEY)
    with pytest.raises(ValueError, match="the newest record"):
        log.forget(KEY, [history[-1]])
    stale = _cp(name="other").with_generation(3)  # not the record at that generation: kept
    assert _ids(log.forget(KEY, [history[1], stale])) == ["c"]
    assert _ids(log.history(KEY)) == ["b", "d"] and log.can_forget


def test_keys_and_histories_from_one_listing_ignore_foreign_objects(store, log):
    log.append(_cp(KEY, "a"), 0)
    log.append(_cp(OTHER, "b"), 0)
    log.append(_cp(OTHER, "c"), 1)
    store.put(PutRequest(f"{layout.RECORDS}/README", b"not a record"))
    fresh = FileCheckpointLog(store, owns_store=False)
    assert fresh.keys() == [KEY, OTHER]
    histories = fresh.histories()
    assert _ids(histories[KEY]) == ["a"] and _ids(histories[OTHER]) == ["b", "c"]
    assert fresh.histories([StoreKey("job", "9", "none")]) == {StoreKey("job", "9", "none"): []}


def test_the_listing_after_an_append_serves_one_read_only(log):
    log.append(_cp(name="a"), 0)
    assert _ids(log.history_after_append(KEY, 60.0)) == ["a"]
    assert log.history_after_append(KEY, 60.0) is None  # once, then forgotten
    log.append(_cp(name="b"), 1)
    assert log.history_after_append(KEY, -1.0) is None  # too old


def test_a_log_opened_on_the_repositorys_store_does_not_close_it(store, tmp_path):
    shared = open_file_log(store.url, blob_store=store)
    shared.close()
    store.put(PutRequest("still/open", b"x"))
    own = open_file_log(f"file://{tmp_path}/other")
    own.append(_cp(name="a"), 0)
    assert own.latest(KEY).generation == 1
    own.close()
