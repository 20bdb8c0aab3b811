"""The store's record of its variables, and the restart rule applied to what init declares."""

from __future__ import annotations

import pytest

from blobstate.model.changelog import StagedWrites
from blobstate.spark.errors import StateSchemaError
from blobstate.spark.processor.metadata import Declared, Metadata, load, reconcile, save
from blobstate.spark.processor.schema import parse
from blobstate.spark.processor.store import META_KEY, Store

KEY = parse("k string")


def _first(declared):
    return reconcile(Metadata(), declared, [], time_mode="ProcessingTime", key_schema=KEY)[0]


def test_new_variables_get_numbers_that_are_never_reused():
    meta = _first([Declared("a", "value", parse("n long")), Declared("b", "map", parse("v long"), parse("u string"))])
    assert (meta.variables["a"].vid, meta.variables["b"].vid, meta.next_vid) == (1, 2, 3)
    meta2, purged = reconcile(meta, [Declared("a", "value", parse("n long"))], ["a"], time_mode="ProcessingTime",
                              key_schema=KEY)
    assert [p.vid for p in purged] == [1] and meta2.variables["a"].vid == 3  # re-created: a new number
    assert meta2.variables["b"].vid == 2  # not declared this time: kept
    assert Metadata.from_json(meta2.to_json()) == meta2


def test_a_nullable_field_added_is_a_new_version_and_the_ttl_may_change():
    meta = _first([Declared("a", "value", parse("n long"), ttl_ms=10)])
    meta2, _ = reconcile(meta, [Declared("a", "value", parse("n long, s string"), ttl_ms=20)], [],
                         time_mode="ProcessingTime", key_schema=KEY)
    assert meta2.variables["a"].schemas == [parse("n long"), parse("n long, s string")]
    assert meta2.variables["a"].ttl_ms == 20 and meta.variables["a"].ttl_ms == 10  # the input is not changed


@pytest.mark.parametrize("declared, time_mode, key, role", [
    (Declared("a", "list", parse("n long")), "ProcessingTime", KEY, "kind"),
    (Declared("m", "map", parse("v long"), parse("u int")), "ProcessingTime", KEY, "user key"),
    (Declared("a", "value", parse("n int")), "ProcessingTime", KEY, "value"),
    (Declared("a", "value", parse("n long")), "EventTime", KEY, "time mode"),
    (Declared("a", "value", parse("n long")), "ProcessingTime", parse("k bigint"), "grouping key"),
])
def test_an_incompatible_declaration_is_refused(declared, time_mode, key, role):
    meta = _first([Declared("a", "value", parse("n long")), Declared("m", "map", parse("v long"), parse("u string"))])
    with pytest.raises(StateSchemaError) as err:
        reconcile(meta, [declared], [], time_mode=time_mode, key_schema=key)
    assert err.value.role == role


def test_the_document_is_written_only_when_it_changes(db):
    store = Store(StagedWrites(db))
    empty = load(store)
    meta = _first([Declared("a", "value", parse("n long"))])
    save(store, empty, meta)
    assert load(store) == meta
    other = Store(StagedWrites(db))
    save(other, meta, _first([Declared("a", "value", parse("n long"))]))
    assert other.get(META_KEY) is None  # nothing staged: the same record
