"""The three state variables through a handle, per grouping key, with Spark's return shapes and TTL."""

from __future__ import annotations

import pytest

from blobstate.model.changelog import StagedWrites, apply_ops
from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.codec import KeyCodec
from blobstate.spark.processor.handle import Handle, QueryInfo, Runtime
from blobstate.spark.processor.schema import parse
from blobstate.spark.processor.store import MAP, TTL_INDEX, VALUES, Store
from tests.unit.spark.processor.conftest import raw_keys

KEY = parse("k string")


def declare(db, at, declare_fn, time_mode="ProcessingTime"):
    view = StagedWrites(db)
    rt = Runtime(Store(view), time_mode=time_mode, processing_time_ms=at, watermark_ms=None, key_schema=KEY,
                 query=QueryInfo("q", "r", 0))
    handle = Handle(rt)
    variables = declare_fn(handle)
    handle.seal()
    return view, rt, variables


def on(rt, key):
    rt.current = KeyCodec(KEY, what="k").encode((key,))


def test_value_state_shapes_and_keys(db):
    view, rt, v = declare(db, 0, lambda h: h.getValueState("v", "n long, s string"))
    on(rt, "a")
    assert v.get() is None and not v.exists()
    v.update((1, "x"))
    assert v.get() == (1, "x") and type(v.get()) is tuple and v.exists()
    on(rt, "b")
    assert v.get() is None
    v.update([2, None])
    on(rt, "a")
    v.clear()
    assert v.get() is None
    rt.current = None
    with pytest.raises(StateVariableError, match="grouping key"):
        v.get()


def test_list_state_shapes_and_rules(db):
    view, rt, lst = declare(db, 0, lambda h: h.getListState("l", "n long"))
    on(rt, "a")
    assert list(lst.get()) == [] and not lst.exists()
    lst.put([(1,), (2,)])
    lst.appendValue((3,))
    lst.appendList([(4,), (5,)])
    assert list(lst.get()) == [(1,), (2,), (3,), (4,), (5,)]
    for call in (lambda: lst.put([]), lambda: lst.appendList([])):
        with pytest.raises(StateVariableError, match="empty"):
            call()
    lst.put(iter([(9,)]))
    assert list(lst.get()) == [(9,)]
    lst.clear()
    assert not lst.exists()


def test_map_state_shapes(db):
    view, rt, m = declare(db, 0, lambda h: h.getMapState("m", "u string", "c long, w double"))
    on(rt, "a")
    m.updateValue(("z",), (1, 0.5))
    m.updateValue(("b",), (2, 1.5))
    value = m.getValue(("z",))
    assert tuple(value) == (1, 0.5) and value.c == 1  # a Row, as Spark's client returns it
    assert m.getValue(("nope",)) is None and m.containsKey(("b",)) and not m.containsKey(("c",))
    assert list(m.iterator()) == [(("b",), (2, 1.5)), (("z",), (1, 0.5))]  # user key order
    assert list(m.keys()) == [("b",), ("z",)] and list(m.values()) == [(2, 1.5), (1, 0.5)]
    on(rt, "b")
    assert not m.exists() and list(m.iterator()) == []
    on(rt, "a")
    m.removeKey(("z",))
    assert list(m.keys()) == [("b",)]
    apply_ops(db, view.ops())
    view2, rt2, m2 = declare(db, 0, lambda h: h.getMapState("m", "u string", "c long, w double"))
    on(rt2, "a")
    m2.updateValue(("a",), (0, 0.0))
    assert list(m2.keys()) == [("a",), ("b",)]  # RocksDB's entries merged with this batch's
    m2.clear()
    assert not m2.exists()
    with pytest.raises(StateVariableError, match="user key"):
        m2.getValue("b")


def test_ttl_values_vanish_at_expiry_and_the_sweep_removes_them_and_their_index(db):
    def make(h):
        return (h.getValueState("v", "n long", ttlDurationMs=100), h.getListState("l", "n long", 100),
                h.getMapState("m", "u string", "n long", 100))
    view, rt, (v, lst, m) = declare(db, 1000, make)
    on(rt, "a")
    v.update((1,))
    lst.appendValue((1,))
    m.updateValue(("x",), (1,))
    apply_ops(db, view.ops())
    view, rt, (v, lst, m) = declare(db, 1050, make)
    on(rt, "a")
    lst.appendValue((2,))  # expires at 1150
    m.updateValue(("y",), (2,))
    assert v.get() == (1,) and list(lst.get()) == [(1,), (2,)]
    assert rt.sweep() == 0
    apply_ops(db, view.ops())
    view, rt, (v, lst, m) = declare(db, 1100, make)
    on(rt, "a")
    assert v.get() is None and not v.exists() and list(lst.get()) == [(2,)] and list(m.keys()) == [("y",)]
    assert m.getValue(("x",)) is None
    assert rt.sweep() == 3  # the value, the first element, the first entry
    apply_ops(db, view.ops())
    assert len(raw_keys(db, VALUES)) == 1 and len(raw_keys(db, MAP)) == 1  # the list (one element left), entry y
    assert len(raw_keys(db, TTL_INDEX)) == 2  # the list's new earliest expiry, y's
    view, rt, (v, lst, m) = declare(db, 1150, make)
    assert rt.sweep() == 2
    apply_ops(db, view.ops())
    assert raw_keys(db, VALUES) == raw_keys(db, MAP) == raw_keys(db, TTL_INDEX) == []


def test_an_update_moves_the_expiry_so_the_old_entry_never_removes_the_new_value(db):
    view, rt, v = declare(db, 0, lambda h: h.getValueState("v", "n long", ttlDurationMs=100))
    on(rt, "a")
    v.update((1,))
    apply_ops(db, view.ops())
    view, rt, v = declare(db, 90, lambda h: h.getValueState("v", "n long", ttlDurationMs=100))
    on(rt, "a")
    v.update((2,))  # now expires at 190
    apply_ops(db, view.ops())
    assert len(raw_keys(db, TTL_INDEX)) == 1
    view, rt, v = declare(db, 150, lambda h: h.getValueState("v", "n long", ttlDurationMs=100))
    assert rt.sweep() == 0
    on(rt, "a")
    assert v.get() == (2,)
