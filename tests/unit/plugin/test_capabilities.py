"""``blobstate.plugin.capabilities``: each optional capability is found by name on the real stores and logs that
offer it, through the wrappers that forward attributes (retry, codec, the sealed log), and is None where the class
does not offer it or offers something that cannot be called."""

from __future__ import annotations

import pytest

from blobstate.codec.cipher import ObjectCipher, new_key
from blobstate.codec.log import SealedCheckpointLog
from blobstate.codec.store import CodecBlobStore
from blobstate.model import layout
from blobstate.model.records import Checkpoint, StoreKey
from blobstate.plugin import capabilities as cap
from blobstate.plugin.interfaces import PutRequest
from blobstate.plugins.file_log import FileCheckpointLog
from blobstate.plugins.fsspec_store import FsspecBlobStore
from blobstate.repository.retry import RetryingBlobStore

KEY = StoreKey("job", "0", "store")


@pytest.fixture
def store(tmp_path):
    return FsspecBlobStore(f"file://{tmp_path}/repo")


def test_the_lease_mode_listing_is_found_through_every_wrapper_and_answers_as_the_three_calls(store):
    blob, kept = layout.blob_id(KEY, "a" * 32), layout.blob_id(KEY, "b" * 32)
    store.put(PutRequest(blob, b"x", ttl_ms=1))
    store.put(PutRequest(kept, b"y"))
    now = layout.now_ms() + 1000
    for wrapped in (store, RetryingBlobStore(store), CodecBlobStore(RetryingBlobStore(store))):
        fn = cap.listing_with_ttl(wrapped)
        assert callable(fn)
        objects, with_ttl, expired = fn(KEY.prefix, now)
        assert sorted(o.blob_id for o in objects) == sorted(o.blob_id for o in store.list(KEY.prefix))
        assert with_ttl == {blob} and expired == set(store.expired(KEY.prefix, now)) == {blob}


def test_a_store_without_a_recorded_expiry_says_none_and_the_retry_wrapper_answers_none(store):
    assert cap.recorded_expiry(store) is None
    fn = cap.recorded_expiry(RetryingBlobStore(store))
    assert callable(fn) and fn([layout.blob_id(KEY, "a" * 32)]) is None


def test_no_file_store_deletes_conditionally(store):
    assert cap.expired_delete(store) is None
    assert cap.expired_delete(RetryingBlobStore(store)) is None
    assert cap.expired_delete(CodecBlobStore(store)) is None


def test_the_file_logs_view_after_an_append_is_found_on_it_and_on_the_sealed_log(store):
    log = FileCheckpointLog(store)
    record = Checkpoint(KEY, "cp", 0, layout.index_id(KEY, "c" * 32), 1, 2, 3)
    appended = log.append(record, 0)
    fn = cap.after_append_history(log)
    assert fn(KEY, 60.0) == [appended]
    assert callable(cap.after_append_history(SealedCheckpointLog(log, ObjectCipher(new_key(), "r"))))


class Offers:
    """An object whose capabilities are plain attributes: not callable, so not offered."""

    list_with_ttl = None
    recorded_expiry = "yes"
    history_after_append = 1
    delete_if_expired = ()


@pytest.mark.parametrize("finder", [cap.listing_with_ttl, cap.recorded_expiry, cap.after_append_history,
                                    cap.expired_delete])
def test_an_attribute_that_cannot_be_called_or_none_at_all_is_no_capability(finder):
    assert finder(Offers()) is None
    assert finder(object()) is None
