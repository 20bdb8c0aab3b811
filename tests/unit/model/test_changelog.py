"""``blobstate.model.changelog``: the changelog encoding round-trips every op of every scalar type, any defect of a
blob read back is a ``CorruptIndexError`` naming it (never a partial list, never another exception), and a batch's
``StagedWrites`` over a real RocksDB (rocksdict under ``tmp_path``) reads its own writes, keeps the store untouched
until the changelog is replayed, and hands over one op per key in the order of their last writes."""

from __future__ import annotations

import enum
import math
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdict import Rdict

from blobstate.errors import ConfigurationError, CorruptIndexError
from blobstate.model import changelog as c

scalars = st.one_of(st.text(), st.binary(), st.integers(min_value=-(10**300), max_value=10**300),
                    st.floats(allow_nan=False), st.booleans())
ops = st.lists(st.one_of(st.tuples(st.just(c.PUT), scalars, scalars), st.tuples(st.just(c.DELETE), scalars,
                                                                                    st.none())), max_size=30)


def same(a, b) -> bool:
    """Equal and of the same type (``True == 1`` and ``1 == 1.0`` are not the same scalar)."""
    return type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


@pytest.fixture
def db(tmp_path):
    store = Rdict(str(tmp_path / "db"))
    yield store
    store.close()


@settings(max_examples=150, deadline=None)
@given(ops=ops)
def test_any_ops_round_trip_with_their_types(ops):
    back = c.decode(c.encode(ops))
    assert len(back) == len(ops)
    for (op, key, value), (op2, key2, value2) in zip(ops, back, strict=True):
        assert op == op2 and same(key, key2) and (value is None and value2 is None or same(value, value2))


def test_the_encoding_is_the_documented_one():
    data = c.encode([(c.PUT, "k", 7), (c.DELETE, b"\x00", None), (c.PUT, True, 1.5)])
    assert data == (b"BSCHLOG1" + struct.pack(">I", 3)
                    + b"P" + b"s" + struct.pack(">I", 1) + b"k" + b"i" + struct.pack(">I", 1) + b"7"
                    + b"D" + b"b" + struct.pack(">I", 1) + b"\x00"
                    + b"P" + b"t" + struct.pack(">I", 1) + b"\x01" + b"f" + struct.pack(">I", 8)
                    + struct.pack(">d", 1.5))


def test_an_empty_changelog_and_edge_values_round_trip():
    assert c.decode(c.encode([])) == []
    values = ["", "é\u202e", "\udcff", b"", 0, -1, 10**4000, -(10**4000), -0.0, math.inf, -math.inf, False]
    back = c.decode(c.encode([(c.PUT, v, v) for v in values]))
    assert all(same(k, v) and same(val, v) for (_, k, val), v in zip(back, values, strict=True))


def test_nan_round_trips_as_nan():
    [(_, _, value)] = c.decode(c.encode([(c.PUT, "k", math.nan)]))
    assert math.isnan(value)


@pytest.mark.parametrize("value", [-(10**4299), 10**4300 - 1, -(10**4300 - 1), -(10**640), 10**639],
                         ids=["-4300", "4300", "-4300-nines", "-641", "640"])  # digits
def test_every_int_that_encodes_decodes(value):
    """A sign and up to 4300 digits: decode's bound counted the minus sign, so -(10**4299) (4300 digits) was
    written into a changelog no restore could read."""
    assert c.decode(c.encode([(c.PUT, "k", value)])) == [(c.PUT, "k", value)]


@pytest.mark.parametrize("limit", [640, 0])
def test_the_changelog_does_not_depend_on_the_interpreters_int_limit(limit):
    """A process with another limit (``PYTHONINTMAXSTRDIGITS``) writes and reads the same changelogs."""
    written = c.encode([(c.PUT, -(10**4299), 10**4300 - 1)])
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        assert c.encode([(c.PUT, -(10**4299), 10**4300 - 1)]) == written
        assert c.decode(written) == [(c.PUT, -(10**4299), 10**4300 - 1)]
        with pytest.raises(ConfigurationError, match="at most 4300 digits"):
            c.encode([(c.PUT, "k", 10**4300)])
    finally:
        sys.set_int_max_str_digits(before)


def test_an_int_subclass_is_written_as_its_number():
    """An ``(int, Enum)`` member's ``str()`` is its name, which no reader takes for an int."""

    class Colour(int, enum.Enum):
        RED = 7

    assert c.decode(c.encode([(c.PUT, Colour.RED, Colour.RED)])) == [(c.PUT, 7, 7)]


@pytest.mark.parametrize("key, value, named", [
    ("k", 10**5000, r"the value of the write to key 'k'"),
    ("k", -(10**4300), r"the value of the write to key 'k'"),
    (10**5000, "v", r"the key of the write to an int key of 16610 bits"),
    ("x" * 100, 10**4300, r"the value of the write to key 'x{56}\.\.\."),
], ids=["value", "negative-value", "key", "long-key"])
def test_an_int_too_large_for_the_changelog_is_refused_when_staged_naming_the_key(db, key, value, named):
    """Refused at ``put`` with a ``ConfigurationError`` (exit 2), not by ``encode`` with a bare ``ValueError``
    when the batch commits; the write it would replace stays staged."""
    view = c.StagedWrites(db)
    view["k"] = "staged"
    with pytest.raises(ConfigurationError, match=rf"^{named} is an int of more than 4300 digits") as info:
        view.put(key, value)
    assert info.value.exit_code == 2
    assert view.ops() == [(c.PUT, "k", "staged")] and view["k"] == "staged"
    assert c.decode(c.encode(view.ops())) == view.ops()


@pytest.mark.parametrize("key, value, named", [("\udcff", "v", r"the key of the write to key '\\udcff'"),
                                                ("k", "a\ud800b", r"the value of the write to key 'k'")],
                         ids=["key", "value"])
def test_a_str_rocksdb_cannot_store_is_refused_when_staged(db, key, value, named):
    """A lone surrogate: the changelog encodes it, RocksDB refuses it, so a committed batch holding one could never
    be applied, nor replayed by a restore."""
    with pytest.raises(UnicodeEncodeError):
        c.apply_ops(db, [(c.PUT, key, value)])
    view = c.StagedWrites(db)
    with pytest.raises(ConfigurationError, match=rf"^{named} is not valid Unicode \(a lone surrogate at [01]\)"):
        view.put(key, value)
    assert view.ops() == []


def test_a_refused_write_leaves_the_write_it_would_replace(db):
    view = c.StagedWrites(db)
    view["k"] = "staged"
    with pytest.raises(ConfigurationError):
        view.put("k", [1])
    assert view.ops() == [(c.PUT, "k", "staged")]


GOOD = c.encode([(c.PUT, "key", "value"), (c.DELETE, 5, None)])


@pytest.mark.parametrize("data, why", [
    (b"", "magic"),
    (b"BSCHLOG2" + GOOD[8:], "magic"),
    (GOOD[:8] + struct.pack(">I", 10**6) + GOOD[12:], "declares 1000000 ops"),
    (GOOD[:12] + b"X" + GOOD[13:], "unknown op b'X' at byte 12"),
    (GOOD + b"\x00", "1 bytes after the last op"),
    (GOOD[:8] + struct.pack(">I", 1) + GOOD[12:], "bytes after the last op"),
    (c.MAGIC + struct.pack(">I", 1) + b"Pz" + struct.pack(">I", 0) + b"s" + struct.pack(">I", 0), "bad value tag b'z'"),
    (c.MAGIC + struct.pack(">I", 1) + b"Ds" + struct.pack(">I", 99) + b"ab", "runs past the end"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 0), "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 1) + b"-", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 2) + b"1x", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 4301) + b"9" * 4301, "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 4302) + b"-" + b"9" * 4301, "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 3) + b"--5", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 2) + b"+5", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 2) + b" 5", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Di" + struct.pack(">I", 3) + b"1_0", "bad integer"),
    (c.MAGIC + struct.pack(">I", 1) + b"Df" + struct.pack(">I", 4) + b"\x00" * 4, "bad value tag b'f'"),
    (c.MAGIC + struct.pack(">I", 1) + b"Dt" + struct.pack(">I", 1) + b"\x02", "bad value tag b't'"),
    (c.MAGIC + struct.pack(">I", 1) + b"Ds" + struct.pack(">I", 1) + b"\xff", "decode"),
    (c.MAGIC + b"\x00\x00", "unpack"),
])
def test_a_defective_changelog_is_a_corrupt_changelog_naming_its_source(data, why):
    with pytest.raises(CorruptIndexError, match=rf"^corrupt changelog job/0/s/blobs/x: .*{why}") as info:
        c.decode(data, source="job/0/s/blobs/x")
    assert info.value.exit_code == 3


def test_a_changelog_cut_at_any_byte_is_refused_whole():
    data = c.encode([(c.PUT, f"k{i}", "v" * i) for i in range(20)])
    for end in range(len(data)):
        with pytest.raises(CorruptIndexError):
            c.decode(data[:end])


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_are_a_corrupt_changelog(data):
    try:
        c.decode(c.MAGIC + data)
    except CorruptIndexError:
        pass


def test_staged_writes_read_their_own_writes_and_leave_the_store_alone(db):
    db["a"], db["b"], db[1] = "old-a", "old-b", 1.0
    view = c.StagedWrites(db)
    view["a"] = "new-a"
    view.put("c", b"new-c")
    del view["b"]
    view.delete("never-there")
    assert (view["a"], view.get("b", "gone"), view["c"], view[1]) == ("new-a", "gone", b"new-c", 1.0)
    assert "b" not in view and "a" in view and "never-there" not in view
    with pytest.raises(KeyError):
        view["b"]
    assert list(view.items()) == [("a", "new-a"), (1, 1.0), ("c", b"new-c")]  # the store's order, then new keys
    assert len(view) == 4
    assert (db["a"], db["b"]) == ("old-a", "old-b") and "c" not in db  # nothing reached RocksDB


def test_the_ops_are_one_per_key_in_the_order_of_their_last_writes(db):
    view = c.StagedWrites(db)
    view["x"] = 1
    view["y"] = 2
    view["x"] = 3
    view.delete("y")
    view["z"] = True
    assert view.ops() == [(c.PUT, "x", 3), (c.DELETE, "y", None), (c.PUT, "z", True)]
    view["x"] = 4
    assert view.ops() == [(c.DELETE, "y", None), (c.PUT, "z", True), (c.PUT, "x", 4)]
    view.discard()
    assert view.ops() == [] and len(view) == 0


def test_a_replayed_changelog_is_the_staged_batch(db, tmp_path):
    db["keep"], db["drop"] = "k", "d"
    view = c.StagedWrites(db)
    view["new"] = 10**30
    view["keep"] = "changed"
    del view["drop"]
    expected = dict(view.items())
    assert c.replay(db, c.encode(view.ops()), source="batch 3") == 3
    assert dict(db.items()) == expected == {"keep": "changed", "new": 10**30}


def test_replay_of_a_damaged_changelog_writes_nothing(db):
    db["keep"] = "k"
    data = c.encode([(c.PUT, "a", 1), (c.DELETE, "keep", None)])
    with pytest.raises(CorruptIndexError, match="batch 9"):
        c.replay(db, data[:-1], source="batch 9")
    assert dict(db.items()) == {"keep": "k"}


def test_keys_equal_in_python_but_distinct_in_rocksdb_stay_distinct(db):
    view = c.StagedWrites(db)
    view[1], view[1.0], view[True] = "int", "float", "bool"
    assert (view[1], view[1.0], view[True]) == ("int", "float", "bool")
    assert sorted(map(repr, view.ops())) == sorted(map(repr, [(c.PUT, 1, "int"), (c.PUT, 1.0, "float"),
                                                              (c.PUT, True, "bool")]))


#: keys Python calls equal (or, NaN, unequal to themselves) that RocksDB keeps apart, and their neighbours
CLASHING = [1, 1.0, True, 0, 0.0, -0.0, False, math.nan, "1", b"1", 10**30, float(10**30), "", b""]
writes = st.lists(st.tuples(st.sampled_from(CLASHING), st.one_of(st.none(), st.sampled_from(["a", b"b", 2, 2.0]))),
                  max_size=12)  # (key, value), None: a delete


def entries(items) -> list[tuple[str, str]]:
    """``items`` as (typed key, typed value) texts, sorted: ``1`` and ``True`` never compare equal here."""
    return sorted((f"{type(k).__name__}:{k!r}", f"{type(v).__name__}:{v!r}") for k, v in items)


@pytest.fixture(scope="module")
def store_and_mirror(tmp_path_factory):
    """Two real RocksDBs, opened once (an open costs ~0.1 s): each example empties them first."""
    root = tmp_path_factory.mktemp("clash")
    store, mirror = Rdict(str(root / "store")), Rdict(str(root / "mirror"))
    yield store, mirror
    store.close()
    mirror.close()


@settings(max_examples=150, deadline=None)
@given(base=writes, batch=writes)
def test_a_batch_on_keys_python_calls_equal_reads_and_replays_as_rocksdb_keeps_them(base, batch, store_and_mirror):
    """A real RocksDB written directly (``mirror``) is the reference: the view reads what it reads, and the
    changelog of the view, replayed on the store, leaves what it holds."""
    store, mirror = store_and_mirror
    for db in (store, mirror):
        for key in list(db.keys()):
            db.delete(key)
        for key, value in base:
            db.delete(key) if value is None else db.put(key, value)
    before = entries(store.items())
    view = c.StagedWrites(store)
    for key, value in batch:
        view.delete(key) if value is None else view.put(key, value)
        mirror.delete(key) if value is None else mirror.put(key, value)
    missing = object()
    for key in CLASHING:
        assert same(view.get(key, missing), mirror.get(key, missing)) and (key in view) == (key in mirror), key
    assert entries(view.items()) == entries(mirror.items())
    assert entries(store.items()) == before  # nothing reached RocksDB
    c.replay(store, c.encode(view.ops()))
    assert entries(store.items()) == entries(mirror.items())


@settings(max_examples=100, deadline=None)
@given(base=writes, batch=writes)
def test_batched_reads_and_writes_are_the_single_ones(base, batch, store_and_mirror):
    """``get_many`` reads what ``get`` reads key by key, keys Python calls equal kept
    apart; ``put_many`` stages what ``put`` one after the other stages."""
    store, mirror = store_and_mirror
    for db in (store, mirror):
        for key in list(db.keys()):
            db.delete(key)
    for key, value in base:
        store.delete(key) if value is None else store.put(key, value)
    batched, single = c.StagedWrites(store), c.StagedWrites(store)
    for key, value in batch:
        if value is None:
            batched.delete(key)
            single.delete(key)
        else:
            batched.put_many([(key, value)])
            single.put(key, value)
    batched.put_many([(k, v) for k, v in batch[:3] if v is not None])
    for key, value in batch[:3]:
        if value is not None:
            single.put(key, value)
    missing = object()
    assert repr(batched.ops()) == repr(single.ops())
    got = batched.get_many(CLASHING + CLASHING[::-1], missing)
    want = [single.get(key, missing) for key in CLASHING + CLASHING[::-1]]
    assert all(same(g, w) for g, w in zip(got, want, strict=True)), (got, want)
    plain = {}  # a store that is not RocksDB: read key by key
    assert c.StagedWrites(plain).get_many(["a", b"a"], "none") == ["none", "none"]


def test_put_many_with_one_bad_pair_stages_nothing(db):
    view = c.StagedWrites(db)
    view.put("kept", "old")
    with pytest.raises(ConfigurationError, match="not list"):
        view.put_many([("kept", "new"), ("k2", [1]), ("k3", "v")])
    assert view.ops() == [(c.PUT, "kept", "old")]
    view.put_many(iter([("a", 1), ("kept", "new"), ("a", 2)]))
    assert view.ops() == [(c.PUT, "kept", "new"), (c.PUT, "a", 2)]
    view.delete("a")
    assert view.get_many(["a", "kept", "nope"], "d") == ["d", "new", "d"]


@pytest.mark.parametrize("bad", [[1], {"a": 1}, None, object(), (1,)], ids=["list", "dict", "None", "object", "tuple"])
def test_other_types_are_refused_when_written_naming_the_type(db, bad):
    view = c.StagedWrites(db)
    with pytest.raises(ConfigurationError, match=rf"not {type(bad).__name__}: encode it first"):
        view.put("k", bad)
    with pytest.raises(ConfigurationError, match="keys"):
        view.put(bad, "v") if bad is not None else view.delete(bad)
    assert view.ops() == []


def test_encode_writes_each_item_as_its_scalar_encoding_whatever_headers_it_made_before():
    """The inline encoding (one header per tag and length, made once) gives the bytes of one ``_encode_scalar``
    per item: items of the same length and another type never share a header."""
    ops = [(c.PUT, b"ab", "cd"), (c.PUT, 12, b"xy"), (c.DELETE, "ef", None), (c.PUT, -5, 1.5), (c.PUT, True, 10**4000),
           (c.PUT, "é", b""), (c.PUT, b"ab", 34), (c.DELETE, 99, None)]
    body = b"".join(op + b"".join(c._encode_scalar(item) for item in ((k, v) if op == c.PUT else (k,)))
                    for op, k, v in ops)
    assert c.encode(ops) == c.MAGIC + c._U32.pack(len(ops)) + body
    assert c.decode(c.encode(ops)) == ops
