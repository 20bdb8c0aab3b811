"""``blobstate.model.layout``: object names under a store's own prefix, checkpoint ids that sort by time, and
``owned``, the check every id read back from a repository, a log or a journal passes before a delete."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.errors import ForeignObjectError, IntegrityError
from blobstate.model import layout
from blobstate.model.records import StoreKey

KEY = StoreKey("job", "0", "store")
OTHER = StoreKey("job", "0", "store2")


def test_new_ids_lie_under_the_stores_own_folders_and_never_repeat():
    blobs = {layout.new_blob_id(KEY) for _ in range(200)}
    indexes = {layout.new_index_id(KEY) for _ in range(200)}
    assert len(blobs) == len(indexes) == 200
    assert all(KEY.owns_blob(b) and not KEY.owns_index(b) and not OTHER.owns_blob(b) for b in blobs)
    assert all(KEY.owns_index(i) and not KEY.owns_blob(i) and not OTHER.owns_index(i) for i in indexes)
    assert all(b.startswith("job/0/store/blobs/") for b in blobs)


def test_checkpoint_ids_are_milliseconds_then_random_and_sort_by_creation():
    ids = [layout.new_checkpoint_id() for _ in range(50)]
    assert all(re.fullmatch(r"\d{13}-[0-9a-f]{8}", i) for i in ids)
    stamps = [int(i.split("-")[0]) for i in ids]
    assert stamps == sorted(stamps) and abs(stamps[-1] - layout.now_ms()) < 60_000


def test_owned_passes_the_stores_own_blobs_and_indexes_in_order():
    ids = [layout.new_index_id(KEY), layout.new_blob_id(KEY), layout.new_blob_id(KEY)]
    assert layout.owned(KEY, iter(ids), what="test") == ids
    assert layout.owned(KEY, [], what="test") == []


@pytest.mark.parametrize("stranger", [
    f"job/0/store2/blobs/{'a' * 32}",  # another store whose name starts with ours
    f"job/0/store/blobs/{'a' * 31}",  # one hex short
    f"job/0/store/blobs/{'A' * 32}",  # not lowercase hex
    f"job/0/store/blobs/{'a' * 32}/../../../store2/blobs/{'a' * 32}",
    f"job/0/store/ttl/{'a' * 32}",  # a lease, not a blob
    f"job/0/store/indexes/{'a' * 32}",  # an index without its .json
    f"/job/0/store/blobs/{'a' * 32}",
    "checkpoints/job/0/store/00000000000000000001.json",
    "",
])
def test_owned_refuses_anything_else_naming_the_first_stranger(stranger):
    good = layout.new_blob_id(KEY)
    with pytest.raises(ForeignObjectError, match="retention names") as caught:
        layout.owned(KEY, [good, stranger, good], what="retention")
    assert isinstance(caught.value, IntegrityError)  # exit code 3


@settings(deadline=None)
@given(st.text(max_size=300))
def test_owned_never_prints_a_control_character_of_a_hostile_id(text):
    try:
        layout.owned(KEY, [text], what="the journal")
    except ForeignObjectError as exc:
        shown = str(exc)
        assert all(c.isprintable() for c in shown)
        assert len(shown) < 600
    else:
        assert KEY.owns_blob(text) or KEY.owns_index(text)


def test_the_defaults_are_a_day_three_checkpoints_and_64_mib():
    assert (layout.DEFAULT_TTL_MS, layout.DEFAULT_RETAIN, layout.DEFAULT_CHUNK_SIZE) == (86_400_000, 3, 64 << 20)


# -- naming and parsing every object ------------------------------------------------------------------------------
def test_every_object_kind_is_named_and_parsed_back():
    token = "ab" * 16
    named = {
        layout.blob_id(KEY, token): (layout.ObjectKind.BLOB, KEY, None),
        layout.index_id(KEY, token): (layout.ObjectKind.INDEX, KEY, None),
        layout.lease_id(layout.blob_id(KEY, token)): (layout.ObjectKind.LEASE, KEY, None),
        layout.lease_id(layout.index_id(KEY, token)): (layout.ObjectKind.LEASE, KEY, None),
        layout.record_id(KEY, 42): (layout.ObjectKind.RECORD, KEY, 42),
        layout.MARKER: (layout.ObjectKind.MARKER, None, None),
        f"{layout.scratch_prefix(token)}/probe": (layout.ObjectKind.SCRATCH, None, None),
    }
    for object_id, (kind, key, generation) in named.items():
        name = layout.parse(object_id)
        assert name is not None and (name.kind, name.key, name.generation) == (kind, key, generation), object_id
    assert layout.record_id(KEY, 42) == "checkpoints/job/0/store/00000000000000000042.json"
    doctors = StoreKey(layout.SCRATCH, "0", "store")  # a store's job may be named like the scratch prefix
    assert layout.parse(layout.blob_id(doctors, token)) == layout.ObjectName(layout.ObjectKind.BLOB, doctors, token)
    assert layout.lease_id(layout.index_id(KEY, token)) == f"job/0/store/ttl/{token}.json"


@pytest.mark.parametrize("object_id", [
    "", "job/0/store", "job/0/store/blobs", "job/0/store/other/x", "a b/0/store/blobs/x", "job/0/store/blobs/x/y",
    "checkpoints/job/0/store", "checkpoints/../0/store/00000000000000000001.json", "blobstate-repository.json.tmp",
])
def test_anything_else_is_no_object_of_the_layout(object_id):
    assert layout.parse(object_id) is None


def test_a_record_is_named_by_its_generation_only_in_twenty_ascii_digits():
    assert [layout.record_generation(n) for n in (
        "00000000000000000007.json", "7.json", "0000000000000000000x.json", "0000000000000000000².json",
        "00000000000000000007.json.tmp-ab", "00000000000000000007")] == [7, None, None, None, None, None]
    assert layout.parse("checkpoints/job/0/store/notes.txt").generation is None


@settings(deadline=None, max_examples=50)
@given(st.text("abcdef0123456789", min_size=32, max_size=32), st.booleans())
def test_a_lease_names_its_own_object_back(token, index):
    object_id = layout.index_id(KEY, token) if index else layout.blob_id(KEY, token)
    lease = layout.lease_id(object_id)
    assert layout.is_lease(lease) and not layout.is_lease(object_id)
    assert layout.leased_object(lease) == object_id
    assert layout.kind_of(object_id) is (layout.ObjectKind.INDEX if index else layout.ObjectKind.BLOB)


@pytest.mark.parametrize("data", [b"", b"{", b"[]", b'{"blobId": 1, "expiresAtMs": 2}',
                                  b'{"blobId": "x", "expiresAtMs": "2"}', b'{"blobId": "x"}',
                                  b'{"blobId": "x", "expiresAtMs": 1.5}'])
def test_anything_but_a_lease_is_refused_as_one(data):
    with pytest.raises(ValueError):
        layout.Lease.from_bytes(data)
