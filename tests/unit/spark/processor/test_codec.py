"""Keys encoded order-preserving and prefix-free; values as versioned msgpack arrays."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from blobstate.spark.errors import StateVariableError
from blobstate.spark.processor.codec import EPOCH, KeyCodec, ValueCodec, decode, encode, from_u64, u64
from blobstate.spark.processor.schema import parse

INT_STR = KeyCodec(parse("a bigint, b string"), what="key")
ints = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=6)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.none() | ints, texts), min_size=2, max_size=20, unique=True))
def test_the_bytes_sort_as_the_tuples_and_none_is_a_prefix_of_another(keys):
    encoded = {k: INT_STR.encode(k) for k in keys}
    order = sorted(keys, key=lambda k: (k[0] is not None, k[0] or 0, k[1]))  # None first, then numbers, then text
    assert sorted(keys, key=encoded.__getitem__) == order
    for k, e in encoded.items():
        assert INT_STR.decode(e + b"tail") == (k, len(e))
        assert not any(o != e and o.startswith(e) for o in encoded.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False), min_size=2, max_size=20, unique=True))
def test_floats_sort_including_negatives(values):
    codec = KeyCodec(parse("x double"), what="key")
    assert sorted(values, key=lambda v: codec.encode((v,))) == sorted(values)


def test_strings_with_zero_bytes_and_typed_fields_round_trip():
    codec = KeyCodec(parse("s string, b binary, t timestamp, u timestamp_ntz, d date, m decimal(8,3), f boolean"),
                     what="key")
    key = ("a\x00b", b"\x00\xff\x00", EPOCH + dt.timedelta(microseconds=-7), dt.datetime(2024, 5, 1, 12, 0, 0, 5),
           dt.date(1969, 12, 31), decimal.Decimal("-12.345"), True)
    assert codec.decode(codec.encode(key))[0] == key
    single = KeyCodec(parse("s string"), what="key")
    assert single.encode(("a",)) < single.encode(("a\x00",)) < single.encode(("b",))


def test_a_key_that_does_not_fit_is_refused():
    with pytest.raises(StateVariableError, match="expected 2 values"):
        INT_STR.encode((1,))
    with pytest.raises(StateVariableError):
        INT_STR.encode(("x", "y"))
    with pytest.raises(StateVariableError, match="64 bits"):
        KeyCodec(parse("d decimal(38,0)"), what="key").encode((decimal.Decimal(10) ** 30,))


def test_u64_orders_signed_milliseconds():
    values = [-(1 << 63), -5, 0, 1, 1_700_000_000_000, (1 << 63) - 1]
    assert sorted(values, key=u64) == values and [from_u64(u64(v)) for v in values] == values


def test_values_carry_their_version_and_expiry_and_read_into_the_current_schema():
    v1 = parse("n long, when timestamp")
    v2 = parse("n long, when timestamp, note string")
    old = ValueCodec([v1], what="v")
    stored = old.stored((3, EPOCH + dt.timedelta(seconds=1)), 5000)
    assert stored[:3] == [0, 5000, 3] and stored[3] == 1_000_000
    raw = encode(stored)
    assert old.read(decode(raw)) == (3, EPOCH + dt.timedelta(seconds=1))
    new = ValueCodec([v1, v2], what="v")
    assert new.read(decode(raw)) == (3, EPOCH + dt.timedelta(seconds=1), None)  # the added field reads None
    assert new.read(decode(encode(new.stored((4, None, "x"), None)))) == (4, None, "x")


@pytest.mark.parametrize("value, match", [(None, "cannot be None"), (5, "tuple"), ((1, 2, 3), "expected 2"),
                                          (("1", None), "'n'")])
def test_a_value_that_does_not_fit_is_refused(value, match):
    with pytest.raises(StateVariableError, match=match):
        ValueCodec([parse("n long, s string")], what="v").stored(value, None)
